package whatif

import (
	"context"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor/sim"
)

// DefaultQueueForecastEvery is how often the queue is simulated forward
// unless told.
const DefaultQueueForecastEvery = time.Minute

// ForecastQueue starts, at the first tick QueueForecastEvery after the
// last and one at a time, a simulation of the live state forward (the
// what-if baseline, shared with the what-if requests of the moment) whose
// outcomes are each queued job's predicted start and end in its status.
// It runs beside the plan loop; Run waits for it before it returns.
func (p *WhatIf) ForecastQueue(ctx context.Context) {
	if p.d.QueueEvery < 0 {
		return
	}
	if !p.queue.Due(p.d.Clock(), p.d.QueueEvery) {
		return
	}
	p.queue.Go(func() { // the plan loop's context
		if err := p.RefreshQueue(ctx); err != nil && ctx.Err() == nil {
			p.d.Log.Warn("queue forecast failed; queued jobs keep the last one", "error", err)
		}
	})
}

// RefreshQueue simulates the queue forward now and keeps the
// outcomes of the jobs that were queued.
func (p *WhatIf) RefreshQueue(ctx context.Context) error {
	b, err := p.baselineFor(ctx, DefaultWhatIfHorizon)
	if err != nil {
		return err
	}
	defer p.release(b)
	select {
	case <-b.done:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	if b.err != nil {
		return b.err
	}
	queued := map[cluster.JobID]bool{}
	for _, j := range b.scen.queued {
		queued[j.ID] = true
	}
	ahead := make(map[cluster.JobID]sim.JobOutcome, len(queued))
	for _, o := range b.out {
		if queued[o.Job] {
			ahead[o.Job] = o
		}
	}
	p.aheadMu.Lock()
	p.ahead = ahead
	p.aheadMu.Unlock()
	return nil
}

// QueuedAhead is a queued job's predicted start and end from the last
// queue forecast; a start that has passed without the job starting is
// now.
func (p *WhatIf) QueuedAhead(id cluster.JobID, now time.Time) (start, end time.Time, ok bool) {
	p.aheadMu.Lock()
	o, ok := p.ahead[id]
	p.aheadMu.Unlock()
	if !ok || o.Start.IsZero() {
		return time.Time{}, time.Time{}, false
	}
	start, end = o.Start, o.End // End is zero when it does not end within the horizon
	if start.Before(now) {
		if !end.IsZero() {
			end = end.Add(now.Sub(start))
		}
		start = now
	}
	return start, end, true
}
