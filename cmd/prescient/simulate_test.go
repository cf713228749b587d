package main

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor/park"
	"github.com/prescient-sched/prescient/internal/testenv"
)

// simulateKeys are the keys the issue defines for one run.
var simulateKeys = []string{"jobs", "finished", "avg_jct_s", "p50_jct_s", "p99_jct_s", "avg_wait_s", "p99_wait_s", "makespan_s",
	"gpu_alloc_pct", "deadline_jobs", "deadline_feasible", "deadline_met_pct", "preemptions", "lost_gpu_s", "checkpoint_gpu_s",
	"energy_kwh", "jain_fairness", "wait_by_tier_s", "wait_by_tenant_s", "sim_wall_s", "decisions_per_s"}

func TestSimulateOnePolicyIsOneObjectWithTheIssuesKeys(t *testing.T) {
	trace := "philly:" + filepath.Join(testenv.RepoRoot(t), "datasets", "testdata", "philly_small.csv")
	out, err := run(t, "simulate", "--trace", trace, "--fleet", "uniform:2x8:V100", "--policy", "fifo", "-o", "json", "--log-level", "error")
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("not one JSON object: %v\n%s", err, out)
	}
	for _, k := range simulateKeys {
		if _, ok := got[k]; !ok {
			t.Errorf("key %s missing", k)
		}
	}
	if got["jobs"] != got["finished"] || got["jobs"].(float64) == 0 {
		t.Errorf("jobs %v, finished %v", got["jobs"], got["finished"])
	}
}

