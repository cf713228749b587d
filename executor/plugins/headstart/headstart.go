package headstart

import "github.com/prescient-sched/prescient/executor"

// Name is the order's name.
const Name = "headstart"

// HeadStart is the order.
type HeadStart struct{}

var (
	_ executor.QueueOrder  = (*HeadStart)(nil)
	_ executor.StaticOrder = (*HeadStart)(nil)
)

// New returns the order.
func New() *HeadStart { return &HeadStart{} }

// Name implements executor.QueueOrder.
func (*HeadStart) Name() string { return Name }

// Key implements executor.QueueOrder: the submit time in Unix seconds
// plus the job's P90 remaining time in seconds.
func (*HeadStart) Key(v *executor.JobView, _ *executor.OrderContext) executor.Key {
	s := v.Job.SubmitTime
	return executor.Key{float64(s.Unix()) + float64(s.Nanosecond())/1e9 + v.RemainingP90().Seconds()}
}

// StaticKeys implements executor.StaticOrder: a queued job's remaining
// time does not change while it waits.
func (*HeadStart) StaticKeys() bool { return true }
