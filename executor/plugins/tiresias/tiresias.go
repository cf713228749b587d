package tiresias

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
)

// Name is the order's name.
const Name = "tiresias"

// Args configure the order.
type Args struct {
	// Thresholds are the attained GPU-time limits of the queues, ascending;
	// n thresholds make n+1 queues.
	Thresholds []time.Duration
	// PromoteKnob promotes a waiting job to the highest queue once its wait
	// reaches PromoteKnob times its last run; 0 turns promotion off.
	PromoteKnob float64
}

// DefaultArgs has two queues split at one GPU-hour and promotes a job that
// waited 8 times as long as it last ran.
func DefaultArgs() Args { return Args{Thresholds: []time.Duration{time.Hour}, PromoteKnob: 8} }

// Validate rejects empty or unordered thresholds.
func (a Args) Validate() error {
	if len(a.Thresholds) == 0 {
		return errors.New("tiresias: no queue thresholds")
	}
	for i, t := range a.Thresholds {
		if t <= 0 || (i > 0 && t <= a.Thresholds[i-1]) {
			return fmt.Errorf("tiresias: thresholds %v must be positive and ascending", a.Thresholds)
		}
	}
	if a.PromoteKnob < 0 || math.IsNaN(a.PromoteKnob) || math.IsInf(a.PromoteKnob, 0) {
		return fmt.Errorf("tiresias: promote knob %g must be finite and non-negative", a.PromoteKnob)
	}
	return nil
}

// Tiresias is the order.
type Tiresias struct{ args Args }

var (
	_ executor.QueueOrder   = (*Tiresias)(nil)
	_ executor.Waker        = (*Tiresias)(nil)
	_ executor.StaticOrder  = (*Tiresias)(nil)
	_ executor.SteppedOrder = (*Tiresias)(nil)
)

// New returns the order.
func New(a Args) (*Tiresias, error) {
	if err := a.Validate(); err != nil {
		return nil, err
	}
	return &Tiresias{args: Args{Thresholds: slices.Clone(a.Thresholds), PromoteKnob: a.PromoteKnob}}, nil
}

// Name implements executor.QueueOrder.
func (*Tiresias) Name() string { return Name }

// Queue is the queue a job with the given attained service is in.
func (t *Tiresias) Queue(attained time.Duration) int {
	q := 0
	for q < len(t.args.Thresholds) && attained >= t.args.Thresholds[q] {
		q++
	}
	return q
}

// Key implements executor.QueueOrder: the queue (the highest for a
// promoted job), then the submit time.
func (t *Tiresias) Key(v *executor.JobView, ctx *executor.OrderContext) executor.Key {
	q := t.Queue(v.AttainedGPU)
	if t.Promoted(v, ctx.Now) {
		q = 0
	}
	return executor.Key{float64(q), float64(v.Job.SubmitTime.Unix())}
}

// Promoted reports whether a waiting job has starved long enough to be
// promoted to the highest queue: it has run before and has waited, since it
// last stopped, PromoteKnob times as long as that run.
func (t *Tiresias) Promoted(v *executor.JobView, now time.Time) bool {
	if v.Job.State != cluster.StateQueued { // a running job is never promoted
		return false
	}
	at, ok := t.promoteAt(v)
	return ok && !now.Before(at)
}

// promoteAt is when a waiting job that has run before gets promoted.
func (t *Tiresias) promoteAt(v *executor.JobView) (time.Time, bool) {
	if t.args.PromoteKnob == 0 || v.LastRun <= 0 {
		return time.Time{}, false
	}
	return v.QueuedSince.Add(time.Duration(t.args.PromoteKnob * float64(v.LastRun))), true
}

// NextChange implements executor.Waker: when a running job's attained
// service reaches the next threshold, or a waiting job gets promoted.
func (t *Tiresias) NextChange(v *executor.JobView, running bool, now time.Time) time.Time {
	if !running {
		if at, ok := t.promoteAt(v); ok && at.After(now) && t.Queue(v.AttainedGPU) > 0 {
			return at
		}
		return time.Time{}
	}
	q := t.Queue(v.AttainedGPU)
	if q >= len(t.args.Thresholds) || v.Job.Spec.GPUs == 0 {
		return time.Time{}
	}
	left := t.args.Thresholds[q] - v.AttainedGPU
	return now.Add(left/time.Duration(v.Job.Spec.GPUs) + time.Second)
}

// StaticKeys implements executor.StaticOrder: without promotion a queued
// job's key does not change while it waits.
func (t *Tiresias) StaticKeys() bool { return t.args.PromoteKnob == 0 }

// SteppedKeys implements executor.SteppedOrder: a queued job's key changes
// only when it is promoted, at the time NextChange gives.
func (t *Tiresias) SteppedKeys() bool { return true }
