package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/collector"
	"github.com/prescient-sched/prescient/collector/nvml"
	"github.com/prescient-sched/prescient/datasets"
	"github.com/prescient-sched/prescient/store"
)

// train --target memory on a job history without memory labels learns
// them from the embedded telemetry store (--telemetry-db), where the
// collector recorded each job's processes.
func TestTrainMemoryFillsPeaksFromTelemetry(t *testing.T) {
	ctx := context.Background()
	cfg := datasets.DefaultGenerateConfig()
	cfg.Jobs = 800
	jobs, err := datasets.Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	db := filepath.Join(dir, "telemetry.db")
	st, err := store.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	var samples []collector.Sample
	for i := range jobs {
		j := &jobs[i]
		peak := j.Outcome.PeakGPUMemoryBytes
		j.Outcome.PeakGPUMemoryBytes = 0
		if peak <= 0 || j.StartTime.IsZero() {
			continue
		}
		for k, v := range []int64{peak / 3, peak} {
			samples = append(samples, collector.Sample{Time: j.StartTime.Add(time.Duration(k) * j.EndTime.Sub(j.StartTime)), Node: "n1",
				DeviceInfo:   nvml.DeviceInfo{UUID: "GPU-" + string(j.ID), Model: "NVIDIA A100-SXM4-80GB"},
				DeviceSample: nvml.DeviceSample{MemUsedBytes: uint64(v), MemTotalBytes: 80 << 30},
				Processes:    []collector.ProcessSample{{PID: 7, JobID: string(j.ID), MemUsedBytes: uint64(v)}}})
		}
	}
	if err := collector.NewEmbeddedSink(st).Write(ctx, samples); err != nil {
		t.Fatal(err)
	}
	st.Close()
	trace := filepath.Join(dir, "history.jsonl")
	f, err := os.Create(trace)
	if err != nil {
		t.Fatal(err)
	}
	if err := datasets.WriteJSONL(f, jobs); err != nil {
		t.Fatal(err)
	}
	f.Close()
	reg := filepath.Join(dir, "models")
	args := []string{"train", "--target", "memory", "--trace", "prescient:" + trace, "--models", reg,
		"--learners=rolling_median,global_median", "--output", "json"}

	if _, err := run(t, args...); err == nil || !strings.Contains(err.Error(), "not enough labelled jobs") {
		t.Fatalf("without telemetry: %v; want too few labelled jobs", err)
	}
	out, err := run(t, append(args, "--telemetry-db", db)...)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		ModelVersion int  `json:"model_version"`
		Rows         int  `json:"rows"`
		Published    bool `json:"published"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || !rep.Published || rep.ModelVersion != 1 || rep.Rows < 600 {
		t.Fatalf("with --telemetry-db: %+v, %v\n%s", rep, err, out)
	}
	for _, bad := range [][]string{
		{"--telemetry-db", filepath.Join(dir, "none.db")},
		{"--telemetry-db", db, "--influx-url", "http://127.0.0.1:1"},
	} {
		if _, err := run(t, append(args, bad...)...); err == nil || !strings.Contains(err.Error(), bad[0]) {
			t.Errorf("%v: %v; want an error naming %s", bad, err, bad[0])
		}
	}
	if _, err := run(t, "train", "--target", "duration", "--trace", "prescient:"+trace, "--models", reg, "--telemetry-db", db); err == nil ||
		!strings.Contains(err.Error(), "only --target memory") {
		t.Errorf("--telemetry-db with --target duration: %v", err)
	}
}

// train --target memory --series publishes the online peak refinement to
// the registry's peak target, which models list shows.
func TestTrainPeakRefinementPublishesThePeakTarget(t *testing.T) {
	dir := t.TempDir()
	// 120 containers, 5 hours a minute apart: a footprint that climbs to
	// its plateau over 30 to 120 minutes.
	var b strings.Builder
	b.WriteString("timestamp_anon,value,container_ip\n")
	for c := range 120 {
		plateau, ramp := float64(4+c%70)*(1<<30), 30+float64(c%90)
		for m := range 300 {
			v := plateau * (1.0/3 + 2.0/3*min(float64(m)/ramp, 1)) * (1 + 0.02*float64((m*7+c)%5-2))
			fmt.Fprintf(&b, "%d,%.0f,container%03d\n", 1662858720+60*m, v, c)
		}
	}
	series := filepath.Join(dir, "memory.csv")
	if err := os.WriteFile(series, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	reg := filepath.Join(dir, "models")
	out, err := run(t, "train", "--target", "memory", "--series", "genai-memory:"+series, "--models", reg, "--learners", "golearn_forest", "--output", "json")
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Selected     string `json:"selected"`
		ModelVersion int    `json:"model_version"`
		Published    bool   `json:"published"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || !rep.Published || rep.ModelVersion != 1 || rep.Selected != "golearn_forest" {
		t.Fatalf("%+v, %v\n%s", rep, err, out)
	}
	out, err = run(t, "models", "list", "--target", "peak", "--models", reg, "--output", "json")
	if err != nil || !strings.Contains(out, `"current": true`) || !strings.Contains(out, `"target": "peak"`) {
		t.Fatalf("models list --target peak: %v\n%s", err, out)
	}
	if _, err := run(t, "train", "--target", "duration", "--series", "genai-memory:"+series, "--models", reg); err == nil ||
		!strings.Contains(err.Error(), "--series") {
		t.Errorf("--series with --target duration: %v", err)
	}
	// evaluate with --models scores the published version, fitted on
	// nothing, on the series it did not see.
	out, err = run(t, "evaluate", "--target", "memory", "--series", "genai-memory:"+series, "--models", reg, "--output", "json")
	var ev struct {
		Selected    string                        `json:"selected"`
		FitExamples int                           `json:"fit_examples"`
		Series      int                           `json:"series"`
		Models      map[string]map[string]float64 `json:"models"`
	}
	if err != nil || json.Unmarshal([]byte(out), &ev) != nil || ev.Selected != "golearn_forest" || ev.FitExamples != 0 ||
		ev.Series == 0 || ev.Models["golearn_forest"] == nil {
		t.Fatalf("evaluate --models: %v, %+v\n%s", err, ev, out)
	}
	if _, err := run(t, "evaluate", "--target", "memory", "--series", "genai-memory:"+series, "--models", filepath.Join(dir, "none")); err == nil ||
		!strings.Contains(err.Error(), "--models") {
		t.Errorf("evaluate --models with no peak version: %v", err)
	}
	// --folds cross-validates: every container scored once, by a
	// refinement that never saw it.
	out, err = run(t, "evaluate", "--target", "memory", "--series", "genai-memory:"+series, "--folds", "3", "--output", "json")
	var cv struct {
		Folds []struct {
			Series   int    `json:"series"`
			Selected string `json:"selected"`
		} `json:"folds"`
		Pooled map[string]map[string]float64 `json:"pooled"`
	}
	if err != nil || json.Unmarshal([]byte(out), &cv) != nil || len(cv.Folds) != 3 || cv.Pooled["served"] == nil {
		t.Fatalf("evaluate --folds 3: %v, %+v\n%s", err, cv, out)
	}
	if n := cv.Folds[0].Series + cv.Folds[1].Series + cv.Folds[2].Series; n != 120 {
		t.Errorf("the folds scored %d containers, want all 120", n)
	}
	for _, args := range [][]string{{"--folds", "3", "--models", reg}, {"--folds", "1"}} {
		if _, err := run(t, append([]string{"evaluate", "--target", "memory", "--series", "genai-memory:" + series}, args...)...); err == nil ||
			!strings.Contains(err.Error(), "--folds") {
			t.Errorf("evaluate %v: %v, want an error naming --folds", args, err)
		}
	}
}

