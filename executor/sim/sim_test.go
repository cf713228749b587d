package sim_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/cluster/clustertest"
	"github.com/prescient-sched/prescient/datasets"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/executor/policies"
	"github.com/prescient-sched/prescient/executor/sim"
	"github.com/prescient-sched/prescient/internal/testenv"
)

// failer is what replay needs of *testing.T and *rapid.T alike.
type failer interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// replay runs jobs on fleet under a policy with an exact oracle.
func replay(t failer, policy string, fleet *cluster.Fleet, jobs []cluster.Job, mod func(*sim.Config)) *sim.Result {
	t.Helper()
	pol, err := policies.New(policy, policies.Options{})
	if err != nil {
		t.Fatal(err)
	}
	planner, err := executor.New(pol)
	if err != nil {
		t.Fatal(err)
	}
	truth := map[cluster.JobID]time.Duration{}
	for _, j := range jobs {
		truth[j.ID] = j.Outcome.RunTime
	}
	oracle, err := executor.NewOracle(truth, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	cfg := sim.Config{Fleet: fleet, Jobs: jobs, Planner: planner, Forecaster: oracle, Preemptive: pol.Preemptor != nil, Order: pol.Order,
		CheckpointCost: time.Minute, Seed: 1}
	if mod != nil {
		mod(&cfg)
	}
	r, err := sim.Run(context.Background(), cfg)
	if err != nil {
		t.Fatalf("%s: %v", policy, err)
	}
	return r
}

// TestReplayInvariants is the property test: for random fleets, workloads
// (gangs, shares, tiers, deadlines), node failures and every policy, the
// simulator never exceeds a GPU's capacity, never gives a GPU twice, keeps
// every job in exactly one state and place (checked after every step), and
// finishes every job: none is lost.
func TestReplayInvariants(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		nodes := rapid.IntRange(1, 4).Draw(rt, "nodes")
		perNode := rapid.SampledFrom([]int{1, 2, 4, 8}).Draw(rt, "gpus_per_node")
		var ns []cluster.Node
		for i := range nodes {
			ns = append(ns, clustertest.Node(fmt.Sprintf("n%d", i)).GPUs(perNode, "V100").Obj())
		}
		fleet := clustertest.Fleet(ns...)
		jobs := drawJobs(rt, nodes*perNode, perNode)
		policy := rapid.SampledFrom(policies.Names()).Draw(rt, "policy")
		mtbf := rapid.SampledFrom([]time.Duration{0, 3 * time.Hour, 50 * time.Hour}).Draw(rt, "mtbf")
		r := replay(rt, policy, fleet, jobs, func(c *sim.Config) {
			c.Check, c.NodeMTBF, c.NodeRepair = true, mtbf, 30*time.Minute
		})
		if r.Finished != len(jobs) {
			rt.Fatalf("%s: %d of %d jobs finished", policy, r.Finished, len(jobs))
		}
		if r.GPUAllocPct > 100.0001 || r.GPUAllocPct < 0 {
			rt.Fatalf("allocation %.3f%% outside 0..100", r.GPUAllocPct)
		}
	})
}

func drawJobs(rt *rapid.T, fleetGPUs, perNode int) []cluster.Job {
	n := rapid.IntRange(1, 40).Draw(rt, "jobs")
	var jobs []cluster.Job
	at := clustertest.Epoch
	for i := range n {
		at = at.Add(time.Duration(rapid.IntRange(0, 3600).Draw(rt, "gap_s")) * time.Second)
		w := clustertest.Job(fmt.Sprintf("j%02d", i)).Submitted(at).Tenant(rapid.SampledFrom([]string{"a", "b", "c"}).Draw(rt, "tenant")).
			Tier(cluster.Tier(rapid.IntRange(0, 3).Draw(rt, "tier")))
		switch rapid.IntRange(0, 5).Draw(rt, "kind") {
		case 0:
			w.Share(rapid.IntRange(100, 900).Draw(rt, "milli"))
		case 1:
			tasks := rapid.IntRange(1, max(fleetGPUs/perNode, 1)).Draw(rt, "tasks")
			w.GPUs(tasks * perNode).Gang(tasks)
		default:
			w.GPUs(rapid.IntRange(1, fleetGPUs).Draw(rt, "gpus"))
		}
		d := time.Duration(rapid.IntRange(1, 20000).Draw(rt, "run_s")) * time.Second
		if rapid.Bool().Draw(rt, "deadline") {
			w.Deadline(at.Add(d * time.Duration(rapid.IntRange(1, 4).Draw(rt, "slack"))))
		}
		j := w.Obj()
		j.Outcome.RunTime = d
		jobs = append(jobs, j)
	}
	return jobs
}

