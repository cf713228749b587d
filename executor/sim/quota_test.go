package sim_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/cluster/clustertest"
	"github.com/prescient-sched/prescient/executor/policies"
	"github.com/prescient-sched/prescient/executor/sim"
)

// Three tenants in one cohort share 80 GPUs 40/40/20% (32/32/16). a comes
// first with far more work than its quota and borrows the idle GPUs, up
// to its borrowing limit; an hour later b submits its nominal quota's
// worth and gets it back from a within the cycle of its arrival plus the
// victims' grace. No tenant ever holds more than its quota plus its
// borrowing limit. The rules are the planner's, so every policy obeys
// them, preemptive or not.
func TestACohortLendsIdleQuotaAndTakesItBack(t *testing.T) {
	forty := 40
	fleet := mustFleet(t, "uniform:10x8:V100")
	fleet.Tenants = []cluster.Tenant{
		{Name: "a", Weight: 1, Cohort: "lab", Quota: []cluster.Quota{{GPUs: 32, BorrowingLimit: &forty}}},
		{Name: "b", Weight: 1, Cohort: "lab", Quota: []cluster.Quota{{GPUs: 32}}},
		{Name: "c", Weight: 1, Cohort: "lab", Quota: []cluster.Quota{{GPUs: 16}}},
	}
	t0 := clustertest.Epoch
	var jobs []cluster.Job
	add := func(tenant string, n int, at time.Time, run time.Duration) {
		for i := range n {
			j := clustertest.Job(fmt.Sprintf("%s%02d", tenant, i)).GPUs(4).Tenant(tenant).Submitted(at.Add(time.Duration(i) * time.Millisecond)).
				Checkpointable(time.Minute).Obj()
			j.Outcome.RunTime = run
			jobs = append(jobs, j)
		}
	}
	add("a", 30, t0, 10*time.Hour)
	add("b", 8, t0.Add(time.Hour), time.Hour)

	for _, policy := range []string{"fifo", "prescient"} {
		t.Run(policy, func(t *testing.T) {
			pol, err := policies.New(policy, policies.Options{})
			if err != nil {
				t.Fatal(err)
			}
			r := replay(t, policy, fleet, jobs, func(c *sim.Config) { c.Outcomes = true; c.Check = true })
			if r.Finished != len(jobs) {
				t.Fatalf("%d of %d jobs finished", r.Finished, len(jobs))
			}
			if r.PeakGPUsByTenant["a"] != 72 {
				t.Errorf("a held at most %d GPUs, want 72: its 32 and 40 borrowed of the 48 others leave idle, never more",
					r.PeakGPUsByTenant["a"])
			}
			if r.PeakGPUsByTenant["b"] > 32 || r.PeakGPUsByTenant["c"] != 0 {
				t.Errorf("peaks %v", r.PeakGPUsByTenant)
			}
			startedAtOnce := 0
			for _, o := range r.Outcomes {
				switch o.Job[0] {
				case 'a':
					if o.Start.Sub(t0) < time.Second {
						startedAtOnce++
					}
				case 'b':
					if late := o.Start.Sub(t0.Add(time.Hour)); late > pol.Grace+time.Second {
						t.Errorf("%s started %s after it came, want within the grace of its quota's borrowers (%s)", o.Job, late, pol.Grace)
					}
				}
			}
			if startedAtOnce != 18 {
				t.Errorf("%d of a's jobs started at once, want 18 (72 GPUs): borrowing fills what is idle", startedAtOnce)
			}
			if r.Preemptions < 6 {
				t.Errorf("%d preemptions, want at least the 6 of a's jobs b's 24 GPUs were lent to", r.Preemptions)
			}
		})
	}
}
