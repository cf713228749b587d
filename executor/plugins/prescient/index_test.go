package prescient

import (
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
)

// TestIndexRanksAsKeyingEveryJob is the index's property test: jobs of
// several tiers and tenants, with and without deadlines, of sure and wide
// forecasts, some that have run (not queued: they do not age), come and
// go while the clock moves on in steps short and long (past starving and
// urgency), and tenants' usage and waits move them between classes. After
// every step the index ranks the queue in the order, with the keys and the
// next change that keying every job gives (executor.CheckIndex).
func TestIndexRanksAsKeyingEveryJob(t *testing.T) {
	epoch := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rapid.Check(t, func(rt *rapid.T) {
		a := DefaultArgs()
		a.AgingHorizon = rapid.SampledFrom([]time.Duration{time.Hour, 6 * time.Hour, 90 * time.Minute}).Draw(rt, "aging")
		a.ReserveAfter = rapid.SampledFrom([]time.Duration{2 * time.Hour, 24 * time.Hour}).Draw(rt, "reserve_after")
		a.UrgencyWindow = rapid.SampledFrom([]time.Duration{0, 30 * time.Minute, 3 * time.Hour}).Draw(rt, "urgency")
		o, err := NewOrder(a)
		if err != nil {
			rt.Fatal(err)
		}
		ix := o.NewQueueIndex()
		tenants := []string{"a", "b", "c"}
		in := &executor.PlanInput{Now: epoch, UsageGPU: map[string]time.Duration{}, Waits: map[string]executor.TenantWaits{}}
		var queue []*executor.JobView
		for step := range rapid.IntRange(1, 60).Draw(rt, "steps") {
			switch rapid.IntRange(0, 10).Draw(rt, "op") {
			case 0, 1, 2, 3: // a job arrives, waiting for some time already
				j := &cluster.Job{ID: cluster.JobID(fmt.Sprintf("j%d", step)), State: cluster.StateQueued,
					Spec: cluster.JobSpec{Tenant: rapid.SampledFrom(tenants).Draw(rt, "tenant"), GPUs: 1,
						Tier: rapid.SampledFrom([]cluster.Tier{cluster.TierBatch, cluster.TierStandard}).Draw(rt, "tier")}}
				if rapid.Bool().Draw(rt, "has_deadline") {
					j.Spec.Deadline = in.Now.Add(time.Duration(rapid.IntRange(-2, 40).Draw(rt, "deadline_h")) * time.Hour)
				}
				// Lengths near each other, so that ages decide the order.
				p50 := time.Duration(rapid.SampledFrom([]int{600, 700, 720, 800, 900, 20000}).Draw(rt, "p50_s")) * time.Second
				// Queued on the quarter hour: jobs of tenants weighed alike tie
				// in key across buckets, and go by submit time.
				since := in.Now.Add(-time.Duration(rapid.IntRange(0, 12).Draw(rt, "queued_quarters")) * 15 * time.Minute)
				j.SubmitTime = since.Add(-time.Duration(rapid.IntRange(0, 3600).Draw(rt, "submitted_before_s")) * time.Second)
				v := &executor.JobView{Job: j, QueuedSince: since,
					Forecast: executor.Forecast{DurationP50: p50, DurationP90: p50 * time.Duration(rapid.SampledFrom([]int{1, 1, 2, 6}).Draw(rt, "spread"))}}
				if rapid.IntRange(0, 4).Draw(rt, "ran") == 0 { // a job that has run, back in the queue in another state
					j.State = cluster.StateCheckpointing
					v.Progress = time.Duration(rapid.IntRange(0, 20000).Draw(rt, "progress_s")) * time.Second
				}
				queue = append(queue, v)
				ix.Add(v)
			case 4, 5: // one leaves
				if len(queue) > 0 {
					i := rapid.IntRange(0, len(queue)-1).Draw(rt, "leaves")
					ix.Remove(queue[i])
					queue = append(queue[:i], queue[i+1:]...)
				}
			case 6: // tenants' use and waits move
				for _, name := range tenants {
					in.UsageGPU[name] = time.Duration(rapid.IntRange(0, 100).Draw(rt, "usage_h")) * time.Hour
					in.Waits[name] = executor.TenantWaits{QueuedS: float64(rapid.IntRange(0, 1e6).Draw(rt, "queued_s")), Arrivals: 10}
				}
			case 7, 8: // the clock moves on a little
				in.Now = in.Now.Add(time.Duration(rapid.IntRange(0, 1800).Draw(rt, "advance_s")) * time.Second)
			default: // or far, past starving and deadlines
				in.Now = in.Now.Add(time.Duration(rapid.IntRange(0, 30*3600).Draw(rt, "advance_far_s")) * time.Second)
			}
			in.Queue = queue
			if err := executor.CheckIndex(o, ix, in); err != nil {
				rt.Fatalf("step %d at %s: %v", step, in.Now.Format(time.RFC3339), err)
			}
		}
	})
}
