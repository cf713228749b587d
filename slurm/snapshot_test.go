package slurm_test

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/slurm"
)

func readJobs(t *testing.T, path string) []slurm.Job {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	jobs, err := slurm.ParseJobs(f)
	if err != nil {
		t.Fatal(err)
	}
	return jobs
}

func byID(jobs []slurm.Job) map[string]slurm.Job {
	m := map[string]slurm.Job{}
	for _, j := range jobs {
		m[j.ID] = j
	}
	return m
}

// squeue_22.05.json was recorded from Debian's Slurm 22.05.8 (the cluster
// of internal/slurmtest): completed, failed, cancelled, running, pending,
// held and unlimited jobs.
func TestParseJobsSlurm22(t *testing.T) {
	jobs := byID(readJobs(t, "testdata/squeue_22.05.json"))
	if len(jobs) != 8 {
		t.Fatalf("%d jobs, want 8", len(jobs))
	}
	for _, c := range []struct {
		id, state, reason string
		limit             time.Duration
		nice              int
		gpus, cpus        int64
		held              bool
	}{
		{"1", "COMPLETED", "None", 5 * time.Minute, 0, 1, 1, false},
		{"2", "FAILED", "NonZeroExitCode", 5 * time.Minute, 0, 1, 1, false},
		{"5", "RUNNING", "None", 2 * time.Hour, 0, 2, 2, false},
		{"6", "PENDING", "Resources", 24 * time.Hour, 50, 4, 1, false},
		{"7", "PENDING", "JobHeldUser", 30 * time.Minute, 0, 1, 1, true},
		{"8", "COMPLETED", "None", 0, 0, 1, 1, false}, // UNLIMITED
	} {
		j := jobs[c.id]
		if j.State != c.state || j.Reason != c.reason || j.TimeLimit != c.limit || j.Nice != c.nice ||
			j.GPUs != c.gpus || j.CPUs != c.cpus || j.Held() != c.held {
			t.Errorf("job %s: %+v", c.id, j)
		}
	}
	if j := jobs["6"]; j.AdminComment != "site: check quota" || j.Submit.IsZero() || j.Partition != "gpu" || j.User != "root" {
		t.Errorf("job 6: %+v", j)
	}
	if j := jobs["5"]; j.Start.IsZero() || j.Nodes != "vm" {
		t.Errorf("job 5: %+v", j)
	}
}

