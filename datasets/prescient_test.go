package datasets

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/internal/testenv"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata")

// goldenJobs are the jobs of testdata/prescient_golden.jsonl: one with every
// field set, a queued fractional job, a running job with a checkpoint and a
// CPU-only cancelled one.
func goldenJobs() []cluster.Job {
	t0 := time.Date(2024, 3, 1, 9, 0, 0, 0, time.UTC)
	return []cluster.Job{
		{
			ID: "train-1", SubmitTime: t0,
			Spec: cluster.JobSpec{
				Name: "bert-large", Tenant: "research", User: "ada", Tier: cluster.TierProduction,
				GPUs: 8, GPUMilli: cluster.MilliGPU, GPUModels: []string{"A100-SXM4-80GB", "H100-SXM5-80GB"},
				CPUMilli: 64000, MemoryBytes: 512 << 30, Deadline: t0.Add(48 * time.Hour), GangSize: 2,
				Checkpointable: true, CheckpointCost: 45 * time.Second,
				Labels: map[string]string{cluster.LabelFramework: "pytorch", cluster.LabelModel: "bert", cluster.LabelBatchSize: "64"},
				Data:   &cluster.DataSource{Name: "wiki-2024", Bytes: 2 << 40, Nodes: []string{"dgx-01"}, Racks: []string{"rack-a"}},
			},
			State: cluster.StateSucceeded, Attempts: 2,
			LastCheckpoint: &cluster.Checkpoint{Time: t0.Add(3 * time.Hour), Step: 12000, Path: "/ckpt/train-1/12000"},
			StartTime:      t0.Add(10 * time.Minute), EndTime: t0.Add(4 * time.Hour),
			Outcome: cluster.Outcome{RunTime: 3*time.Hour + 40*time.Minute + 1500*time.Millisecond,
				PeakGPUMemoryBytes: 71 << 30, EnergyJ: 3.1e7, ExitCode: 0},
		},
		{
			ID: "notebook-7", SubmitTime: t0.Add(time.Hour),
			Spec:  cluster.JobSpec{Tenant: "teaching", User: "bob", Tier: cluster.TierOpportunistic, GPUs: 1, GPUMilli: 250},
			State: cluster.StateQueued,
		},
		{
			ID: "sweep-3", SubmitTime: t0.Add(2 * time.Hour),
			Spec: cluster.JobSpec{Name: "sweep <lr=1e-3> & more", Tenant: "research", Tier: cluster.TierBatch,
				GPUs: 1, GPUMilli: cluster.MilliGPU, Checkpointable: true, CheckpointCost: 10 * time.Second},
			State: cluster.StateRunning, Attempts: 1, StartTime: t0.Add(2*time.Hour + 5*time.Minute),
			LastCheckpoint: &cluster.Checkpoint{Time: t0.Add(3 * time.Hour)},
		},
		{
			ID: "etl-9", SubmitTime: t0.Add(2 * time.Hour),
			Spec:  cluster.JobSpec{Tenant: "data", Tier: cluster.TierStandard, CPUMilli: 4000},
			State: cluster.StateCancelled, Attempts: 1, StartTime: t0.Add(2 * time.Hour), EndTime: t0.Add(150 * time.Minute),
			Outcome: cluster.Outcome{RunTime: 30 * time.Minute, ExitCode: -15},
		},
	}
}

func TestPrescientGoldenFile(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteJSONL(&buf, goldenJobs()); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "prescient_golden.jsonl")
	if *update {
		if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if want := readTestdata(t, "prescient_golden.jsonl"); !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("WriteJSONL output differs from %s (run with -update after checking the change)\n got:\n%s\nwant:\n%s", golden, buf.Bytes(), want)
	}
	res, err := ReadTrace("prescient:"+golden, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := goldenJobs()
	sortJobs(want)
	if !reflect.DeepEqual(res.Jobs, want) {
		t.Errorf("reading the golden file back:\n got %+v\nwant %+v", res.Jobs, want)
	}
}