func phillySlice(t *testing.T, n int) []cluster.Job {
	t.Helper()
	res, err := datasets.ReadTrace("philly:"+testenv.Dataset(t, "philly", "philly_jobs.csv"), datasets.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	from := time.Date(2017, 11, 10, 0, 0, 0, 0, time.UTC)
	_, jobs := datasets.SplitByTime(res.Jobs, from)
	return jobs[:n]
}

// TestPhillySliceOrdering replays 3,000 real Philly jobs on a fleet small
// enough for contention and checks what the policies' definitions promise.
func TestPhillySliceOrdering(t *testing.T) {
	jobs := phillySlice(t, 3000)
	fleet, err := datasets.ReadFleet("uniform:12x8:V100")
	if err != nil {
		t.Fatal(err)
	}
	jct := map[string]float64{}
	for _, p := range policies.Names() {
		r := replay(t, p, fleet, jobs, nil)
		if r.Finished != len(jobs) {
			t.Fatalf("%s: %d of %d finished", p, r.Finished, len(jobs))
		}
		jct[p] = r.AvgJCTS
		t.Logf("%-14s avg JCT %7.0fs  wait %7.0fs  preemptions %d", p, r.AvgJCTS, r.AvgWaitS, r.Preemptions)
	}
	if jct["sjf-oracle"] >= jct["fifo"] {
		t.Errorf("sjf-oracle avg JCT %.0fs is not below fifo's %.0fs", jct["sjf-oracle"], jct["fifo"])
	}
	if jct["srtf-oracle"] >= jct["sjf-oracle"] {
		t.Errorf("srtf-oracle avg JCT %.0fs is not below sjf-oracle's %.0fs", jct["srtf-oracle"], jct["sjf-oracle"])
	}
	if jct["prescient"] >= jct["fifo"] {
		t.Errorf("prescient (oracle) avg JCT %.0fs is not below fifo's %.0fs", jct["prescient"], jct["fifo"])
	}
}

// TestDeadlinesWithReservations: with deadlines on 30% of the jobs at twice
// their duration, prescient meets more feasible deadlines than fifo.
func TestDeadlinesWithReservations(t *testing.T) {
	jobs := phillySlice(t, 2000)
	sim.AssignDeadlines(jobs, sim.DeadlineSpec{Fraction: 0.3, Slack: 2}, 1)
	fleet, err := datasets.ReadFleet("uniform:12x8:V100")
	if err != nil {
		t.Fatal(err)
	}
	f := replay(t, "fifo", fleet, jobs, nil)
	p := replay(t, "prescient", fleet, jobs, nil)
	t.Logf("deadlines met: fifo %.1f%%, prescient %.1f%% of %d", f.DeadlineMetPct, p.DeadlineMetPct, p.DeadlineFeasible)
	if p.DeadlineFeasible == 0 || p.DeadlineMetPct <= f.DeadlineMetPct {
		t.Errorf("prescient met %.1f%% of deadlines, fifo %.1f%%", p.DeadlineMetPct, f.DeadlineMetPct)
	}
}

// TestFailuresLoseOnlyWorkSinceCheckpoint: with node failures, periodic
// checkpoints lose less work than none.
func TestFailuresLoseOnlyWorkSinceCheckpoint(t *testing.T) {
	jobs := phillySlice(t, 1500)
	fleet, err := datasets.ReadFleet("uniform:12x8:V100")
	if err != nil {
		t.Fatal(err)
	}
	withMTBF := func(c *sim.Config) { c.NodeMTBF, c.NodeRepair = 200*time.Hour, time.Hour }
	none := replay(t, "fifo", fleet, jobs, withMTBF)
	pol, _ := policies.New("fifo", policies.Options{Checkpoint: "fixed:30m"})
	planner, _ := executor.New(pol)
	ck := replay(t, "fifo", fleet, jobs, func(c *sim.Config) { withMTBF(c); c.Planner = planner })
	t.Logf("lost GPU-h: none %.1f, fixed:30m %.1f (checkpoints %.1f GPU-h)", none.LostGPUS/3600, ck.LostGPUS/3600, ck.CheckpointGPUS/3600)
	if none.NodeFailures == 0 || ck.LostGPUS >= none.LostGPUS || ck.CheckpointGPUS == 0 {
		t.Errorf("failures %d: lost %.0f GPU-s with checkpoints, %.0f without", none.NodeFailures, ck.LostGPUS, none.LostGPUS)
	}
}
