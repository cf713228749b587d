package sim_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/cluster/clustertest"
	"github.com/prescient-sched/prescient/executor/lend"
	"github.com/prescient-sched/prescient/executor/sim"
)

// inferenceFleet is two training nodes and two inference nodes of 8 GPUs.
func inferenceFleet() *cluster.Fleet {
	return clustertest.Fleet(
		clustertest.Node("train-0").GPUs(8, "V100").Obj(), clustertest.Node("train-1").GPUs(8, "V100").Obj(),
		clustertest.Node("inf-0").GPUs(8, "V100").Obj(), clustertest.Node("inf-1").GPUs(8, "V100").Obj())
}

// waves is 16 replicas busy for two hours, idle for six, over and over.
func waves(hours int) [][]float64 {
	reps := make([][]float64, 16)
	for r := range reps {
		reps[r] = make([]float64, hours*60)
		for m := range reps[r] {
			if (m/60)%8 >= 2 {
				reps[r][m] = 1
			}
		}
	}
	return reps
}

// eightGPUJobs are n jobs of 8 GPUs and d, all submitted at the start.
func eightGPUJobs(n int, d time.Duration) []cluster.Job {
	var jobs []cluster.Job
	for k := range n {
		j := clustertest.Job(fmt.Sprintf("j%02d", k)).GPUs(8).Submitted(clustertest.Epoch).Obj()
		j.Outcome.RunTime = d
		jobs = append(jobs, j)
	}
	return jobs
}

func TestLendingIdleInferenceNodes(t *testing.T) {
	jobs := eightGPUJobs(40, 90*time.Minute)
	run := func(l lend.Lender) *sim.Result {
		fleet := inferenceFleet()
		if l == nil { // the training nodes alone
			fleet.Nodes = fleet.Nodes[:2]
		}
		return replay(t, "prescient", fleet, jobs, func(c *sim.Config) {
			c.Check = true
			if l != nil {
				c.Lending = &sim.Lending{Nodes: []string{"inf-0", "inf-1"}, Replicas: waves(16), Lender: l}
			}
		})
	}
	alone, oracle, recent := run(nil), run(lend.Oracle{}), run(lend.Recent{Window: 30 * time.Minute})
	for name, r := range map[string]*sim.Result{"alone": alone, "oracle": oracle, "recent": recent} {
		if r.Finished != len(jobs) {
			t.Fatalf("%s: %d of %d jobs finished", name, r.Finished, len(jobs))
		}
		if r.GPUAllocPct <= 0 || r.GPUAllocPct > 100.0001 {
			t.Errorf("%s: allocation %.2f%%, want within (0, 100] of the training GPUs and the lent ones", name, r.GPUAllocPct)
		}
		if l := r.Lending; l != nil {
			t.Logf("%s: avg JCT %.0f s, lent %.0f GPU-h, inference short %.0f GPU-s of %.0f, %d loans, %d taken back, %d jobs preempted",
				name, r.AvgJCTS, l.LentGPUS/3600, l.InferenceShortGPUS, l.InferenceBusyGPUS, l.Loans, l.Reclaims, l.ReclaimPreemptions)
		}
	}
	if alone.Lending != nil {
		t.Errorf("without lending: lending figures %+v", alone.Lending)
	}
	// The busy hours: 2 of every 8, 16 GPUs, over the replay until the
	// last job ends.
	if oracle.Lending.InferenceBusyGPUS <= 0 {
		t.Fatalf("oracle: no inference demand counted")
	}
	if oracle.Lending.InferenceShortGPUS != 0 {
		t.Errorf("oracle: %.0f GPU-s of inference demand unserved, want 0 (it takes nodes back before the demand)", oracle.Lending.InferenceShortGPUS)
	}
	if oracle.Lending.Loans == 0 || oracle.Lending.Reclaims == 0 || oracle.Lending.ReclaimPreemptions == 0 {
		t.Errorf("oracle: %d loans, %d taken back, %d jobs preempted: want all three", oracle.Lending.Loans, oracle.Lending.Reclaims, oracle.Lending.ReclaimPreemptions)
	}
	if oracle.AvgJCTS >= alone.AvgJCTS {
		t.Errorf("oracle lending: avg JCT %.0f s, without %.0f s: want shorter", oracle.AvgJCTS, alone.AvgJCTS)
	}
	// The reactive rule finds out when the demand is back: the service
	// waits for its nodes each time.
	if recent.Lending.InferenceShortGPUS <= 0 || recent.Lending.LentGPUS <= 0 {
		t.Errorf("recent: %.0f GPU-s short, %.0f lent: want both", recent.Lending.InferenceShortGPUS, recent.Lending.LentGPUS)
	}
	// Never more than the two nodes' GPUs are lent.
	span := oracle.MakespanS
	if oracle.Lending.LentGPUS > 16*span+1 {
		t.Errorf("oracle lent %.0f GPU-s over %.0f s with 16 GPUs", oracle.Lending.LentGPUS, span)
	}
}

