package control

import (
	"math"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/control/live"
	"github.com/prescient-sched/prescient/executor"
)

// A restart keeps the tenants' fair-share usage: what restoreUsage rebuilds
// from the store's events is what the plane had added up cycle by cycle.
func TestARestartKeepsTheTenantsUsage(t *testing.T) {
	e := newEnv(t, fleetOf(1, 8), nil)
	a := spec(2, 10*time.Hour)
	b := spec(1, 10*time.Hour)
	b.Tenant = "t2"
	e.submit("a", a)
	e.submit("b", b)
	e.plane.cycle(e.ctx)
	e.event(executor.JobEvent{Type: executor.JobStarted, Job: "a", Attempt: 1, Node: "n0"})
	e.event(executor.JobEvent{Type: executor.JobStarted, Job: "b", Attempt: 1, Node: "n0"})
	step := func(n int) {
		for range n {
			e.clock.Advance(5 * time.Minute)
			e.plane.cycle(e.ctx)
		}
	}
	step(24) // 2 h
	e.event(executor.JobEvent{Type: executor.JobExited, Job: "a", Attempt: 1, Node: "n0"})
	step(12) // 1 h more: b still runs
	before := e.plane.fair.usageNow(&live.State{Now: e.clock.Now()})
	if before["t1"] <= 0 || before["t2"] <= 0 {
		t.Fatalf("usage before the restart %v: want both tenants", before)
	}

	e.restart()
	after := e.plane.fair.usageNow(&live.State{Now: e.clock.Now()})
	for _, tenant := range []string{"t1", "t2"} {
		if r := float64(after[tenant]) / float64(before[tenant]); math.Abs(r-1) > 0.01 {
			t.Errorf("tenant %s: usage %s after the restart, %s before", tenant, after[tenant], before[tenant])
		}
	}
	// 2 h on 2 GPUs an hour ago weighs about 4 GPU-hours × 2^(−2/24);
	// 3 h on 1 GPU up to now about 3 × 2^(−1.5/24).
	if got := after["t1"].Hours(); math.Abs(got-4*math.Exp2(-2.0/24)) > 0.05 {
		t.Errorf("t1's usage %.3f GPU-hours, want about %.3f", got, 4*math.Exp2(-2.0/24))
	}
	if got := after["t2"].Hours(); math.Abs(got-3*math.Exp2(-1.5/24)) > 0.05 {
		t.Errorf("t2's usage %.3f GPU-hours, want about %.3f", got, 3*math.Exp2(-1.5/24))
	}
}

// A restart keeps the tenants' waits too: what restoreFairness rebuilds of
// queued time and arrivals is what waitsNow had added up cycle by cycle.
func TestARestartKeepsTheTenantsWaits(t *testing.T) {
	e := newEnv(t, fleetOf(1, 1), nil)
	a := spec(1, 10*time.Hour)
	b := spec(1, 10*time.Hour)
	b.Tenant = "t2"
	e.submit("a", a)
	e.plane.cycle(e.ctx)
	e.event(executor.JobEvent{Type: executor.JobStarted, Job: "a", Attempt: 1, Node: "n0"})
	e.submit("b", b) // waits for a's GPU
	step := func(n int) {
		for range n {
			e.clock.Advance(5 * time.Minute)
			e.plane.cycle(e.ctx)
		}
	}
	step(24) // 2 h
	before := e.plane.fair.waitsNow(&live.State{Now: e.clock.Now()})
	if before["t2"].QueuedS <= 0 || before["t2"].Arrivals <= 0 || before["t1"].Arrivals <= 0 {
		t.Fatalf("waits before the restart %+v: want t2 queued and both arrived", before)
	}
	e.restart()
	after := e.plane.fair.waitsNow(&live.State{Now: e.clock.Now()})
	for _, tenant := range []string{"t1", "t2"} {
		bw, aw := before[tenant], after[tenant]
		if math.Abs(aw.QueuedS-bw.QueuedS) > 0.01*math.Max(bw.QueuedS, 1) || math.Abs(aw.Arrivals-bw.Arrivals) > 0.01*bw.Arrivals {
			t.Errorf("tenant %s: waits %+v after the restart, %+v before", tenant, aw, bw)
		}
	}
	// b has waited 2 h, decayed by a month's half-life: about 7,200 s.
	if got := after["t2"].QueuedS; math.Abs(got-7200) > 100 {
		t.Errorf("t2 queued %.0f job-seconds, want about 7200", got)
	}
}
