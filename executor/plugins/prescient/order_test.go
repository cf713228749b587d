package prescient

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
)

func TestWaitFairnessInTheOrderAndTheReserver(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := DefaultArgs()
	o, err := NewOrder(a)
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewReserver(a)
	if err != nil {
		t.Fatal(err)
	}
	job := func(tenant string, p50 time.Duration) *executor.JobView {
		return &executor.JobView{Job: &cluster.Job{ID: cluster.JobID(tenant), Spec: cluster.JobSpec{Tenant: tenant}, State: cluster.StateQueued},
			Forecast: executor.Forecast{DurationP50: p50, DurationP90: p50}, QueuedSince: now}
	}
	ctx := &executor.OrderContext{Now: now, Shares: map[string]executor.FairShare{
		"even":   {Factor: 1, WaitRatio: 0.7},
		"slow":   {Factor: 1, WaitRatio: 1.4},
		"behind": {Factor: 1, WaitRatio: 1.6},
	}}
	even, slow, behind := o.Key(job("even", time.Hour), ctx), o.Key(job("slow", time.Hour), ctx), o.Key(job("behind", 10*time.Hour), ctx)
	if even[1] != classOther || slow[1] != classOther || behind[1] != classBehind {
		t.Fatalf("classes %v %v %v, want others, others, behind", even[1], slow[1], behind[1])
	}
	// At the floor the length is unweighted; at twice the floor it is
	// (1/2)^WaitExponent of it.
	if even[2] != 3600 || slow[2] != 3600/256. {
		t.Errorf("weighted lengths %.3f and %.3f, want 3600 and 14.0625", even[2], slow[2])
	}
	// A behind tenant's long job runs before a short one of the others.
	if !behind.Less(even) {
		t.Errorf("behind tenant's key %v does not sort before %v", behind, even)
	}
	if ok, why := r.Reserve(job("behind", 10*time.Hour), 0, ctx); !ok || !strings.Contains(why, "behind waits 1.6× the fleet's average") {
		t.Errorf("reservation for the behind tenant: %v %q", ok, why)
	}
	if ok, _ := r.Reserve(job("slow", time.Hour), 0, ctx); ok {
		t.Error("a tenant under the behind ratio got a reservation")
	}
	// Off: neither class nor weight.
	a.WaitExponent, a.BehindRatio = 0, 0
	off, _ := NewOrder(a)
	if k := off.Key(job("behind", 10*time.Hour), ctx); k[1] != classOther || k[2] != 36000 {
		t.Errorf("wait fairness off: key %v, want class %d and 36000", k, classOther)
	}
}

func TestArgsRejectBadWaitFairness(t *testing.T) {
	for _, mod := range []func(*Args){
		func(a *Args) { a.WaitFloor = 0 },
		func(a *Args) { a.WaitExponent = -1 },
		func(a *Args) { a.BehindRatio = 0.5 },
	} {
		a := DefaultArgs()
		mod(&a)
		if err := a.Validate(); err == nil {
			t.Errorf("%+v accepted", a)
		}
	}
}

// TestKeyFromTheQueuedPartIsTheKey: for queued jobs urgent, starving and
// neither, of wide and sure forecasts, KeyFrom with QueuedPart, taken when
// the job was queued, is Key and NextChange at later times too
// (executor.PartedOrder's contract), and so is KeyFrom with no part.
func TestKeyFromTheQueuedPartIsTheKey(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	o, err := NewOrder(DefaultArgs())
	if err != nil {
		t.Fatal(err)
	}
	ctx := &executor.OrderContext{Now: now, Shares: map[string]executor.FairShare{"a": {Factor: 1.5, WaitRatio: 2}}}
	for _, c := range []struct {
		p50, p90 time.Duration
		waited   time.Duration
		deadline time.Duration // from now; 0: none
	}{
		{time.Hour, time.Hour, time.Minute, 0},
		{time.Hour, 5 * time.Hour, 2 * time.Hour, 0},
		{time.Hour, 5 * time.Hour, 48 * time.Hour, 0},      // starving
		{time.Hour, 2 * time.Hour, time.Minute, time.Hour}, // urgent
	} {
		j := &cluster.Job{ID: "j", Spec: cluster.JobSpec{Tenant: "a"}, State: cluster.StateQueued}
		if c.deadline > 0 {
			j.Spec.Deadline = now.Add(c.deadline)
		}
		v := &executor.JobView{Job: j, Forecast: executor.Forecast{DurationP50: c.p50, DurationP90: c.p90}, QueuedSince: now.Add(-c.waited)}
		part := o.QueuedPart(v)
		for _, later := range []time.Duration{0, time.Minute, 40 * time.Minute, 30 * time.Hour} {
			ctx := &executor.OrderContext{Now: now.Add(later), Shares: ctx.Shares}
			key, next := o.Key(v, ctx), o.NextChange(v, false, ctx.Now)
			for _, p := range []any{part, nil} {
				if k, n := o.KeyFrom(v, p, ctx); k != key || !n.Equal(next) {
					t.Errorf("%+v, %s later, part %v: KeyFrom %v, %s; Key %v, NextChange %s", c, later, p != nil, k, n, key, next)
				}
			}
		}
	}
	// Tenants numbered past maxTenantIDs are weighed by name: the same key.
	for i := range maxTenantIDs {
		o.tenantID(fmt.Sprintf("t%d", i))
	}
	shares := map[string]executor.FairShare{"a": {Factor: 1.5, WaitRatio: 2}, "late": {Factor: 0.5, WaitRatio: 3}}
	for _, tenant := range []string{"a", "late"} {
		j := &cluster.Job{ID: "j", Spec: cluster.JobSpec{Tenant: tenant}, State: cluster.StateQueued}
		v := &executor.JobView{Job: j, Forecast: executor.Forecast{DurationP50: time.Hour, DurationP90: 2 * time.Hour}, QueuedSince: now}
		ctx := &executor.OrderContext{Now: now.Add(time.Hour), Shares: shares}
		if k, _ := o.KeyFrom(v, o.QueuedPart(v), ctx); k != o.Key(v, ctx) {
			t.Errorf("tenant %s: KeyFrom %v, Key %v", tenant, k, o.Key(v, ctx))
		}
	}
}