// A job that cannot checkpoint loses its work when its node is taken back,
// and a job that can never start does not keep the replay ticking.
func TestLendingTakesBackNodesFromJobsThatCannotCheckpoint(t *testing.T) {
	jobs := eightGPUJobs(40, 90*time.Minute)
	never := clustertest.Job("never").GPUs(1).Models("H100").Submitted(clustertest.Epoch).Obj()
	never.Outcome.RunTime = time.Hour
	jobs = append(jobs, never)
	r := replay(t, "fifo", inferenceFleet(), jobs, func(c *sim.Config) {
		c.Check, c.CheckpointCost = true, 0
		c.Lending = &sim.Lending{Nodes: []string{"inf-0", "inf-1"}, Replicas: waves(16), Lender: lend.Oracle{}}
	})
	if r.Finished != len(jobs)-1 {
		t.Fatalf("%d of %d jobs finished, want all but the H100 one", r.Finished, len(jobs))
	}
	if r.Lending.ReclaimPreemptions == 0 || r.LostGPUS <= 0 || r.CheckpointGPUS != 0 {
		t.Errorf("%d jobs preempted by take-backs, %.0f GPU-s lost, %.0f spent checkpointing: want work lost and no checkpoint",
			r.Lending.ReclaimPreemptions, r.LostGPUS, r.CheckpointGPUS)
	}
	if r.Lending.InferenceShortGPUS != 0 {
		t.Errorf("%.0f GPU-s short: a job that cannot checkpoint stops at once", r.Lending.InferenceShortGPUS)
	}
}

func TestLendingRejectsBadConfigs(t *testing.T) {
	for name, l := range map[string]sim.Lending{
		"unknown node":    {Nodes: []string{"nope"}, Replicas: waves(1), Lender: lend.Oracle{}},
		"no replicas":     {Nodes: []string{"inf-0"}, Lender: lend.Oracle{}},
		"no lender":       {Nodes: []string{"inf-0"}, Replicas: waves(1)},
		"ragged replicas": {Nodes: []string{"inf-0"}, Replicas: [][]float64{{1, 1}, {1}}, Lender: lend.Oracle{}},
		"seconds":         {Nodes: []string{"inf-0"}, Replicas: waves(1), Lender: lend.Oracle{}, Every: 90 * time.Second},
	} {
		cfg := sim.Config{Fleet: inferenceFleet(), Planner: nil, Lending: &l}
		if err := cfg.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// lendingDraw adds an inference node with random replicas to a property
// test's replay, lent by the oracle or the reactive rule.
func lendingDraw(rt *rapid.T, fleet *cluster.Fleet, perNode int) *sim.Lending {
	if !rapid.Bool().Draw(rt, "lending") {
		return nil
	}
	fleet.Nodes = append(fleet.Nodes, clustertest.Node("inf").GPUs(perNode, "V100").Obj())
	minutes := rapid.IntRange(30, 600).Draw(rt, "replica_minutes")
	reps := make([][]float64, rapid.IntRange(1, perNode+1).Draw(rt, "replicas"))
	busyShare := rapid.Float64Range(0, 1).Draw(rt, "busy_share")
	for r := range reps {
		reps[r] = make([]float64, minutes)
		for m := range reps[r] {
			if math.Mod(float64(m*(r+7))*0.618, 1) >= busyShare {
				reps[r][m] = 1
			}
		}
	}
	var l lend.Lender = lend.Oracle{}
	if rapid.Bool().Draw(rt, "recent_lender") {
		l = lend.Recent{Window: 10 * time.Minute}
	}
	return &sim.Lending{Nodes: []string{"inf"}, Replicas: reps, Lender: l}
}

// Ticks that stopped in a long quiet spell start again when jobs arrive:
// the second batch, two days later, runs on lent nodes too.
func TestLendingWakesAfterAQuietSpell(t *testing.T) {
	jobs := eightGPUJobs(2, time.Hour)
	for _, j := range eightGPUJobs(20, 90*time.Minute) {
		j.ID += "-later"
		j.SubmitTime = j.SubmitTime.Add(48 * time.Hour)
		jobs = append(jobs, j)
	}
	run := func(lending bool) *sim.Result {
		fleet := inferenceFleet()
		if !lending {
			fleet.Nodes = fleet.Nodes[:2]
		}
		return replay(t, "prescient", fleet, jobs, func(c *sim.Config) {
			c.Check = true
			if lending {
				c.Lending = &sim.Lending{Nodes: []string{"inf-0", "inf-1"}, Replicas: waves(8), Lender: lend.Oracle{}}
			}
		})
	}
	alone, lent := run(false), run(true)
	if lent.Finished != len(jobs) || alone.Finished != len(jobs) {
		t.Fatalf("finished %d and %d of %d", lent.Finished, alone.Finished, len(jobs))
	}
	if lent.MakespanS >= alone.MakespanS || lent.Lending.LentGPUS <= 0 {
		t.Errorf("makespan %.0f s with lending (%.0f GPU-s lent), %.0f s without: want the later batch on lent nodes too",
			lent.MakespanS, lent.Lending.LentGPUS, alone.MakespanS)
	}
}

// A lent inference node that runs nothing is not parked: lending decides
// it, as in the control plane (which parks no inference node).
func TestALentInferenceNodeIsNotParked(t *testing.T) {
	fleet := clustertest.Fleet(clustertest.Node("train-0").GPUs(8, "V100").Obj(),
		clustertest.Node("inf-0").GPUs(8, "V100").Obj(), clustertest.Node("inf-1").GPUs(8, "V100").Obj())
	jobs := eightGPUJobs(1, 16*time.Hour) // on train-0 from the start, before any loan
	for _, forecast := range []bool{false, true} {
		r := replay(t, "prescient", fleet, jobs, func(c *sim.Config) {
			c.Check, c.ParkIdleAfter, c.ParkForecast = true, 10*time.Minute, forecast
			c.Lending = &sim.Lending{Nodes: []string{"inf-0", "inf-1"}, Replicas: waves(16), Lender: lend.Oracle{}}
		})
		if r.Lending == nil || r.Lending.Loans == 0 {
			t.Fatalf("forecast %v: no loans (%+v)", forecast, r.Lending)
		}
		if r.ParkedNodeS != 0 {
			t.Errorf("forecast %v: %.0f node-s parked, want none (train-0 runs the job, the lent nodes are lending's)", forecast, r.ParkedNodeS)
		}
	}
}
