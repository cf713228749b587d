package control

import (
	"context"
	"fmt"
	"maps"
	"math"
	"sync"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/control/live"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/executor/park"
	"github.com/prescient-sched/prescient/store"
)

// usageLookback is how many half-lives of history restoreFairness reads for
// usage: what is older weighs less than 1/2^8 of its GPU-time.
const usageLookback = 8

// waitsLookback is how many half-lives of history it reads for waits: with
// the month-long DefaultWaitHalfLife, two months. What is older would weigh
// under a quarter, so at a steady rate the restored terms are about three
// quarters of what a plane running all along holds, alike for every tenant,
// which leaves their ratios; reading eight would mean most of a year of
// events.
const waitsLookback = 2

// fairness is what the plan loop accounts of the tenants at each cycle:
// their decayed GPU-time (usageNow) and waits (waitsNow), and the GPUs of
// the jobs seen arriving, parking's arrival rate (arrivalRate). A restart
// rebuilds it from the store's events (restoreFairness).
type fairness struct {
	usageHalfLife, waitHalfLife time.Duration

	mu       sync.Mutex
	usage    map[string]time.Duration
	usageAt  time.Time
	waits    map[string]executor.TenantWaits
	waitsAt  time.Time
	arrived  map[cluster.JobID]uint64 // jobs counted in waits: the waits cycle they were last seen
	cycle    uint64
	arrivals park.Arrivals
}

// restoreFairness rebuilds the tenants' decayed GPU-time and waits at now
// from the store's job events, so that a restarted plane keeps fair share
// and wait fairness instead of starting every tenant from zero.
func (p *Plane) restoreFairness(ctx context.Context, now time.Time) error {
	uh, wh := p.cfg.UsageHalfLife, p.cfg.WaitHalfLife
	usageFrom, waitsFrom := now.Add(-usageLookback*uh), now.Add(-waitsLookback*wh)
	from := usageFrom
	if waitsFrom.Before(from) {
		from = waitsFrom
	}
	jobs, err := p.cfg.Store.JobsLiveIn(ctx, from, now)
	if err != nil {
		return fmt.Errorf("fair-share history: %w", err)
	}
	events, err := p.cfg.Store.EventsIn(ctx, from, now)
	if err != nil {
		return fmt.Errorf("fair-share history: %w", err)
	}
	byID := make(map[cluster.JobID]*cluster.Job, len(jobs))
	for i := range jobs {
		byID[jobs[i].ID] = &jobs[i]
	}
	usage := restoreUsage(jobs, byID, eventsFrom(events, usageFrom), usageFrom, now, uh)
	waits := restoreWaits(jobs, byID, eventsFrom(events, waitsFrom), waitsFrom, now, wh)
	f := p.fair
	f.mu.Lock()
	defer f.mu.Unlock()
	f.usage, f.usageAt = usage, now
	f.waits, f.waitsAt = waits, now
	f.arrived = map[cluster.JobID]uint64{}
	f.arrivals = park.Arrivals{}
	for i := range jobs {
		j := &jobs[i]
		if !j.SubmitTime.Before(waitsFrom) && !j.State.Terminal() {
			f.arrived[j.ID] = f.cycle // counted above; waitsNow must not count it again
		}
		if !j.SubmitTime.Before(from) && !j.SubmitTime.After(now) {
			f.arrivals.Add(now, j.SubmitTime, float64(j.Spec.MilliGPUs())/cluster.MilliGPU) // parking's arrival rate
		}
	}
	return nil
}

// eventsFrom is the events at or after from, in their order.
func eventsFrom(events []store.Event, from time.Time) []store.Event {
	out := make([]store.Event, 0, len(events))
	for _, ev := range events {
		if !ev.Time.Before(from) {
			out = append(out, ev)
		}
	}
	return out
}

// decayedSeconds is ∫_s^e 2^(−(now−t)/h) dt in seconds: what an interval
// from s to e adds to a term that decays by h, seen at now.
func decayedSeconds(s, e, now time.Time, h time.Duration) float64 {
	hs := h.Seconds()
	return hs / math.Ln2 * (math.Exp2(-now.Sub(e).Seconds()/hs) - math.Exp2(-now.Sub(s).Seconds()/hs))
}

// intervals calls add for each stretch within [from, now] that a job spent
// in a state that in accepts, from the events (in time order) and, for jobs
// without events there, their state.
func intervals(jobs []cluster.Job, events []store.Event, from, now time.Time, in func(cluster.JobState) bool, add func(id cluster.JobID, s, e time.Time)) {
	since := map[cluster.JobID]time.Time{}
	seen := map[cluster.JobID]bool{}
	for _, ev := range events {
		seen[ev.JobID] = true
		s, open := since[ev.JobID]
		switch {
		case in(ev.To) && !open:
			if in(ev.From) { // in it before the window
				add(ev.JobID, from, ev.Time)
			}
			since[ev.JobID] = ev.Time
		case !in(ev.To) && open:
			add(ev.JobID, s, ev.Time)
			delete(since, ev.JobID)
		case !in(ev.To) && in(ev.From): // in it since before the window
			add(ev.JobID, from, ev.Time)
		}
	}
	for id, s := range since {
		add(id, s, now)
	}
	for i := range jobs {
		if j := &jobs[i]; !seen[j.ID] && in(j.State) { // in it through the whole window
			add(j.ID, from, now)
		}
	}
}

