package sim_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/cluster/clustertest"
	"github.com/prescient-sched/prescient/datasets"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/executor/plugins/tiresias"
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
	return replayPolicy(t, pol, fleet, jobs, mod)
}

// replayPolicy is replay with an assembled policy.
func replayPolicy(t failer, pol executor.Policy, fleet *cluster.Fleet, jobs []cluster.Job, mod func(*sim.Config)) *sim.Result {
	t.Helper()
	policy := pol.Name
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
// finishes every job but those withdrawn while they waited: none is lost;
// with power caps, carbon waits, parking (fixed or by forecast), warming
// data caches and an inference node lent and taken back too.
func TestReplayInvariants(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		fleet, nodes, perNode := drawFleet(rt)
		jobs := drawJobs(rt, nodes*perNode, perNode)
		policy := rapid.SampledFrom(policies.Names()).Draw(rt, "policy")
		mtbf := rapid.SampledFrom([]time.Duration{0, 3 * time.Hour, 50 * time.Hour}).Draw(rt, "mtbf")
		pol, err := policies.New(policy, policies.Options{})
		if err != nil {
			rt.Fatal(err)
		}
		if rapid.Bool().Draw(rt, "power_caps") { // capped jobs run slower: the same invariants hold
			if pol.PowerCap, err = executor.NewCostCapper(rapid.Float64Range(0, 20).Draw(rt, "price"), executor.ZeusV100Caps); err != nil {
				rt.Fatal(err)
			}
		}
		var carbon *sim.CarbonSeries
		if rapid.Bool().Draw(rt, "carbon_wait") { // held jobs wait for the cleaner hours and then run
			if pol.Hold, err = executor.NewCarbonHold([]cluster.Tier{cluster.TierOpportunistic, cluster.TierBatch}, 6*time.Hour, 0.2); err != nil {
				rt.Fatal(err)
			}
			if carbon, err = sim.NewCarbonSeries([]time.Time{clustertest.Epoch, clustertest.Epoch.Add(4 * time.Hour), clustertest.Epoch.Add(9 * time.Hour)},
				[]float64{500, 150, 600}); err != nil {
				rt.Fatal(err)
			}
		}
		var cache int64
		if rapid.Bool().Draw(rt, "data_caches") { // jobs read three datasets through small node caches
			sim.AssignDatasets(jobs, sim.DatasetSpec{N: 3, Bytes: 100 << 30}, 1)
			cache = 250 << 30
		}
		park := rapid.SampledFrom([]time.Duration{0, time.Minute, 10 * time.Minute}).Draw(rt, "park_idle_after")
		parkForecast := park > 0 && rapid.Bool().Draw(rt, "park_forecast") // parked nodes boot before their jobs work
		wakeLast := park > 0 && rapid.Bool().Draw(rt, "park_wake_last")    // a second plan on the parked nodes
		lend := lendingDraw(rt, fleet, perNode)                            // an inference node lent and taken back
		r := replayPolicy(rt, pol, fleet, jobs, func(c *sim.Config) {
			c.Check, c.NodeMTBF, c.NodeRepair, c.Carbon = true, mtbf, 30*time.Minute, carbon
			c.ParkIdleAfter, c.ParkForecast, c.WakeLast, c.DataCacheBytes = park, parkForecast, wakeLast, cache
			c.Lending = lend
		})
		if r.Finished+r.Withdrawn != len(jobs) {
			rt.Fatalf("%s: %d of %d jobs finished, %d withdrawn", policy, r.Finished, len(jobs), r.Withdrawn)
		}
		if r.GPUAllocPct > 100.0001 || r.GPUAllocPct < 0 {
			rt.Fatalf("allocation %.3f%% outside 0..100", r.GPUAllocPct)
		}
	})
}

