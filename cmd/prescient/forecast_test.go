package main

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/datasets"
	"github.com/prescient-sched/prescient/internal/testenv"
)

// A small Philly slice: train, evaluate, predict, list and roll back
// through the command line, with JSON reports.
func TestForecastCommands(t *testing.T) {
	res, err := datasets.ReadTrace("philly:"+testenv.Dataset(t, "philly", "philly_jobs.csv"), datasets.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	trace := filepath.Join(dir, "philly4k.jsonl")
	f, err := os.Create(trace)
	if err != nil {
		t.Fatal(err)
	}
	if err := datasets.WriteJSONL(f, res.Jobs[:4000]); err != nil {
		t.Fatal(err)
	}
	f.Close()
	until := res.Jobs[3500].SubmitTime.Format("2006-01-02T15:04:05Z")
	reg := filepath.Join(dir, "models")
	learners := "--learners=rolling_median,global_median,gorgonia_mlp"

	t.Run("train prints one JSON report and publishes version 1", func(t *testing.T) {
		out, err := run(t, "train", "--target", "duration", "--trace", "prescient:"+trace, "--until", until, "--models", reg, learners, "--output", "json")
		if err != nil {
			t.Fatal(err)
		}
		var rep struct {
			ModelVersion int                           `json:"model_version"`
			Rows         int                           `json:"rows"`
			Selected     string                        `json:"selected"`
			Models       map[string]map[string]float64 `json:"models"`
			Baselines    map[string]map[string]float64 `json:"baselines"`
		}
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("not one JSON object: %v\n%s", err, out)
		}
		if rep.ModelVersion != 1 || rep.Rows == 0 || rep.Selected == "" || rep.Models["gorgonia_mlp"]["fit_s"] <= 0 || rep.Baselines["rolling_median"] == nil {
			t.Fatalf("report: %+v", rep)
		}
	})
	t.Run("evaluate scores the jobs from the date on", func(t *testing.T) {
		out, err := run(t, "evaluate", "--target", "duration", "--models", reg, "--trace", "prescient:"+trace, "--from", until, "--output", "json")
		if err != nil {
			t.Fatal(err)
		}
		var rep struct {
			EvaluatedRows int                           `json:"evaluated_rows"`
			Models        map[string]map[string]float64 `json:"models"`
		}
		if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.EvaluatedRows != 500 || rep.Models["gorgonia_mlp"]["spearman"] == 0 {
			t.Fatalf("%v: %s", err, out)
		}
	})
	t.Run("evaluate --until bounds the window", func(t *testing.T) {
		end := res.Jobs[3750].SubmitTime.Format("2006-01-02T15:04:05Z")
		out, err := run(t, "evaluate", "--target", "duration", "--models", reg, "--trace", "prescient:"+trace, "--from", until, "--until", end, "--output", "json")
		var rep struct {
			EvaluatedRows int `json:"evaluated_rows"`
		}
		if err != nil || json.Unmarshal([]byte(out), &rep) != nil || rep.EvaluatedRows != 250 {
			t.Fatalf("%v: %s", err, out)
		}
		if _, err := run(t, "evaluate", "--models", reg, "--trace", "prescient:"+trace, "--from", until, "--until", until); err == nil || !strings.Contains(err.Error(), "--until") {
			t.Errorf("an empty window: %v, want an error naming --until", err)
		}
	})
	t.Run("evaluate --origins backtests window by window", func(t *testing.T) {
		origins := res.Jobs[2500].SubmitTime.Format("2006-01-02T15:04:05Z") + "," + res.Jobs[3250].SubmitTime.Format("2006-01-02T15:04:05Z") + "," + until
		out, err := run(t, "evaluate", "--target", "duration", "--trace", "prescient:"+trace, "--origins", origins, learners, "--output", "json")
		if err != nil {
			t.Fatal(err)
		}
		var rep struct {
			Windows []struct {
				Jobs     int                           `json:"jobs"`
				Selected string                        `json:"selected"`
				Models   map[string]map[string]float64 `json:"models"`
			} `json:"windows"`
			Worst map[string]map[string]float64 `json:"worst"`
		}
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("not one JSON object: %v\n%s", err, out)
		}
		if len(rep.Windows) != 2 || rep.Windows[0].Jobs != 750 || rep.Windows[1].Jobs != 250 || rep.Worst["served"] == nil ||
			rep.Worst["rolling_median"]["mae_log"] == 0 {
			t.Fatalf("backtest report: %+v", rep)
		}
		table, err := run(t, "evaluate", "--trace", "prescient:"+trace, "--origins", origins, learners)
		if err != nil || !strings.Contains(table, "(served)") || !strings.Contains(table, "worst of all") {
			t.Fatalf("backtest table: %v\n%s", err, table)
		}
		if _, err := run(t, "evaluate", "--trace", "prescient:"+trace, "--origins", origins, "--models", reg); err == nil || !strings.Contains(err.Error(), "--models") {
			t.Errorf("a backtest with --models: %v, want an error naming --models", err)
		}
	})
	t.Run("predict writes one JSON object per job", func(t *testing.T) {
		specs := filepath.Join(dir, "specs.jsonl")
		body := `{"id":"a","tenant":"11cb48","gpus":4,"submit_time":"2017-12-01T10:00:00Z","state":"queued"}` + "\n" +
			`{"id":"b","tenant":"nobody","gpus":1,"submit_time":"2017-12-01 10:00:00","state":"queued"}` + "\n"
		if err := os.WriteFile(specs, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := run(t, "predict", "--models", reg, "--jobs", specs, "-o", "json")
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 2 {
			t.Fatalf("%d lines:\n%s", len(lines), out)
		}
		var fc map[string]any
		if err := json.Unmarshal([]byte(lines[0]), &fc); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"job_id", "duration_p50_s", "duration_p90_s", "memory_p50_bytes", "memory_p90_bytes", "model_version", "top_features"} {
			if _, ok := fc[k]; !ok {
				t.Errorf("forecast lacks %s: %s", k, lines[0])
			}
		}
	})
	t.Run("predict takes a spec without state or time, and prints a table", func(t *testing.T) {
		specs := filepath.Join(dir, "bare.jsonl")
		if err := os.WriteFile(specs, []byte(`{"id":"a","gpus":1}`+"\n"+`{"id":"b","gpus":8,"tenant":"11cb48"}`+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := run(t, "predict", "--models", reg, "--jobs", specs)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 3 || !strings.HasPrefix(lines[0], "JOB") || !strings.HasPrefix(lines[1], "a ") || strings.Contains(out, "{") {
			t.Fatalf("want a header and two rows:\n%s", out)
		}
		if strings.Contains(out, ".99999") || strings.Contains(out, ".00000") {
			t.Errorf("unrounded figures:\n%s", out)
		}
	})
	t.Run("predict names the line and field of a malformed job spec", func(t *testing.T) {
		bad := filepath.Join(dir, "bad.jsonl")
		os.WriteFile(bad, []byte(`{"id":"a","gpus":-2,"submit_time":"2017-12-01T10:00:00Z","state":"queued"}`+"\n"), 0o644)
		_, err := run(t, "predict", "--models", reg, "--jobs", bad)
		if err == nil || !strings.Contains(err.Error(), "bad.jsonl:1") || !strings.Contains(err.Error(), "gpus") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("models list shows the versions and rollback needs an older one", func(t *testing.T) {
		out, err := run(t, "models", "list", "--models", reg, "--output", "json")
		if err != nil || !strings.Contains(out, `"current": true`) {
			t.Fatalf("%v\n%s", err, out)
		}
		if _, err := run(t, "models", "rollback", "--models", reg); err == nil {
			t.Fatal("rollback with one version succeeded")
		}
	})
	t.Run("a missing flag or a bad target is a clear error", func(t *testing.T) {
		if _, err := run(t, "train", "--trace", "prescient:"+trace); err == nil || !strings.Contains(err.Error(), "--models") {
			t.Fatalf("err = %v", err)
		}
		if _, err := run(t, "train", "--target", "latency", "--trace", "x:y", "--models", reg); err == nil || !strings.Contains(err.Error(), "--target") {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestServeRetrainEveryNeedsARegistry(t *testing.T) {
	_, err := run(t, "serve", "--db", filepath.Join(t.TempDir(), "p.db"), "--addr", "127.0.0.1:0", "--retrain-every", "6h")
	if err == nil || !strings.Contains(err.Error(), "--models") {
		t.Fatalf("err = %v", err)
	}
}

func TestServeWithRetrainingStopsWhenTheListenerFails(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		_, err := run(t, "serve", "--db", filepath.Join(t.TempDir(), "p.db"), "--listen", ln.Addr().String(),
			"--retrain-every", "6h", "--models", t.TempDir())
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "--listen") {
			t.Fatalf("err = %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve hung after its listener failed")
	}
}

func FuzzParseDays(f *testing.F) {
	for _, s := range []string{"10d", "0.5d", "240h", "-1d", "d", "1e9d", "NaNd", "10"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := parseDays(s)
		if err == nil && d <= 0 {
			t.Fatalf("parseDays(%q) = %s without an error", s, d)
		}
	})
}
