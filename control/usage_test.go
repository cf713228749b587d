package control

import (
	"math"
	"testing"
	"time"

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
	before := e.plane.usageNow(&live{now: e.clock.Now()})
	if before["t1"] <= 0 || before["t2"] <= 0 {
		t.Fatalf("usage before the restart %v: want both tenants", before)
	}

	e.restart()
	after := e.plane.usageNow(&live{now: e.clock.Now()})
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