// 22.05 writes a negative Nice as the uint32 it wraps to (seen in
// TestOrderingThroughNiceOnRealSlurm); job 6's recorded 50 becomes -658333.
func TestParseJobsNegativeNice(t *testing.T) {
	b, err := os.ReadFile("testdata/squeue_22.05.json")
	if err != nil {
		t.Fatal(err)
	}
	b = bytes.Replace(b, []byte(`"nice": 50,`), []byte(`"nice": 4294308963,`), 1)
	jobs, err := slurm.ParseJobs(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if got := byID(jobs)["6"].Nice; got != -658333 {
		t.Errorf("nice %d, want -658333", got)
	}
	for _, bad := range []string{`"nice": 4294967296,`, `"nice": 1.5,`} {
		if _, err := slurm.ParseJobs(bytes.NewReader(bytes.Replace(b, []byte(`"nice": 4294308963,`), []byte(bad), 1))); err == nil || !strings.Contains(err.Error(), "nice") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

// The v0.0.40 documents are written by hand in the shapes of Slurm 23.11's
// data parser: {set, infinite, number} numbers, state lists, typed GRES.
func TestParseJobsV0040(t *testing.T) {
	jobs := byID(readJobs(t, "testdata/squeue_v0.0.40.json"))
	w := jobs["6"]
	if !w.Pending() || w.TimeLimit != 24*time.Hour || w.GPUs != 4 || w.Nice != 50 || w.Priority != 4294901704 ||
		w.Submit != time.Unix(1796641900, 0).UTC() || w.User != "alice" {
		t.Errorf("job 6: %+v", w)
	}
	r := jobs["9"]
	if !r.Running() || r.TimeLimit != 0 || r.GPUs != 2 || r.AdminComment != "site note [prescient: limit 5m]" {
		t.Errorf("job 9: %+v", r)
	}
}

// squeue_22.05_array.json: two pending arrays recorded from 22.05, one of
// 20 tasks, one of tasks 1-9:2 at most 2 at once (squeue writes
// "1,3,5,7,9%2"), behind a running job.
func TestParseJobArrays(t *testing.T) {
	jobs := byID(readJobs(t, "testdata/squeue_22.05_array.json"))
	for id, want := range map[string][2]int{"1": {0, 0}, "2": {20, 0}, "3": {5, 2}} {
		if j := jobs[id]; j.Tasks != want[0] || j.MaxTasks != want[1] || (j.Tasks > 0) != (j.ArrayTasks != "") {
			t.Errorf("job %s: %d tasks, %d at once; want %v", id, j.Tasks, j.MaxTasks, want)
		}
	}
	for _, bad := range []string{"5-1", "x", "1-x", "1-10:0", "-3"} {
		doc := `{"jobs": [{"job_id": 1, "job_state": "PENDING", "array_task_string": "` + bad + `"}]}`
		if _, err := slurm.ParseJobs(strings.NewReader(doc)); err == nil || !strings.Contains(err.Error(), "array_task_string") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func readNodes(t *testing.T, path string) []slurm.Node {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := slurm.ParseNodes(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return nodes
}

func TestParseNodes(t *testing.T) {
	n := readNodes(t, "testdata/sinfo_22.05.json")
	if len(n) != 1 || n[0].Name != "vm" || n[0].GPUs != 4 || n[0].CPUs != 16 || !n[0].Has("MIXED") || n[0].Idle() {
		t.Errorf("22.05: %+v", n)
	}
	n = readNodes(t, "testdata/scontrol_nodes_v0.0.40.json")
	if len(n) != 2 || n[0].GPUs != 4 || n[0].GPUsUsed != 2 || n[0].CPUsUsed != 2 || n[0].Idle() {
		t.Errorf("v0.0.40 gpu1: %+v", n)
	}
	if g := n[1]; !g.Parked() || g.Idle() || g.GPUs != 4 || len(g.Partitions) != 2 || g.Reason != "prescient: idle 10m0s" {
		t.Errorf("v0.0.40 gpu2: %+v", g)
	}
}

func TestParseErrorsSayWhere(t *testing.T) {
	for _, c := range []struct{ doc, want string }{
		{`{"jobs": [{"job_id": 1, "job_state": "PENDING"}, {"job_id": "x"}]}`, "job 2: field job_id"},
		{`{"jobs": [{"job_id": 1, "job_state": 7}]}`, "job 1: field job_state"},
		{`{"jobs": [{"job_id": 1, "job_state": "PENDING", "tres_req_str": "gres/gpu=-1"}]}`, "field tres_req_str"},
		{`{"jobs": [{"job_id": 1, "job_state": "PENDING", "time_limit": {"set": true, "number": -5}}]}`, "field time_limit"},
		{`{"jobs": [`, "squeue --json: unexpected EOF"},
	} {
		_, err := slurm.ParseJobs(strings.NewReader(c.doc))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.doc, err, c.want)
		}
	}
	// Recorded from 22.05 with slurmctld stopped: exit code 0, no jobs, an error.
	b, err := os.ReadFile("testdata/squeue_22.05_controller_down.json")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := slurm.ParseJobs(bytes.NewReader(b)); err == nil || !strings.Contains(err.Error(), "slurm_load_jobs: Failed while looking for jobs") {
		t.Errorf("controller down: %v", err)
	}
	_, err = slurm.ParseNodes(strings.NewReader(`{"nodes": [{"name": "n1", "state": "idle", "gres": "gpu:x:y"}]}`))
	if err == nil || !strings.Contains(err.Error(), `node 1 ("n1"): field gres`) {
		t.Errorf("nodes: %v", err)
	}
}

func FuzzParseJobs(f *testing.F) {
	for _, p := range []string{"testdata/squeue_22.05.json", "testdata/squeue_v0.0.40.json", "testdata/squeue_22.05_array.json"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"jobs": [{"job_id": 1, "job_state": ["PENDING"], "time_limit": {"infinite": true}}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		jobs, err := slurm.ParseJobs(bytes.NewReader(b))
		if err != nil {
			return
		}
		for _, j := range jobs {
			if j.ID == "" || j.State == "" || j.TimeLimit < 0 || j.GPUs < 0 || j.CPUs < 0 || j.Tasks < 0 || j.MaxTasks < 0 {
				t.Fatalf("accepted a job it should not have: %+v", j)
			}
		}
	})
}

func FuzzParseNodes(f *testing.F) {
	for _, p := range []string{"testdata/sinfo_22.05.json", "testdata/scontrol_nodes_v0.0.40.json"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		nodes, err := slurm.ParseNodes(bytes.NewReader(b))
		if err != nil {
			return
		}
		for _, n := range nodes {
			if n.Name == "" || n.GPUs < 0 || n.CPUs < 0 || n.GPUsUsed < 0 {
				t.Fatalf("accepted a node it should not have: %+v", n)
			}
		}
	})
}
