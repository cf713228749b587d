package control

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/cluster/clustertest"
	"github.com/prescient-sched/prescient/control/whatif"
	"github.com/prescient-sched/prescient/service"
)

// whatIfEnv runs two 8-GPU jobs (1h each) for 20 minutes on two 8-GPU
// nodes and queues six 4-GPU jobs of 30 minutes.
func whatIfEnv(t *testing.T, policy string) *env {
	e := newEnv(t, fleetOf(2, 8), func(c *Config) { c.Policy = policy })
	e.submit("r0", spec(8, time.Hour))
	e.submit("r1", spec(8, time.Hour))
	e.plane.cycle(e.ctx)
	e.clock.Advance(20 * time.Minute)
	for _, id := range []string{"q0", "q1", "q2", "q3", "q4", "q5"} {
		e.submit(id, spec(4, 30*time.Minute))
	}
	return e
}

func byJob(res service.WhatIfResult) map[cluster.JobID]service.WhatIfJob {
	out := map[cluster.JobID]service.WhatIfJob{}
	for _, j := range res.Jobs {
		out[j.Job] = j
	}
	return out
}

func TestWhatIfBaselineFollowsTheLiveState(t *testing.T) {
	e := whatIfEnv(t, "fifo")
	res, err := e.plane.WhatIf(e.ctx, service.WhatIfRequest{})
	if err != nil {
		t.Fatal(err)
	}
	now := e.clock.Now()
	want := map[cluster.JobID][2]time.Duration{ // start, end from now
		"r0": {-20 * time.Minute, 40 * time.Minute}, "r1": {-20 * time.Minute, 40 * time.Minute},
		"q0": {40 * time.Minute, 70 * time.Minute}, "q1": {40 * time.Minute, 70 * time.Minute},
		"q2": {40 * time.Minute, 70 * time.Minute}, "q3": {40 * time.Minute, 70 * time.Minute},
		"q4": {70 * time.Minute, 100 * time.Minute}, "q5": {70 * time.Minute, 100 * time.Minute},
	}
	got := byJob(res)
	for id, w := range want {
		j, ok := got[id]
		if !ok || j.Start == nil || j.End == nil {
			t.Errorf("%s: %+v, want a start and an end", id, j)
			continue
		}
		if !j.Start.Equal(now.Add(w[0])) || !j.End.Equal(now.Add(w[1])) {
			t.Errorf("%s: %s → %s, want %s → %s", id, j.Start.Sub(now), j.End.Sub(now), w[0], w[1])
		}
		if j.DeltaEndS == nil || *j.DeltaEndS != 0 {
			t.Errorf("%s: delta %v against an identical baseline, want 0", id, j.DeltaEndS)
		}
	}
	if res.Baseline.MakespanS != 100*60 || res.Scenario != res.Baseline || res.Policy != "fifo" {
		t.Errorf("summaries %+v / %+v, policy %s", res.Baseline, res.Scenario, res.Policy)
	}
}

func TestWhatIfARemovedNodeDelaysAndAnAddedOneSpeedsUp(t *testing.T) {
	e := whatIfEnv(t, "fifo")
	removed, err := e.plane.WhatIf(e.ctx, service.WhatIfRequest{RemoveNodes: []string{"n1"}})
	if err != nil {
		t.Fatal(err)
	}
	later := 0
	for _, j := range removed.Jobs {
		if j.DeltaEndS == nil {
			t.Fatalf("%s: no delta: %+v", j.Job, j)
		}
		if *j.DeltaEndS < 0 {
			t.Errorf("%s ends %gs earlier on a smaller fleet", j.Job, -*j.DeltaEndS)
		}
		if *j.DeltaEndS > 0 {
			later++
		}
	}
	if later == 0 || removed.Scenario.MakespanS <= removed.Baseline.MakespanS {
		t.Errorf("removing a node delayed %d jobs, makespan %g → %g; want later ends", later,
			removed.Baseline.MakespanS, removed.Scenario.MakespanS)
	}
	extra := clustertest.Node("n9").GPUs(8, "A100-80GB").Obj()
	added, err := e.plane.WhatIf(e.ctx, service.WhatIfRequest{AddNodes: []cluster.Node{extra}})
	if err != nil {
		t.Fatal(err)
	}
	if added.Scenario.MakespanS >= added.Baseline.MakespanS || added.Scenario.MeanWaitS >= added.Baseline.MeanWaitS {
		t.Errorf("adding a node: makespan %g → %g, mean wait %g → %g; want both lower", added.Baseline.MakespanS,
			added.Scenario.MakespanS, added.Baseline.MeanWaitS, added.Scenario.MeanWaitS)
	}
}

