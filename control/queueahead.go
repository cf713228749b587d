package control

import (
	"context"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor/sim"
)

// DefaultQueueForecastEvery is how often the queue is simulated forward
// when Config.QueueForecastEvery is zero.
const DefaultQueueForecastEvery = time.Minute

// forecastQueue starts, at the first tick QueueForecastEvery after the
// last and one at a time, a simulation of the live state forward (the
// what-if baseline, shared with the what-if requests of the moment) whose
// outcomes are each queued job's predicted start and end in its status.
// It runs beside the plan loop; Run waits for it before it returns.
func (p *Plane) forecastQueue(ctx context.Context) {
	if p.cfg.QueueForecastEvery < 0 {
		return
	}
	now := p.cfg.Clock()
	p.mu.Lock()
	due := !p.queueForecasting && (p.queueAheadAt.IsZero() || now.Sub(p.queueAheadAt) >= p.cfg.QueueForecastEvery)
	if due {
		p.queueForecasting, p.queueAheadAt = true, now
	}
	p.mu.Unlock()
	if !due {
		return
	}
	p.beside(&p.queueForecasting, func() { // the plan loop's context
		if err := p.refreshQueueAhead(ctx); err != nil && ctx.Err() == nil {
			p.log.Warn("queue forecast failed; queued jobs keep the last one", "error", err)
		}
	})
}

// refreshQueueAhead simulates the queue forward now and keeps the
// outcomes of the jobs that were queued.
func (p *Plane) refreshQueueAhead(ctx context.Context) error {
	b, err := p.whatIfBaseline(ctx, DefaultWhatIfHorizon)
	if err != nil {
		return err
	}
	defer p.releaseBaseline(b)
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
	p.mu.Lock()
	p.queueAhead = ahead
	p.mu.Unlock()
	return nil
}

// queuedAhead is a queued job's predicted start and end from the last
// queue forecast; a start that has passed without the job starting is
// now.
func (p *Plane) queuedAhead(id cluster.JobID, now time.Time) (start, end time.Time, ok bool) {
	p.mu.Lock()
	o, ok := p.queueAhead[id]
	p.mu.Unlock()
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
