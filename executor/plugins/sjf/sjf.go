package sjf

import "github.com/prescient-sched/prescient/executor"

// Name is the order's name.
const Name = "sjf"

// SJF is the order.
type SJF struct{}

var (
	_ executor.QueueOrder  = (*SJF)(nil)
	_ executor.StaticOrder = (*SJF)(nil)
)

// New returns the order.
func New() *SJF { return &SJF{} }

// Name implements executor.QueueOrder.
func (*SJF) Name() string { return Name }

// Key implements executor.QueueOrder.
func (*SJF) Key(v *executor.JobView, _ *executor.OrderContext) executor.Key {
	return executor.Key{v.Forecast.DurationP50.Seconds()}
}

// StaticKeys implements executor.StaticOrder: a queued job's key does not
// change while it waits.
func (*SJF) StaticKeys() bool { return true }