// restoreUsage is the tenants' decayed GPU-time: a job holds its GPUs from
// a started event until the event that takes it out of running or
// checkpointing; its GPU-time between s and e counts GPUs × ∫ 2^(−(now−t)/H)
// dt, the limit of what usageNow adds and decays cycle by cycle.
func restoreUsage(jobs []cluster.Job, byID map[cluster.JobID]*cluster.Job, events []store.Event, from, now time.Time, h time.Duration) map[string]time.Duration {
	usage := map[string]time.Duration{}
	holds := func(s cluster.JobState) bool { return s == cluster.StateRunning || s == cluster.StateCheckpointing }
	intervals(jobs, events, from, now, holds, func(id cluster.JobID, s, e time.Time) {
		if j := byID[id]; j != nil && e.After(s) {
			usage[j.Spec.Tenant] += time.Duration(decayedSeconds(s, e, now, h) * float64(time.Second) * float64(max(j.Spec.GPUs, 1)))
		}
	})
	return usage
}

// restoreWaits is the tenants' decayed queueing, what waitsNow adds up
// cycle by cycle: each stretch a job spent queued adds its decayed seconds,
// each job submitted in the window adds its decayed arrival.
func restoreWaits(jobs []cluster.Job, byID map[cluster.JobID]*cluster.Job, events []store.Event, from, now time.Time, h time.Duration) map[string]executor.TenantWaits {
	waits := map[string]executor.TenantWaits{}
	queued := func(s cluster.JobState) bool { return s == cluster.StateQueued }
	intervals(jobs, events, from, now, queued, func(id cluster.JobID, s, e time.Time) {
		if j := byID[id]; j != nil && e.After(s) {
			w := waits[j.Spec.Tenant]
			w.QueuedS += decayedSeconds(s, e, now, h)
			waits[j.Spec.Tenant] = w
		}
	})
	for i := range jobs {
		j := &jobs[i]
		if j.SubmitTime.Before(from) || j.SubmitTime.After(now) {
			continue
		}
		w := waits[j.Spec.Tenant]
		w.Arrivals += math.Exp2(-now.Sub(j.SubmitTime).Seconds() / h.Seconds())
		waits[j.Spec.Tenant] = w
	}
	return waits
}

// usageNow decays the tenants' usage to now and adds what the running jobs
// held since the last cycle.
func (f *fairness) usageNow(lv *live.State) map[string]time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.usageAt.IsZero() && lv.Now.After(f.usageAt) {
		dt := lv.Now.Sub(f.usageAt)
		decay := math.Exp2(-dt.Seconds() / f.usageHalfLife.Seconds())
		for t, u := range f.usage {
			f.usage[t] = time.Duration(float64(u) * decay)
		}
		for i := range lv.Active {
			j := &lv.Active[i]
			f.usage[j.Spec.Tenant] += dt * time.Duration(max(j.Spec.GPUs, 1))
		}
	}
	if lv.Now.After(f.usageAt) {
		f.usageAt = lv.Now // never back: a what-if's older state must not count an interval twice
	}
	out := make(map[string]time.Duration, len(f.usage))
	for t, u := range f.usage {
		out[t] = u
	}
	return out
}

// waitsNow moves the tenants' decayed waits on to now: the jobs queued now
// count as queued since the last cycle or since they were submitted, if
// later, and the live jobs not seen before arrive, weighed by their submit
// time (a job that came and went between two cycles is missed). A job stays
// known for arrivedFor cycles after it was last seen, so one that changed
// state between the reads of the queued and the active jobs is not counted
// again.
func (f *fairness) waitsNow(lv *live.State) map[string]executor.TenantWaits {
	f.mu.Lock()
	defer f.mu.Unlock()
	if lv.Now.Before(f.waitsAt) {
		return maps.Clone(f.waits) // a what-if's older state changes nothing
	}
	if f.arrived == nil {
		f.arrived = map[cluster.JobID]uint64{}
	}
	f.cycle++
	h := f.waitHalfLife
	arrive := func(j *cluster.Job) {
		_, known := f.arrived[j.ID]
		f.arrived[j.ID] = f.cycle
		if known {
			return
		}
		f.arrivals.Add(lv.Now, j.SubmitTime, float64(j.Spec.MilliGPUs())/cluster.MilliGPU)
		w := f.waits[j.Spec.Tenant]
		w.Arrivals += math.Exp2(-max(lv.Now.Sub(j.SubmitTime), 0).Seconds() / h.Seconds())
		f.waits[j.Spec.Tenant] = w
	}
	if !f.waitsAt.IsZero() {
		queued := map[string]int{}
		fresh := map[string]float64{} // decayed queued seconds of jobs submitted since the last cycle
		for i := range lv.Queued {
			j := &lv.Queued[i]
			t := j.Spec.Tenant
			if _, ok := f.waits[t]; !ok {
				f.waits[t] = executor.TenantWaits{}
			}
			switch {
			case !j.SubmitTime.After(f.waitsAt):
				queued[t]++
			case j.SubmitTime.Before(lv.Now):
				fresh[t] += decayedSeconds(j.SubmitTime, lv.Now, lv.Now, h)
			}
		}
		dt := lv.Now.Sub(f.waitsAt)
		for t, w := range f.waits {
			w = w.Advance(dt, h, queued[t])
			w.QueuedS += fresh[t]
			f.waits[t] = w
		}
	}
	for i := range lv.Queued {
		arrive(&lv.Queued[i])
	}
	for i := range lv.Active {
		arrive(&lv.Active[i])
	}
	for id, at := range f.arrived {
		if f.cycle-at > arrivedFor {
			delete(f.arrived, id)
		}
	}
	f.waitsAt = lv.Now
	return maps.Clone(f.waits)
}

// arrivedFor is how many cycles waitsNow keeps a job it no longer sees.
const arrivedFor = 10

// arrivalRate is the GPUs arriving per second lately (waitsNow counts the
// arrivals).
func (f *fairness) arrivalRate(now time.Time) float64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.arrivals.Rate(now)
}