// drawFleet draws a fleet of 1 to 4 nodes of 1, 2, 4 or 8 GPUs each.
func drawFleet(rt *rapid.T) (fleet *cluster.Fleet, nodes, perNode int) {
	nodes = rapid.IntRange(1, 4).Draw(rt, "nodes")
	perNode = rapid.SampledFrom([]int{1, 2, 4, 8}).Draw(rt, "gpus_per_node")
	var ns []cluster.Node
	for i := range nodes {
		ns = append(ns, clustertest.Node(fmt.Sprintf("n%d", i)).GPUs(perNode, "V100").Obj())
	}
	return clustertest.Fleet(ns...), nodes, perNode
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
		if rapid.IntRange(0, 5).Draw(rt, "withdrawn") == 0 { // its user cancels it while it waits, if it still does
			j.State, j.EndTime, j.Outcome.RunTime = cluster.StateCancelled, at.Add(d), 0
		}
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
	jct, worst := map[string]float64{}, map[string]float64{}
	for _, p := range policies.Names() {
		r := replay(t, p, fleet, jobs, nil)
		if r.Finished != len(jobs) {
			t.Fatalf("%s: %d of %d finished", p, r.Finished, len(jobs))
		}
		jct[p] = r.AvgJCTS
		for _, w := range r.WaitByTenantS {
			worst[p] = max(worst[p], w/r.AvgWaitS)
		}
		t.Logf("%-14s avg JCT %7.0fs  wait %7.0fs  worst tenant %4.1f×  preemptions %d", p, r.AvgJCTS, r.AvgWaitS, worst[p], r.Preemptions)
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
	// Wait fairness: on this overloaded slice (measured 4.4× against fifo's
	// 15.1× and sjf-oracle's 25.1×) no tenant waits as long against the
	// average as under fifo or shortest-first.
	if worst["prescient"] >= worst["fifo"]/2 || worst["prescient"] >= worst["sjf-oracle"]/2 {
		t.Errorf("prescient's worst tenant waits %.1f× the average, not under half of fifo's %.1f× and sjf-oracle's %.1f×",
			worst["prescient"], worst["fifo"], worst["sjf-oracle"])
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

// TestPreemptionCheckpointsFirst: prescient displaces a long job for a much
// shorter one; the victim checkpoints before it stops, so the preemption
// loses no work and costs one checkpoint, and both jobs finish.
func TestPreemptionCheckpointsFirst(t *testing.T) {
	fleet := clustertest.Fleet(clustertest.Node("n1").GPUs(4, "V100").Obj())
	long := clustertest.Job("long").GPUs(4).Submitted(clustertest.Epoch).Obj()
	long.Outcome.RunTime = 10 * time.Hour
	short := clustertest.Job("short").GPUs(4).Submitted(clustertest.Epoch.Add(time.Hour)).Obj()
	short.Outcome.RunTime = 10 * time.Minute
	r := replay(t, "prescient", fleet, []cluster.Job{long, short}, func(c *sim.Config) { c.Check = true })
	if r.Finished != 2 || r.Preemptions != 1 {
		t.Fatalf("finished %d, preemptions %d; want 2 and 1", r.Finished, r.Preemptions)
	}
	// One checkpoint of 1 minute on 4 GPUs; nothing lost.
	if r.LostGPUS != 0 || r.CheckpointGPUS != 4*60 {
		t.Errorf("lost %.0f GPU-s, checkpoints %.0f GPU-s; want 0 and 240", r.LostGPUS, r.CheckpointGPUS)
	}
	// The short job waits only for the checkpoint; the long one ends after
	// its run, the short job and the checkpoint.
	if want := (10*time.Hour + 10*time.Minute + time.Minute).Seconds(); r.MakespanS != want {
		t.Errorf("makespan %.0fs, want %.0fs", r.MakespanS, want)
	}
}

// TestFairShareLetsALateTenantAheadOfAFlood: tenant a floods the queue with
// forty one-hour jobs; tenant b's four jobs, submitted a minute later, start
// as soon as GPUs come free under prescient (a has used its share, b none),
// while fifo makes them wait for the whole flood.
func TestFairShareLetsALateTenantAheadOfAFlood(t *testing.T) {
	fleet := clustertest.Fleet(clustertest.Node("n1").GPUs(4, "V100").Obj())
	var jobs []cluster.Job
	for i := range 44 {
		w := clustertest.Job(fmt.Sprintf("a%02d", i)).GPUs(1).Tenant("a").Submitted(clustertest.Epoch)
		if i >= 40 {
			w = clustertest.Job(fmt.Sprintf("b%02d", i)).GPUs(1).Tenant("b").Submitted(clustertest.Epoch.Add(time.Minute))
		}
		j := w.Obj()
		j.Outcome.RunTime = time.Hour
		jobs = append(jobs, j)
	}
	f := replay(t, "fifo", fleet, jobs, nil)
	p := replay(t, "prescient", fleet, jobs, nil)
	t.Logf("tenant b's mean wait: fifo %.0fs, prescient %.0fs", f.WaitByTenantS["b"], p.WaitByTenantS["b"])
	if got := p.WaitByTenantS["b"]; got > time.Hour.Seconds() {
		t.Errorf("prescient: tenant b waited %.0fs on average, want at most the hour until the first GPUs free", got)
	}
	if f.WaitByTenantS["b"] < 9*time.Hour.Seconds() {
		t.Errorf("fifo: tenant b waited %.0fs, want the flood's ten hours (the scenario is wrong)", f.WaitByTenantS["b"])
	}
}

// TestTiresiasPromotesStarvedJobs: under a stream of new one-GPU jobs, a
// job that Tiresias demoted to its second queue gets the GPU back each time
// it has waited PromoteKnob times its last run (until a new job displaces
// it again), so it finishes far earlier than with PromoteKnob 0, where it
// waits for the stream to end.
func TestTiresiasPromotesStarvedJobs(t *testing.T) {
	fleet := clustertest.Fleet(clustertest.Node("n1").GPUs(1, "V100").Obj())
	big := clustertest.Job("big").GPUs(1).Submitted(clustertest.Epoch).Obj()
	big.Outcome.RunTime = 3 * time.Hour
	jobs := []cluster.Job{big}
	for i := range 100 { // a job every 30 minutes, 30 minutes long: the GPU never idles
		j := clustertest.Job(fmt.Sprintf("s%03d", i)).GPUs(1).Submitted(clustertest.Epoch.Add(time.Duration(i)*30*time.Minute + time.Second)).Obj()
		j.Outcome.RunTime = 30 * time.Minute
		jobs = append(jobs, j)
	}
	end := func(mod func(*sim.Config)) time.Duration {
		r := replay(t, "tiresias", fleet, jobs, func(c *sim.Config) { c.Check = true; mod(c) })
		if r.Finished != len(jobs) {
			t.Fatalf("%d of %d finished", r.Finished, len(jobs))
		}
		return time.Duration(r.JCTs[len(r.JCTs)-1]) // the longest JCT is big's
	}
	with := end(func(*sim.Config) {})
	without := end(func(c *sim.Config) {
		ord, _ := tiresias.New(tiresias.Args{Thresholds: []time.Duration{time.Hour}})
		pol, _ := policies.New("tiresias", policies.Options{})
		pol.Order = ord
		c.Planner, _ = executor.New(pol)
		c.Order = ord
	})
	t.Logf("big job's JCT: %s with promotion, %s without", with, without)
	if without < 40*time.Hour || with > without*6/10 {
		t.Errorf("big job's JCT %s with promotion, %s without; want promotion to end its starvation", with, without)
	}
}

// gpuJobAt is a job of one GPU submitted at the epoch plus at that runs
// for run.
func gpuJobAt(id string, at, run time.Duration) cluster.Job {
	j := clustertest.Job(id).GPUs(1).Submitted(clustertest.Epoch.Add(at)).Obj()
	j.Outcome.RunTime = run
	return j
}

// TestHeadStartLetsAShortJobPassALongOneThatCameJustBefore: on one full
// GPU, a 10-hour job queued a minute before a 30-minute one goes second
// under headstart-backfill (first under easy-backfill); a 30-minute job
// that came after the long one's estimate had passed does not pass it.
func TestHeadStartLetsAShortJobPassALongOneThatCameJustBefore(t *testing.T) {
	fleet := clustertest.Fleet(clustertest.Node("n1").GPUs(1, "V100").Obj())
	job := gpuJobAt
	jobs := []cluster.Job{
		job("first", 0, 12*time.Hour),               // holds the GPU for 12 hours
		job("long", time.Minute, 10*time.Hour),      // key: 1m + 10h
		job("short", 2*time.Minute, 30*time.Minute), // key: 32m: passes long
		job("late", 11*time.Hour, 30*time.Minute),   // key: 11h30m: after long
	}
	starts := func(policy string) map[cluster.JobID]time.Duration {
		r := replay(t, policy, fleet, jobs, func(c *sim.Config) { c.Check, c.Outcomes = true, true })
		if r.Finished != len(jobs) {
			t.Fatalf("%s: %d of %d finished", policy, r.Finished, len(jobs))
		}
		m := map[cluster.JobID]time.Duration{}
		for _, o := range r.Outcomes {
			m[o.Job] = o.Start.Sub(clustertest.Epoch)
		}
		return m
	}
	hs, easy := starts("headstart-backfill"), starts("easy-backfill")
	if want := 12 * time.Hour; hs["short"] != want || hs["long"] != want+30*time.Minute || hs["late"] != want+10*time.Hour+30*time.Minute {
		t.Errorf("headstart-backfill starts %v; want short at 12h, long at 12h30m, late after long", hs)
	}
	if easy["long"] != 12*time.Hour || easy["short"] != 22*time.Hour {
		t.Errorf("easy-backfill starts %v; want long at 12h, short at 22h", easy)
	}
}

// A job the trace shows cancelled while it waited leaves the queue when its
// user gave up on it, so the job behind it starts in its place; one the
// replay starts before that time ends at once. Neither counts in the job
// figures: the trace has no run time for them.
func TestAJobItsUserCancelledLeavesTheQueueThen(t *testing.T) {
	fleet := clustertest.Fleet(clustertest.Node("n1").GPUs(1, "V100").Obj())
	job := gpuJobAt
	withdrawn := func(id string, at, cancel time.Duration) cluster.Job {
		j := job(id, at, 30*time.Minute) // were it started, it would hold the next job back half an hour
		j.State, j.EndTime = cluster.StateCancelled, clustertest.Epoch.Add(cancel)
		return j
	}
	jobs := []cluster.Job{
		job("first", 0, time.Hour),
		withdrawn("gave-up", time.Minute, 10*time.Minute), // behind first until its user cancels it
		job("next", 2*time.Minute, 30*time.Minute),
		withdrawn("early", 2*time.Hour, 3*time.Hour), // the GPU is free at 2h: started before its cancel
	}
	if at, ok := sim.WithdrawnAt(&jobs[1]); !ok || !at.Equal(clustertest.Epoch.Add(10*time.Minute)) {
		t.Fatalf("WithdrawnAt(gave-up) = %v, %v; want 10m, true", at, ok)
	}
	if _, ok := sim.WithdrawnAt(&jobs[0]); ok {
		t.Fatal("WithdrawnAt(first): a queued job is not withdrawn")
	}
	for _, policy := range []string{"fifo", "easy-backfill"} {
		r := replay(t, policy, fleet, jobs, func(c *sim.Config) { c.Check, c.Outcomes = true, true })
		if r.Withdrawn != 1 || r.Finished != 3 {
			t.Errorf("%s: %d withdrawn, %d finished; want 1 and 3 (early, started, ends at once)", policy, r.Withdrawn, r.Finished)
		}
		for _, o := range r.Outcomes {
			switch {
			case o.Job == "next" && o.Start.Sub(clustertest.Epoch) != time.Hour:
				t.Errorf("%s: next started at %v; want 1h, when first ended", policy, o.Start.Sub(clustertest.Epoch))
			case o.Job == "gave-up" && !o.Start.IsZero():
				t.Errorf("%s: gave-up started at %v; want never", policy, o.Start.Sub(clustertest.Epoch))
			}
		}
		// first: JCT 1h, no wait; next: JCT 1h28m, wait 58m.
		if r.AvgJCTS != 4440 || r.AvgWaitS != 1740 {
			t.Errorf("%s: avg JCT %v s, avg wait %v s; want 4440 and 1740 (first and next only)", policy, r.AvgJCTS, r.AvgWaitS)
		}
	}
}

// TestKeptQueueIsThePlannersOrder: a replay in which the simulator keeps
// the queue for the planner (sorted for a static or stepped order, each
// job's part for a parted one: Config.Order) decides exactly as one in
// which the planner orders the queue itself every cycle, for random
// fleets, workloads (tiers, deadlines, gangs, shares) and every policy.
// It fails when a kept key goes stale (a promotion missed) or a wake-up
// that the planner would have found is lost.
func TestKeptQueueIsThePlannersOrder(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		fleet, nodes, perNode := drawFleet(rt)
		jobs := drawJobs(rt, nodes*perNode, perNode)
		policy := rapid.SampledFrom(policies.Names()).Draw(rt, "policy")
		run := func(kept bool) *sim.Result {
			r := replay(rt, policy, fleet, jobs, func(c *sim.Config) {
				c.Outcomes = true
				if !kept {
					c.Order = nil
				}
			})
			r.SimWallS, r.DecisionsPerS = 0, 0
			return r
		}
		if kept, planned := run(true), run(false); !reflect.DeepEqual(kept, planned) {
			rt.Fatalf("%s: the kept queue decides otherwise than the planner's order: %s", policy, firstDifference(kept, planned))
		}
	})
}

// firstDifference names the first thing in which two replays' results
// differ: a job's start or end, else the metrics, else the rest.
func firstDifference(a, b *sim.Result) string {
	for i := range min(len(a.Outcomes), len(b.Outcomes)) {
		if x, y := a.Outcomes[i], b.Outcomes[i]; x != y {
			return fmt.Sprintf("job %s started %s and ended %s, against %s and %s", x.Job, x.Start, x.End, y.Start, y.End)
		}
	}
	if !reflect.DeepEqual(a.Metrics, b.Metrics) {
		return fmt.Sprintf("metrics %+v, against %+v", a.Metrics, b.Metrics)
	}
	return fmt.Sprintf("%d plan cycles and queue %v, against %d and %v", a.PlanCycles, a.Queue, b.PlanCycles, b.Queue)
}
