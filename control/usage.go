package control

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/prescient-sched/prescient/cluster"
)

// usageLookback is how many half-lives of history restoreUsage reads: what
// is older weighs less than 1/2^8 of its GPU-time.
const usageLookback = 8

// restoreUsage rebuilds the tenants' decayed GPU-time at now from the
// store's job events, so that a restarted plane keeps fair share instead of
// starting every tenant from zero. A job holds its GPUs from a started
// event until the event that takes it out of running or checkpointing; its
// GPU-time between s and e counts GPUs × ∫ 2^(−(now−t)/H) dt, the limit of
// what usageNow adds and decays cycle by cycle.
func (p *Plane) restoreUsage(ctx context.Context, now time.Time) error {
	h := p.cfg.UsageHalfLife
	from := now.Add(-usageLookback * h)
	jobs, err := p.cfg.Store.JobsLiveIn(ctx, from, now)
	if err != nil {
		return fmt.Errorf("usage history: %w", err)
	}
	events, err := p.cfg.Store.EventsIn(ctx, from, now)
	if err != nil {
		return fmt.Errorf("usage history: %w", err)
	}
	byID := make(map[cluster.JobID]*cluster.Job, len(jobs))
	for i := range jobs {
		byID[jobs[i].ID] = &jobs[i]
	}
	holds := func(s cluster.JobState) bool { return s == cluster.StateRunning || s == cluster.StateCheckpointing }
	usage := map[string]time.Duration{}
	add := func(j *cluster.Job, s, e time.Time) {
		if j == nil || !e.After(s) {
			return
		}
		weight := h.Seconds() / math.Ln2 * (math.Exp2(-now.Sub(e).Seconds()/h.Seconds()) - math.Exp2(-now.Sub(s).Seconds()/h.Seconds()))
		usage[j.Spec.Tenant] += time.Duration(weight * float64(time.Second) * float64(max(j.Spec.GPUs, 1)))
	}
	since := map[cluster.JobID]time.Time{} // holding GPUs since
	seen := map[cluster.JobID]bool{}
	for _, ev := range events {
		seen[ev.JobID] = true
		s, open := since[ev.JobID]
		switch {
		case holds(ev.To) && !open:
			if holds(ev.From) { // held them before the window
				add(byID[ev.JobID], from, ev.Time)
			}
			since[ev.JobID] = ev.Time
		case !holds(ev.To) && open:
			add(byID[ev.JobID], s, ev.Time)
			delete(since, ev.JobID)
		case !holds(ev.To) && holds(ev.From): // held them since before the window
			add(byID[ev.JobID], from, ev.Time)
		}
	}
	for id, s := range since {
		add(byID[id], s, now)
	}
	for i := range jobs {
		if j := &jobs[i]; !seen[j.ID] && holds(j.State) { // ran through the whole window
			add(j, from, now)
		}
	}
	p.mu.Lock()
	p.usage, p.usageAt = usage, now
	p.mu.Unlock()
	return nil
}
