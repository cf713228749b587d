package fifo

import "github.com/prescient-sched/prescient/executor"

// Name is the order's name.
const Name = "fifo"

// FIFO is the order.
type FIFO struct{}

var (
	_ executor.QueueOrder  = (*FIFO)(nil)
	_ executor.StaticOrder = (*FIFO)(nil)
)

// New returns the order.
func New() *FIFO { return &FIFO{} }

// Name implements executor.QueueOrder.
func (*FIFO) Name() string { return Name }

// Key implements executor.QueueOrder: every key ties, so the planner's
// tie-break (submit time, then ID) decides.
func (*FIFO) Key(*executor.JobView, *executor.OrderContext) executor.Key { return executor.Key{} }

// StaticKeys implements executor.StaticOrder: a queued job's key does not
// change while it waits.
func (*FIFO) StaticKeys() bool { return true }
