package tiresias

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/prescient-sched/prescient/executor"
)

// Name is the order's name.
const Name = "tiresias"

// Args configure the order.
type Args struct {
	// Thresholds are the attained GPU-time limits of the queues, ascending;
	// n thresholds make n+1 queues.
	Thresholds []time.Duration
}

// DefaultArgs has two queues split at one GPU-hour.
func DefaultArgs() Args { return Args{Thresholds: []time.Duration{time.Hour}} }

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
	return nil
}

// Tiresias is the order.
type Tiresias struct{ args Args }

var (
	_ executor.QueueOrder  = (*Tiresias)(nil)
	_ executor.Waker       = (*Tiresias)(nil)
	_ executor.StaticOrder = (*Tiresias)(nil)
)

// New returns the order.
func New(a Args) (*Tiresias, error) {
	if err := a.Validate(); err != nil {
		return nil, err
	}
	return &Tiresias{args: Args{Thresholds: slices.Clone(a.Thresholds)}}, nil
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

// Key implements executor.QueueOrder: the queue, then the submit time.
func (t *Tiresias) Key(v *executor.JobView, _ *executor.OrderContext) executor.Key {
	return executor.Key{float64(t.Queue(v.AttainedGPU)), float64(v.Job.SubmitTime.Unix())}
}

// NextChange implements executor.Waker: when a running job's attained
// service reaches the next threshold.
func (t *Tiresias) NextChange(v *executor.JobView, running bool, now time.Time) time.Time {
	q := t.Queue(v.AttainedGPU)
	if !running || q >= len(t.args.Thresholds) || v.Job.Spec.GPUs == 0 {
		return time.Time{}
	}
	left := t.args.Thresholds[q] - v.AttainedGPU
	return now.Add(left/time.Duration(v.Job.Spec.GPUs) + time.Second)
}

// StaticKeys implements executor.StaticOrder: a queued job's key does not
// change while it waits.
func (*Tiresias) StaticKeys() bool { return true }
