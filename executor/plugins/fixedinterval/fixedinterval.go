package fixedinterval

import (
	"fmt"
	"time"

	"github.com/prescient-sched/prescient/executor"
)

// Name is the timer's name.
const Name = "fixed"

// Args hold the interval.
type Args struct{ Every time.Duration }

// Validate rejects a non-positive interval.
func (a Args) Validate() error {
	if a.Every <= 0 {
		return fmt.Errorf("fixed checkpoint interval %s must be positive", a.Every)
	}
	return nil
}

// Fixed is the timer.
type Fixed struct{ args Args }

var _ executor.CheckpointTimer = (*Fixed)(nil)

// New returns the timer.
func New(a Args) (*Fixed, error) {
	if err := a.Validate(); err != nil {
		return nil, err
	}
	return &Fixed{args: a}, nil
}

// Name implements executor.CheckpointTimer.
func (*Fixed) Name() string { return Name }

// Interval implements executor.CheckpointTimer.
func (f *Fixed) Interval(v *executor.JobView, _ int, _ *executor.PlanInput) time.Duration {
	if !v.Job.Spec.Checkpointable {
		return 0
	}
	return f.args.Every
}