// --until bounds the submissions of a window; the replay still finishes
// every job it took.
func TestSimulateUntilBoundsTheWindow(t *testing.T) {
	trace := "philly:" + filepath.Join(testenv.RepoRoot(t), "datasets", "testdata", "philly_small.csv")
	count := func(args ...string) float64 {
		t.Helper()
		out, err := run(t, append([]string{"simulate", "--trace", trace, "--fleet", "uniform:2x8:V100", "--policy", "fifo", "-o", "json", "--log-level", "error"}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatal(err)
		}
		if got["jobs"] != got["finished"] {
			t.Errorf("%v: %v jobs, %v finished", args, got["jobs"], got["finished"])
		}
		return got["jobs"].(float64)
	}
	all, window := count(), count("--from", "2017-10-01", "--until", "2017-10-09T07:00:00Z")
	if all != 6 || window != 3 {
		t.Errorf("%g jobs in the whole trace, %g from Oct 1 to Oct 9 07:00; want 6 and 3", all, window)
	}
	if _, err := run(t, "simulate", "--trace", trace, "--fleet", "uniform:2x8", "--policy", "fifo", "--from", "2017-10-09", "--until", "2017-10-01"); err == nil ||
		!strings.Contains(err.Error(), "--until") {
		t.Errorf("--until before --from: %v", err)
	}
}

func TestSimulateSeveralPoliciesGivesRunsAndAPlot(t *testing.T) {
	path := testenv.Dataset(t, "philly", "philly_jobs.csv")
	plot := filepath.Join(t.TempDir(), "jct.svg")
	out, err := run(t, "simulate", "--trace", "philly:"+path, "--fleet", "uniform:10x8:V100", "--from", "2017-11-10", "--limit", "800",
		"--policy", "fifo,sjf-oracle,prescient", "--oracle", "--deadlines", "0.3:2", "--tier-mix", "production=1,batch=3", "--node-mtbf", "500h", "--plot", plot, "-o", "json", "--log-level", "error")
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Runs []map[string]any `json:"runs"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || len(got.Runs) != 3 {
		t.Fatalf("want {\"runs\": [3 runs]}: %v\n%s", err, out)
	}
	var names []string
	for _, r := range got.Runs {
		names = append(names, r["policy"].(string))
		if tiers := r["wait_by_tier_s"].(map[string]any); len(tiers) != 2 {
			t.Errorf("%s: wait by tier %v, want production and batch", r["policy"], tiers)
		}
		if r["deadline_jobs"].(float64) == 0 || r["finished"] != r["jobs"] {
			t.Errorf("%s: deadline jobs %v, finished %v of %v", r["policy"], r["deadline_jobs"], r["finished"], r["jobs"])
		}
	}
	if !slices.Equal(names, []string{"fifo", "sjf-oracle", "prescient"}) {
		t.Errorf("runs %v", names)
	}
	svg, err := os.ReadFile(plot)
	if err != nil || !strings.Contains(string(svg), "<polyline") || !strings.HasSuffix(strings.TrimSpace(string(svg)), "</svg>") {
		t.Errorf("plot: %v\n%.200s", err, svg)
	}
	table, err := run(t, "simulate", "--trace", "philly:"+path, "--fleet", "uniform:10x8:V100", "--from", "2017-11-10", "--limit", "200", "--log-level", "error")
	if err != nil || !strings.Contains(table, "AVG JCT") || !strings.Contains(table, "fifo") {
		t.Errorf("table: %v\n%s", err, table)
	}
}

func TestSimulateRejectsBadSettings(t *testing.T) {
	trace := "philly:" + filepath.Join(testenv.RepoRoot(t), "datasets", "testdata", "philly_small.csv")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--policy", "nosuch"}, "unknown policy"},
		{[]string{"--policy", "prescient"}, "--oracle"},
		{[]string{"--policy", "fifo", "--models", "dir", "--oracle"}, "give one"},
		{[]string{"--policy", "prescient", "--models", "/nonexistent-registry"}, "--models"},
		{[]string{"--policy", "fifo", "--checkpoint", "sometimes"}, "checkpoint"},
		{[]string{"--policy", "fifo", "--deadlines", "2:1"}, "fraction"},
		{[]string{"--policy", "fifo", "--lend", "oracle"}, "need --inference"},
		{[]string{"--policy", "fifo", "--inference", "genai:x", "--lend", "sometimes"}, "--lend"},
		{[]string{"--policy", "fifo", "--inference", "helios:" + filepath.Join(testenv.RepoRoot(t), "datasets", "testdata", "philly_small.csv")}, "--inference"},
	} {
		args := append([]string{"simulate", "--trace", trace, "--fleet", "uniform:2x8", "--log-level", "error"}, tc.args...)
		if _, err := run(t, args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one saying %q", tc.args, err, tc.want)
		}
	}
}

// TestPriorArrivalsCountTheSixHoursBeforeFrom checks the arrival rate a
// replay --from a date starts with: the jobs of the six hours before it,
// decayed, and none older.
func TestPriorArrivalsCountTheSixHoursBeforeFrom(t *testing.T) {
	from := time.Date(2017, 11, 10, 0, 0, 0, 0, time.UTC)
	job := func(id string, before time.Duration, gpus int) cluster.Job {
		return cluster.NewJob(cluster.JobID(id), cluster.JobSpec{GPUs: gpus, GPUMilli: cluster.MilliGPU}, from.Add(-before))
	}
	got := priorArrivals([]cluster.Job{job("old", 7*time.Hour, 64), job("a", 0, 4), job("b", time.Hour, 8)}, from)
	want := (4 + 8*math.Exp(-1)) / park.ArrivalTau.Seconds()
	if r := got.Rate(from); math.Abs(r-want) > 1e-12 {
		t.Errorf("rate %g GPUs/s, want %g (a and b, not the 7-hour-old job)", r, want)
	}
}

// A replay that cannot say much says so: a --from after the trace's end,
// and jobs the fleet can never run.
func TestSimulateWarnsOfAnEmptyWindowAndJobsThatNeverFit(t *testing.T) {
	trace := "philly:" + filepath.Join(testenv.RepoRoot(t), "datasets", "testdata", "philly_small.csv")
	logs := func(args ...string) string {
		t.Helper()
		root := newRootCmd()
		var out, errOut bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&errOut)
		root.SetArgs(append([]string{"simulate", "--trace", trace, "--policy", "fifo", "-o", "json", "--log-level", "warn"}, args...))
		if err := root.Execute(); err != nil {
			t.Fatal(err)
		}
		return errOut.String()
	}
	if l := logs("--fleet", "uniform:2x8:V100", "--from", "2030-01-01"); !strings.Contains(l, "the replay holds no job") {
		t.Errorf("a window after the trace: no warning in\n%s", l)
	}
	if l := logs("--fleet", "uniform:1x1:V100"); !strings.Contains(l, "jobs the fleet can never run") || !strings.Contains(l, "gpus: ") {
		t.Errorf("jobs bigger than the fleet: no warning in\n%s", l)
	}
	if l := logs("--fleet", "uniform:16x8:V100"); strings.Contains(l, "never run") || strings.Contains(l, "no job") {
		t.Errorf("a replay with nothing to warn of warned:\n%s", l)
	}
}

// simulate --tenants caps the tenant it names: its peak is at most its
// quota, where without the file it held more.
func TestSimulateTenantsFileCapsATenant(t *testing.T) {
	path := testenv.Dataset(t, "philly", "philly_jobs.csv")
	peaks := func(args ...string) map[string]float64 {
		t.Helper()
		out, err := run(t, append([]string{"simulate", "--trace", "philly:" + path, "--fleet", "uniform:10x8:V100", "--from", "2017-11-10",
			"--limit", "600", "--policy", "prescient", "--oracle", "-o", "json", "--log-level", "error"}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			Jobs, Finished float64
			Peaks          map[string]float64 `json:"peak_gpus_by_tenant"`
		}
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatal(err)
		}
		if got.Jobs != got.Finished || len(got.Peaks) == 0 {
			t.Fatalf("%v jobs, %v finished, peaks %v", got.Jobs, got.Finished, got.Peaks)
		}
		return got.Peaks
	}
	free := peaks()
	top := ""
	for tenant, p := range free {
		if top == "" || p > free[top] || p == free[top] && tenant < top {
			top = tenant
		}
	}
	if free[top] <= 8 {
		t.Fatalf("the busiest tenant held at most %g GPUs: nothing to cap", free[top])
	}
	file := filepath.Join(t.TempDir(), "tenants.yaml")
	if err := os.WriteFile(file, []byte("tenants:\n  - {name: \""+top+"\", quota_gpus: 8}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if capped := peaks("--tenants", file); capped[top] > 8 {
		t.Errorf("%s held %g GPUs with a quota of 8 (%g without)", top, capped[top], free[top])
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("tenants:\n  - {name: a}\n  - {name: a}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, "simulate", "--trace", "philly:"+path, "--fleet", "uniform:2x8", "--tenants", bad); err == nil ||
		!strings.Contains(err.Error(), "--tenants") || !strings.Contains(err.Error(), "bad.yaml:3") {
		t.Errorf("a duplicate tenant: %v, want an error naming --tenants and bad.yaml:3", err)
	}
}

// Backfilling a KTH slice on its own machine with the users' limits as
// estimates: every job finishes, and bounded slowdown is reported; an
// oracle's estimates do at least as well. A trace without limits has no
// user estimates.
func TestSimulateWithUserEstimates(t *testing.T) {
	kth := "swf:" + testenv.Dataset(t, "swf", "KTH-SP2-1996-2.1-cln.swf.gz")
	slowdown := func(args ...string) float64 {
		t.Helper()
		out, err := run(t, append([]string{"simulate", "--trace", kth, "--fleet", kth, "--from", "1997-01-01", "--limit", "1500",
			"--policy", "easy-backfill", "-o", "json", "--log-level", "error"}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatal(err)
		}
		if got["jobs"] != got["finished"] || got["jobs"].(float64) != 1500 {
			t.Errorf("%v: %v jobs, %v finished", args, got["jobs"], got["finished"])
		}
		return got["avg_bounded_slowdown"].(float64)
	}
	user, oracle := slowdown("--estimates", "user"), slowdown("--oracle")
	t.Logf("average bounded slowdown: users' limits %.2f, oracle %.2f", user, oracle)
	if user < 1 || oracle < 1 || oracle > user {
		t.Errorf("bounded slowdown: users' limits %.2f, oracle %.2f", user, oracle)
	}

	philly := "philly:" + filepath.Join(testenv.RepoRoot(t), "datasets", "testdata", "philly_small.csv")
	if _, err := run(t, "simulate", "--trace", philly, "--fleet", "uniform:2x8:V100", "--policy", "easy-backfill", "--estimates", "user", "--log-level", "error"); err == nil || !strings.Contains(err.Error(), "has no time limit") {
		t.Errorf("user estimates without limits: %v", err)
	}
	for args, want := range map[string]string{
		"--estimates learned":                "--estimates learned needs --models",
		"--estimates user --oracle":          "leave --models and --oracle out",
		"--estimates guess --models nowhere": `--estimates "guess"`,
	} {
		_, err := run(t, append([]string{"simulate", "--trace", philly, "--fleet", "uniform:2x8:V100", "--policy", "easy-backfill"}, strings.Fields(args)...)...)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", args, err, want)
		}
	}
}
