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
	b, err := p.baselineFor(ctx, DefaultWhatIfHorizon, p.d.QueueBudget)
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
	for _, o := range b.run.out {
		if queued[o.Job] {
			ahead[o.Job] = o
		}
	}
	var horizon time.Time
	if b.run.cut != "" {
		horizon = b.run.horizon
	}
	p.aheadMu.Lock()
	p.ahead, p.aheadHorizon = ahead, horizon
	p.aheadMu.Unlock()
	return nil
}

// Ahead is a queued job in the last queue forecast: its predicted Start
// and End (End zero when it ends after the forecast's horizon), or, when
// it does not start within the horizon, After, the horizon (Start and
// End zero).
type Ahead struct {
	Start, End, After time.Time
}

// QueuedAhead is a queued job in the last queue forecast; false when the
// forecast did not see it. A start (or horizon) that has passed without
// the job starting is now.
func (p *WhatIf) QueuedAhead(id cluster.JobID, now time.Time) (Ahead, bool) {
	p.aheadMu.Lock()
	o, ok := p.ahead[id]
	horizon := p.aheadHorizon
	p.aheadMu.Unlock()
	if !ok {
		return Ahead{}, false
	}
	if o.Start.IsZero() {
		if horizon.IsZero() {
			return Ahead{}, false // never started, and nothing cut the forecast short
		}
		return Ahead{After: later(horizon, now)}, true
	}
	a := Ahead{Start: o.Start, End: o.End}
	if a.Start.Before(now) {
		if !a.End.IsZero() {
			a.End = a.End.Add(now.Sub(a.Start))
		}
		a.Start = now
	}
	return a, true
}
