package srtf

import "github.com/prescient-sched/prescient/executor"

// Name is the order's name.
const Name = "srtf"

// SRTF is the order.
type SRTF struct{}

var (
	_ executor.QueueOrder  = (*SRTF)(nil)
	_ executor.StaticOrder = (*SRTF)(nil)
)

// New returns the order.
func New() *SRTF { return &SRTF{} }

// Name implements executor.QueueOrder.
func (*SRTF) Name() string { return Name }

// Key implements executor.QueueOrder.
func (*SRTF) Key(v *executor.JobView, _ *executor.OrderContext) executor.Key {
	return executor.Key{v.RemainingP50().Seconds()}
}

// StaticKeys implements executor.StaticOrder: a queued job's key does not
// change while it waits.
func (*SRTF) StaticKeys() bool { return true }
