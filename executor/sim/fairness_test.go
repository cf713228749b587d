package sim_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/cluster/clustertest"
	"github.com/prescient-sched/prescient/executor/plugins/prescient"
	"github.com/prescient-sched/prescient/executor/policies"
)

// streams is two tenants on two 4-GPU nodes for two days: "short" sends a
// one-GPU job of 30 minutes every 6 minutes, "long" a four-GPU job of 5
// hours every 8 hours (5 + 2.5 GPUs busy on average: 94% of the fleet).
func streams() (*cluster.Fleet, []cluster.Job) {
	fleet := clustertest.Fleet(clustertest.Node("n1").GPUs(4, "V100").Obj(), clustertest.Node("n2").GPUs(4, "V100").Obj())
	var jobs []cluster.Job
	for i := range 48 * 10 {
		j := clustertest.Job(fmt.Sprintf("s%03d", i)).GPUs(1).Tenant("short").Submitted(clustertest.Epoch.Add(time.Duration(i) * 6 * time.Minute)).Obj()
		j.Outcome.RunTime = 30 * time.Minute
		jobs = append(jobs, j)
	}
	for i := range 48 / 8 {
		j := clustertest.Job(fmt.Sprintf("l%d", i)).GPUs(4).Tenant("long").Submitted(clustertest.Epoch.Add(time.Duration(i)*8*time.Hour + time.Minute)).Obj()
		j.Outcome.RunTime = 5 * time.Hour
		jobs = append(jobs, j)
	}
	return fleet, jobs
}

// TestWaitFairnessBoundsATenantOfLongJobs: shortest-first lets the tenant
// of long four-GPU jobs wait many times the fleet's average; with wait
// fairness (the prescient policy's default) its jobs wait at most 3 times
// the average, at a small cost in the fleet's mean completion time
// (measured: 46× and 1.2×, average JCT 3,334 s and 3,474 s).
func TestWaitFairnessBoundsATenantOfLongJobs(t *testing.T) {
	fleet, jobs := streams()
	ratio := func(name string, mod func(*prescient.Args)) (float64, float64) {
		pol, err := policies.New("prescient", policies.Options{})
		if err != nil {
			t.Fatal(err)
		}
		a := prescient.DefaultArgs()
		mod(&a)
		if pol.Order, err = prescient.NewOrder(a); err != nil {
			t.Fatal(err)
		}
		if pol.Reserver, err = prescient.NewReserver(a); err != nil {
			t.Fatal(err)
		}
		r := replayPolicy(t, pol, fleet, jobs, nil)
		if r.Finished != len(jobs) {
			t.Fatalf("%s: %d of %d jobs finished", name, r.Finished, len(jobs))
		}
		got := r.WaitByTenantS["long"] / r.AvgWaitS
		t.Logf("%s: tenant long waits %.0fs, short %.0fs, fleet %.0fs (%.1f×); avg JCT %.0fs", name,
			r.WaitByTenantS["long"], r.WaitByTenantS["short"], r.AvgWaitS, got, r.AvgJCTS)
		return got, r.AvgJCTS
	}
	off, offJCT := ratio("without wait fairness", func(a *prescient.Args) { a.WaitExponent, a.BehindRatio = 0, 0 })
	on, onJCT := ratio("with wait fairness", func(*prescient.Args) {})
	if !(off >= 5) {
		t.Fatalf("without wait fairness the long tenant waits %.1f× the average; the scenario should starve it (≥ 5×)", off)
	}
	if !(on <= 3) {
		t.Errorf("with wait fairness the long tenant waits %.1f× the fleet's average, want at most 3×", on)
	}
	if !(onJCT <= 1.15*offJCT) {
		t.Errorf("wait fairness raised the average JCT from %.0fs to %.0fs, more than 15%%", offJCT, onJCT)
	}
}
