package main

import (
	"encoding/csv"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/datasets"
	"github.com/prescient-sched/prescient/internal/testenv"
)

// On a slice of the KTH SP2 log: train run times on its first 8,000 jobs,
// then recommend limits for the next 2,000 through evaluate --target
// limit. The learned limits sit well below the users' own and let few
// completed jobs run past them; a replay backfills with them.
func TestEvaluateLimitsOnKTH(t *testing.T) {
	trace := "swf:" + testenv.Dataset(t, "swf", "KTH-SP2-1996-2.1-cln.swf.gz")
	res, err := datasets.ReadTrace(trace, datasets.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	from := res.Jobs[8000].SubmitTime.Format(time.RFC3339)
	until := res.Jobs[10000].SubmitTime.Format(time.RFC3339)
	reg := filepath.Join(t.TempDir(), "models")
	if _, err := run(t, "train", "--target", "duration", "--trace", trace, "--until", from, "--models", reg,
		"--learners=gbt,rolling_median,global_median", "--gate-windows", "1"); err != nil {
		t.Fatal(err)
	}
	dump := filepath.Join(t.TempDir(), "limits.csv")
	out, err := run(t, "evaluate", "--target", "limit", "--models", reg, "--trace", trace, "--from", from, "--until", until, "--output", "json",
		"--dump", dump)
	if err != nil {
		t.Fatal(err)
	}
	type metrics struct {
		RanPast float64 `json:"ran_past_limit_pct"`
		Median  float64 `json:"limit_over_run_median"`
		Lowered float64 `json:"lowered_pct"`
		Jobs    int     `json:"jobs"`
	}
	var rep struct {
		Selected  string             `json:"selected"`
		Models    map[string]metrics `json:"models"`
		Baselines map[string]metrics `json:"baselines"`
		Completed int                `json:"completed_jobs"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("not one JSON object: %v\n%s", err, out)
	}
	user, gbt := rep.Baselines["user"], rep.Models["gbt"]
	t.Logf("completed %d; user: %+v; gbt: %+v; rolling median: %+v", rep.Completed, user, gbt, rep.Baselines["rolling_median"])
	if rep.Completed < 1000 || user.Jobs != rep.Completed || gbt.Jobs != rep.Completed {
		t.Fatalf("report: %+v", rep)
	}
	if gbt.Median > 0.8*user.Median || gbt.Lowered < 20 {
		t.Errorf("gbt's limits: median %.2f of the run time, %.0f%% lowered; the users' %.2f", gbt.Median, gbt.Lowered, user.Median)
	}
	if gbt.RanPast > 8 {
		t.Errorf("gbt's limits: %.1f%% of completed jobs ran past them", gbt.RanPast)
	}

	// The dump gives back gbt's figures: its scored rows are the report's
	// jobs, and their limits run past as often as the report says.
	rows := readCSV(t, dump)
	if want := []string{"model", "job", "user", "submit", "end", "request_s", "run_s", "median_log_s", "scored", "margin_log_s", "limit_s"}; !slices.Equal(rows[0], want) {
		t.Fatalf("dump header %q", rows[0])
	}
	scored, past, warm := 0, 0, 0
	for _, r := range rows[1:] {
		if r[0] != "gbt" {
			continue
		}
		if r[8] != "true" {
			warm++
			continue
		}
		scored++
		run, _ := strconv.ParseFloat(r[6], 64)
		if limit, err := strconv.ParseFloat(r[10], 64); err == nil && run > limit {
			past++
		}
	}
	if scored != gbt.Jobs || warm == 0 || math.Abs(100*float64(past)/float64(scored)-gbt.RanPast) > 0.01 {
		t.Errorf("dump: %d scored rows (%d ran past), %d warm-up; report: %d jobs, %.2f%% ran past", scored, past, warm, gbt.Jobs, gbt.RanPast)
	}
	if _, err := run(t, "evaluate", "--target", "duration", "--models", reg, "--trace", trace, "--from", from, "--dump", dump); err == nil || !strings.Contains(err.Error(), "--dump") {
		t.Errorf("--dump with --target duration: got %v", err)
	}

	if _, err := run(t, "evaluate", "--target", "limit", "--models", reg, "--trace", trace, "--from", from, "--run-past", "0"); err == nil || !strings.Contains(err.Error(), "--run-past") {
		t.Errorf("--run-past 0: got %v", err)
	}

	// The same registry's recommended limits as backfill estimates.
	out, err = run(t, "simulate", "--trace", trace, "--fleet", trace, "--from", from, "--until", until, "--policy", "easy-backfill",
		"--estimates", "learned", "--models", reg, "-o", "json", "--log-level", "error")
	if err != nil {
		t.Fatal(err)
	}
	var sim map[string]any
	if err := json.Unmarshal([]byte(out), &sim); err != nil {
		t.Fatal(err)
	}
	if sim["jobs"] != sim["finished"] || sim["jobs"].(float64) != 2000 || sim["avg_bounded_slowdown"].(float64) < 1 {
		t.Errorf("backfill with learned estimates: %v jobs, %v finished, bounded slowdown %v", sim["jobs"], sim["finished"], sim["avg_bounded_slowdown"])
	}
}

// readCSV reads a whole CSV file.
func readCSV(t *testing.T, path string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil || len(rows) == 0 {
		t.Fatalf("%s: %d rows, %v", path, len(rows), err)
	}
	return rows
}