func TestWhatIfAnAddedUrgentJobGoesFirstAndDelaysOthers(t *testing.T) {
	e := whatIfEnv(t, "prescient")
	urgent := spec(8, 20*time.Minute)
	urgent.Tier = cluster.TierProduction
	urgent.Deadline = e.clock.Now().Add(2 * time.Hour)
	res, err := e.plane.WhatIf(e.ctx, service.WhatIfRequest{AddJobs: []service.SubmitRequest{{ID: "urgent", Spec: urgent}}})
	if err != nil {
		t.Fatal(err)
	}
	got := byJob(res)
	u := got["urgent"]
	if !u.Hypothetical || u.Start == nil || u.End == nil || u.BaselineEnd != nil || u.DeadlineFeasible == nil || !*u.DeadlineFeasible {
		t.Fatalf("urgent: %+v, want a hypothetical job that starts, ends within its deadline, without a baseline", u)
	}
	delayed := 0
	for id, j := range got {
		if id == "urgent" {
			continue
		}
		if j.DeltaEndS != nil && *j.DeltaEndS > 0 {
			delayed++
		}
		if j.Start != nil && j.Start.Before(*u.Start) && id[0] == 'q' {
			t.Errorf("%s starts at %s, before the production job at %s", id, j.Start, u.Start)
		}
	}
	if delayed == 0 {
		t.Errorf("no job ends later with an 8-GPU production job added: %+v", res.Jobs)
	}
	if res.Scenario.DeadlinesTotal != 1 || res.Scenario.DeadlinesMet != 1 || res.Baseline.DeadlinesTotal != 0 {
		t.Errorf("deadlines: scenario %+v baseline %+v", res.Scenario, res.Baseline)
	}
	// Removing the queued jobs takes them out of the scenario.
	res, err = e.plane.WhatIf(e.ctx, service.WhatIfRequest{RemoveJobs: []cluster.JobID{"q0", "q1"}, Policy: "fifo"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := byJob(res)["q0"]; ok || res.Policy != "fifo" {
		t.Errorf("q0 still in the scenario (policy %s)", res.Policy)
	}
}

func TestWhatIfRejectsBadRequests(t *testing.T) {
	e := whatIfEnv(t, "fifo")
	for name, req := range map[string]service.WhatIfRequest{
		"unknown node":   {RemoveNodes: []string{"n7"}},
		"duplicate node": {AddNodes: []cluster.Node{clustertest.Node("n0").GPUs(1, "A100").Obj()}},
		"unknown job":    {RemoveJobs: []cluster.JobID{"zz"}},
		"bad policy":     {Policy: "coin-flip"},
		"bad spec":       {AddJobs: []service.SubmitRequest{{Spec: cluster.JobSpec{GPUs: 1}}}},
		"taken id":       {AddJobs: []service.SubmitRequest{{ID: "q0", Spec: spec(1, time.Minute)}}},
		"long horizon":   {Horizon: 365 * 24 * time.Hour},
		"no nodes left":  {RemoveNodes: []string{"n0", "n1"}},
	} {
		if _, err := e.plane.WhatIf(e.ctx, req); !errors.Is(err, service.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}

func TestWhatIfTreatsAJobBeingPreemptedAsRequeued(t *testing.T) {
	e := preemptionEnv(t) // low is checkpointing to make room for high
	res, err := e.plane.WhatIf(e.ctx, service.WhatIfRequest{})
	if err != nil {
		t.Fatal(err)
	}
	got := byJob(res)
	now := e.clock.Now()
	high, low := got["high"], got["low"]
	if high.Start == nil || !high.Start.Equal(now) {
		t.Errorf("high starts at %v, want now (%s)", high.Start, now)
	}
	// low resumes after high's hour with its 20 minutes of progress kept.
	if low.Start == nil || low.End == nil || !low.Start.Equal(now.Add(time.Hour)) || !low.End.Equal(now.Add(time.Hour+10*time.Hour-20*time.Minute)) {
		t.Errorf("low %v → %v, want +1h → +10h40m", low.Start, low.End)
	}
}

// Queued jobs get a predicted start and end from the last simulation of
// the queue; a start that passed without the job starting is now.
func TestQueuedJobsArePredictedFromASimulationOfTheQueue(t *testing.T) {
	e := whatIfEnv(t, "fifo") // r0, r1 end 40 minutes from now; q0..q5 (4 GPUs, 30 min) queued
	if st, err := e.plane.Job(e.ctx, "q0"); err != nil || st.PredictedStart != nil {
		t.Fatalf("q0 before any queue forecast: %+v (%v); want no prediction", st.PredictedStart, err)
	}
	if err := e.plane.whatif.RefreshQueue(e.ctx); err != nil {
		t.Fatal(err)
	}
	now := e.clock.Now()
	for id, wantStart := range map[cluster.JobID]time.Duration{"q0": 40 * time.Minute, "q4": 70 * time.Minute} {
		st, err := e.plane.Job(e.ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if st.PredictedStart == nil || st.PredictedEnd == nil || st.PredictedStart.Sub(now) != wantStart ||
			st.PredictedEnd.Sub(*st.PredictedStart) != 30*time.Minute {
			t.Errorf("%s: predicted %v to %v; want a 30-minute run from now+%s", id, st.PredictedStart, st.PredictedEnd, wantStart)
		}
	}
	e.clock.Advance(50 * time.Minute) // past q0's predicted start, no cycle ran
	st, err := e.plane.Job(e.ctx, "q0")
	if err != nil {
		t.Fatal(err)
	}
	if !st.PredictedStart.Equal(e.clock.Now()) {
		t.Errorf("q0's passed start shown as %v; want now (%v)", st.PredictedStart, e.clock.Now())
	}
}

// TestAWhatIfSaysHowFarItLooked asks with a one-hour horizon: the four
// jobs that start 40 minutes from now have a start and no end (they end
// after it), the two that start at 70 minutes are beyond the horizon in
// both plans, and the summaries count them and stop at the horizon. With
// a compute budget already spent the answer covers only now.
func TestAWhatIfSaysHowFarItLooked(t *testing.T) {
	e := whatIfEnv(t, "fifo")
	now := e.clock.Now()
	res, err := e.plane.WhatIf(e.ctx, service.WhatIfRequest{Horizon: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if res.Horizon == nil || !res.Horizon.Equal(now.Add(time.Hour)) || res.HorizonReason != "horizon" {
		t.Fatalf("horizon %v (%q), want now+1h (horizon)", res.Horizon, res.HorizonReason)
	}
	got := byJob(res)
	for _, id := range []cluster.JobID{"q0", "q1", "q2", "q3"} {
		j := got[id]
		if j.Start == nil || !j.Start.Equal(now.Add(40*time.Minute)) || j.End != nil || j.BeyondHorizon || j.DeltaEndS != nil {
			t.Errorf("%s: %+v; want a start 40 minutes from now, no end and no delta", id, j)
		}
	}
	for _, id := range []cluster.JobID{"q4", "q5"} {
		j := got[id]
		if j.Start != nil || j.BaselineStart != nil || !j.BeyondHorizon || !j.BaselineBeyondHorizon {
			t.Errorf("%s: %+v; want beyond the horizon in both plans", id, j)
		}
	}
	if s := res.Scenario; s.BeyondHorizon != 2 || s.MakespanS != 3600 || s.MeanWaitS != 40*60 {
		t.Errorf("scenario summary %+v; want 2 beyond the horizon, makespan 3600 s (the horizon), mean wait 2400 s", s)
	}

	e2 := newEnv(t, fleetOf(2, 8), func(c *Config) { c.Policy = "fifo"; c.WhatIfBudget = time.Nanosecond })
	e2.submit("r0", spec(8, time.Hour))
	e2.submit("r1", spec(8, time.Hour))
	e2.plane.cycle(e2.ctx)
	e2.submit("q0", spec(4, 30*time.Minute))
	res, err = e2.plane.WhatIf(e2.ctx, service.WhatIfRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Horizon == nil || !res.Horizon.Equal(e2.clock.Now()) || res.HorizonReason != "budget" || !byJob(res)["q0"].BeyondHorizon {
		t.Errorf("with the budget spent: horizon %v (%q), q0 %+v; want now (budget) and q0 beyond it", res.Horizon, res.HorizonReason, byJob(res)["q0"])
	}
}

// TestAQueuedJobBeyondTheForecastSaysSo queues a job behind two that run
// for ten days: the queue forecast looks 7 days ahead, so the job's
// status says it starts after that, not when.
func TestAQueuedJobBeyondTheForecastSaysSo(t *testing.T) {
	e := newEnv(t, fleetOf(2, 8), func(c *Config) { c.Policy = "fifo" })
	e.submit("r0", spec(8, 240*time.Hour))
	e.submit("r1", spec(8, 240*time.Hour))
	e.plane.cycle(e.ctx)
	e.submit("q0", spec(4, time.Hour))
	if err := e.plane.whatif.RefreshQueue(e.ctx); err != nil {
		t.Fatal(err)
	}
	st, err := e.plane.Job(e.ctx, "q0")
	if err != nil {
		t.Fatal(err)
	}
	want := e.clock.Now().Add(whatif.DefaultWhatIfHorizon)
	if st.PredictedStart != nil || st.PredictedEnd != nil || st.PredictedStartAfter == nil || !st.PredictedStartAfter.Equal(want) {
		t.Errorf("q0 predicted start %v, end %v, after %v; want only after %s", st.PredictedStart, st.PredictedEnd, st.PredictedStartAfter, want)
	}
}

// A changed copy of the tenants runs in the scenario only: a quota of 4
// GPUs on the tenant of every job serializes the queue there, and the
// baseline keeps the tenants in force (no quotas).
func TestWhatIfTriesAChangedCopyOfTheTenants(t *testing.T) {
	e := whatIfEnv(t, "fifo")
	tenant := spec(1, time.Minute).Tenant
	before := fmt.Sprint(e.plane.tenantsNow())
	res, err := e.plane.WhatIf(e.ctx, service.WhatIfRequest{Tenants: []cluster.Tenant{{Name: tenant, Weight: 1, Quota: []cluster.Quota{{GPUs: 4}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Baseline.MakespanS != 100*60 {
		t.Errorf("baseline makespan %gs, want the tenants in force's 6000", res.Baseline.MakespanS)
	}
	// r0 and r1 run on (a quota does not stop what runs); then the six
	// 30-minute jobs one at a time: 40 + 6 × 30 minutes.
	if res.Scenario.MakespanS != 220*60 {
		t.Errorf("scenario makespan %gs with a quota of 4 GPUs, want 13200", res.Scenario.MakespanS)
	}
	if after := fmt.Sprint(e.plane.tenantsNow()); after != before {
		t.Errorf("the what-if changed the tenants in force: %s, then %s", before, after)
	}
}