func TestPrescientRoundTripOfGeneratedHistory(t *testing.T) {
	cfg := DefaultGenerateConfig()
	cfg.Jobs = 2000
	jobs, err := Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteJSONL(&buf, jobs); err != nil {
		t.Fatal(err)
	}
	for name, path := range map[string]string{
		"plain": writeTemp(t, buf.Bytes(), "history.jsonl"),
		"gzip":  gzipToTemp(t, buf.Bytes(), "history.jsonl"),
	} {
		t.Run(name, func(t *testing.T) {
			res, err := ReadTrace("prescient:"+path, ReadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(res.Jobs, jobs) {
				for i := range jobs {
					if !reflect.DeepEqual(res.Jobs[i], jobs[i]) {
						t.Fatalf("job %d differs:\n got %+v\nwant %+v", i, res.Jobs[i], jobs[i])
					}
				}
				t.Fatalf("read %d jobs, wrote %d", len(res.Jobs), len(jobs))
			}
		})
	}
}

func TestPrescientReaderAcceptsBlankLinesAndShortForms(t *testing.T) {
	data := "\n" +
		`{"id":"a","gpus":2,"submit_time":"2024-03-01","state":"queued"}` + "\n" +
		"   \n" +
		`{"id":"b","gpus":0,"submit_time":"2024-03-01 10:00:00","state":"succeeded","tier":"Batch","run_time_s":1.5}` + "\n"
	res, err := readPrescient(strings.NewReader(data), "h.jsonl", ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Jobs) != 2 {
		t.Fatalf("%d jobs, want 2", len(res.Jobs))
	}
	a, b := res.Jobs[0], res.Jobs[1]
	if a.Spec.Tier != cluster.DefaultTier || a.Spec.GPUMilli != cluster.MilliGPU {
		t.Errorf("a: tier %v, gpu_milli %d; want the default tier and whole GPUs", a.Spec.Tier, a.Spec.GPUMilli)
	}
	if b.Spec.Tier != cluster.TierBatch || b.Outcome.RunTime != 1500*time.Millisecond ||
		!b.SubmitTime.Equal(time.Date(2024, 3, 1, 10, 0, 0, 0, time.UTC)) {
		t.Errorf("b = %+v", b)
	}
}

func TestPrescientBadLines(t *testing.T) {
	good := `{"id":"ok-%d","gpus":1,"submit_time":"2024-03-01T00:00:00Z","state":"queued"}`
	tests := []struct{ name, line, field, want string }{
		{"an unknown key is an error", `{"id":"x","gpus":1,"submit_time":"2024-03-01","state":"queued","colour":"red"}`, "", "unknown field"},
		{"broken JSON is an error", `{"id":"x",`, "", "not a JSON record"},
		{"two objects on a line are an error", `{"id":"x","submit_time":"2024-03-01","state":"queued"} {}`, "", "more than one JSON value"},
		{"a string where a number belongs is an error", `{"id":"x","gpus":"one","submit_time":"2024-03-01","state":"queued"}`, "", "gpus"},
		{"an unknown tier names the field", `{"id":"x","tier":"gold","submit_time":"2024-03-01","state":"queued"}`, "tier", "unknown priority tier"},
		{"an unknown state names the field", `{"id":"x","submit_time":"2024-03-01","state":"done"}`, "state", "unknown job state"},
		{"a missing submit time names the field", `{"id":"x","state":"queued"}`, "submit_time", "empty"},
		{"a bad time names the field", `{"id":"x","submit_time":"March 1st","state":"queued"}`, "submit_time", "not a time"},
		{"a missing id names the field", `{"submit_time":"2024-03-01","state":"queued"}`, "id", "empty"},
		{"a negative run time names the field", `{"id":"x","submit_time":"2024-03-01","state":"failed","run_time_s":-1}`, "run_time_s", "negative"},
		{"a run time of centuries names the field", `{"id":"x","submit_time":"2024-03-01","state":"failed","run_time_s":1e300}`, "run_time_s", "too large"},
		{"too many GPUs names the field", `{"id":"x","gpus":100001,"submit_time":"2024-03-01","state":"queued"}`, "gpus", "too large"},
		{"a repeated id is an error", `{"id":"ok-1","gpus":1,"submit_time":"2024-03-01","state":"queued"}`, "id", "duplicate"},
		{"a checkpoint without a time names the field", `{"id":"x","submit_time":"2024-03-01","state":"running","last_checkpoint":{"step":3}}`, "last_checkpoint.time", "empty"},
		{"a dataset without a name names the field", `{"id":"x","submit_time":"2024-03-01","state":"queued","data":{"bytes":5}}`, "data.name", "empty"},
		{"a negative dataset size names the field", `{"id":"x","submit_time":"2024-03-01","state":"queued","data":{"name":"d","bytes":-5}}`, "data.bytes", "negative"},
		{"a warm copy on a node without a name names the field", `{"id":"x","submit_time":"2024-03-01","state":"queued","data":{"name":"d","nodes":["n1",""]}}`, "data.nodes[1]", "empty"},
		{"a warm copy in a rack without a name names the field", `{"id":"x","submit_time":"2024-03-01","state":"queued","data":{"name":"d","racks":[""]}}`, "data.racks[0]", "empty"},
		{"validation errors of the job are reported", `{"id":"x","gpus":2,"gpu_milli":500,"submit_time":"2024-03-01","state":"queued"}`, "", "gpu_milli"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Line 1 is blank, so the bad record is on line 3.
			data := "\n" + strings.Replace(good, "%d", "1", 1) + "\n" + tt.line + "\n" + strings.Replace(good, "%d", "2", 1) + "\n"
			assertBadRow(t, readPrescient, data, tt.field, nil, 2)
			_, err := readPrescient(strings.NewReader(data), "f.csv", ReadOptions{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v does not mention %q", err, tt.want)
			}
		})
	}
}

func TestRecordJobErrorNamesTheField(t *testing.T) {
	_, err := Record{ID: "x", SubmitTime: "2024-03-01", State: "queued", CheckpointCostS: -3}.Job()
	if err == nil || !strings.HasPrefix(err.Error(), "checkpoint_cost_s:") {
		t.Errorf("error = %v, want one starting with the field", err)
	}
}

func TestWriteJSONLRefusesAnInvalidJob(t *testing.T) {
	jobs := goldenJobs()
	jobs[1].Spec.GPUMilli = 0
	var buf bytes.Buffer
	err := WriteJSONL(&buf, jobs)
	if err == nil || !strings.Contains(err.Error(), "notebook-7") || !strings.Contains(err.Error(), "gpu_milli") {
		t.Errorf("error = %v, want one naming the job and the field", err)
	}
}

func TestWriteJSONLReportsWriteErrors(t *testing.T) {
	if err := WriteJSONL(failingWriter{}, goldenJobs()); err == nil {
		t.Error("no error from a failing writer")
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// TestDurationsSurviveJSONToTheNanosecond writes and reads random run
// times of up to 2^23 s (about 97 days) with nanosecond parts.
func TestDurationsSurviveJSONToTheNanosecond(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	job := goldenJobs()[0]
	for range 20000 {
		want := time.Duration(r.Int64N(1<<23*int64(time.Second)) + 1)
		job.Outcome.RunTime = want
		data, err := json.Marshal(RecordFromJob(job))
		if err != nil {
			t.Fatal(err)
		}
		var rec Record
		if err := json.Unmarshal(data, &rec); err != nil {
			t.Fatal(err)
		}
		back, err := rec.Job()
		if err != nil {
			t.Fatal(err)
		}
		if back.Outcome.RunTime != want {
			t.Fatalf("run time %d ns came back as %d ns", want, back.Outcome.RunTime)
		}
	}
}

// docs/data-formats.md documents the format with an example record; it must
// stay one that the reader takes.
func TestDataFormatsExampleRecordIsValid(t *testing.T) {
	const doc = "docs/data-formats.md"
	text, err := os.ReadFile(filepath.Join(testenv.RepoRoot(t), doc))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(text), "```json\n")
	example, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal(doc + " has no ```json example of the prescient format")
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, []byte(example)); err != nil {
		t.Fatalf("%s example is not JSON: %v", doc, err)
	}
	res, err := readPrescient(bytes.NewReader(append(compact.Bytes(), '\n')), doc, ReadOptions{})
	if err != nil || len(res.Jobs) != 1 {
		t.Fatalf("%s example record: %v (%d jobs)", doc, err, len(res.Jobs))
	}
	if j := res.Jobs[0]; j.Attempts != 2 || j.LastCheckpoint == nil || j.Spec.Labels[cluster.LabelFramework] != "pytorch" {
		t.Fatalf("%s example read as %+v", doc, j)
	}
}