// train --target power measures the fleet's draw from its telemetry and
// writes the file simulate --power-model reads.
func TestTrainPowerWritesTheMeasuredModel(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := filepath.Join(dir, "telemetry.db")
	st, err := store.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	var samples []collector.Sample
	for m := range 240 {
		s := collector.Sample{Time: start.Add(time.Duration(m) * time.Minute), Node: "n1",
			DeviceInfo: nvml.DeviceInfo{UUID: "GPU-1", Model: "Tesla V100-SXM2-32GB"}}
		s.PowerLimitW, s.PowerW = 300, 60
		if m%2 == 0 {
			s.PowerW, s.UtilGPUPct = 240, 95
		}
		samples = append(samples, s)
	}
	if err := collector.NewEmbeddedSink(st).Write(ctx, samples); err != nil {
		t.Fatal(err)
	}
	st.Close()
	out := filepath.Join(dir, "power.json")
	stdout, err := run(t, "train", "--target", "power", "--telemetry-db", db, "--from", "2026-11-30", "--until", "2026-11-30T04:00:00",
		"--out", out, "--output", "json")
	if err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	var rep struct {
		Models []struct {
			Model        string  `json:"model"`
			IdleFraction float64 `json:"idle_fraction"`
			LoadFraction float64 `json:"load_fraction"`
		} `json:"models"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || len(rep.Models) != 1 || math.Abs(rep.Models[0].IdleFraction-0.2) > 1e-9 || math.Abs(rep.Models[0].LoadFraction-0.8) > 1e-9 {
		t.Fatalf("report %s (%v), want the V100 at 0.2 idle and 0.8 working", stdout, err)
	}
	if b, err := os.ReadFile(out); err != nil || !strings.Contains(string(b), `"load_fraction": 0.7999`) {
		t.Fatalf("--out: %s (%v)", b, err)
	}
	if _, err := run(t, "train", "--target", "power", "--telemetry-db", db, "--out", out, "--from", "2020-01-01", "--until", "2020-01-02"); err == nil ||
		!strings.Contains(err.Error(), "not enough power telemetry") {
		t.Errorf("a window without telemetry: %v", err)
	}
	if _, err := run(t, "simulate", "--trace", "philly:/nonexistent", "--fleet", "uniform:1x8:V100", "--power-model", filepath.Join(dir, "missing.json")); err == nil {
		t.Error("a missing --power-model file was accepted")
	}
}
