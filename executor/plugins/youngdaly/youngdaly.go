package youngdaly

import (
	"fmt"
	"math"
	"time"

	"github.com/prescient-sched/prescient/executor"
)

// Name is the timer's name.
const Name = "young-daly"

// Args bound the interval. Max is also the most progress one interruption
// can cost a job: a bound on lost work that Young/Daly itself does not give.
type Args struct {
	Min, Max time.Duration
}

// DefaultArgs: between 5 minutes and 24 hours.
func DefaultArgs() Args { return Args{Min: 5 * time.Minute, Max: 24 * time.Hour} }

// Validate rejects an empty range.
func (a Args) Validate() error {
	if a.Min <= 0 || a.Max < a.Min {
		return fmt.Errorf("young-daly: interval range %s..%s is empty or not positive", a.Min, a.Max)
	}
	return nil
}

// YoungDaly is the timer.
type YoungDaly struct{ args Args }

var _ executor.CheckpointTimer = (*YoungDaly)(nil)

// New returns the timer.
func New(a Args) (*YoungDaly, error) {
	if err := a.Validate(); err != nil {
		return nil, err
	}
	return &YoungDaly{args: a}, nil
}

// Name implements executor.CheckpointTimer.
func (*YoungDaly) Name() string { return Name }

// Interval implements executor.CheckpointTimer.
func (y *YoungDaly) Interval(v *executor.JobView, nodes int, in *executor.PlanInput) time.Duration {
	c := v.Job.Spec.CheckpointCost
	if !v.Job.Spec.Checkpointable || c <= 0 {
		return 0
	}
	perHour := in.PreemptionRate
	if in.NodeMTBF > 0 {
		perHour += float64(max(nodes, 1)) / in.NodeMTBF.Hours()
	}
	if perHour <= 0 {
		return 0
	}
	mtti := time.Duration(float64(time.Hour) / perHour)
	tau := time.Duration(math.Sqrt(2*c.Seconds()*mtti.Seconds()) * float64(time.Second))
	return min(max(tau, y.args.Min), y.args.Max)
}
