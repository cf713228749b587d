package executor

import (
	"fmt"
	"slices"
	"time"
)

// StaticOrder is implemented by queue orders whose keys for a queued job do
// not change while it waits (they may change while it runs): FIFO, SJF,
// SRTF, Tiresias. For them a caller can keep the queue sorted as jobs come
// and go (SortedQueue) and the planner need not order it every cycle.
type StaticOrder interface {
	StaticKeys() bool
}

// A PartedOrder's key of a queued job is computed from a part that does not
// change while the job waits (it depends on the job, its forecast and its
// progress, which stay while it waits) and from what does (the clock, fair
// shares). A caller that keeps the queue from cycle to cycle keeps each
// job's part (NewQueuedPart, PlanInput.QueueParts), so that a cycle reads
// one small record per job, not the job, and computes nothing twice.
// KeyFrom(v, QueuedPart(v), ctx) must be Key(v, ctx) and, for a Waker, its
// time NextChange(v, false, ctx.Now).
type PartedOrder interface {
	QueueOrder
	// QueuedPart is the order's own part of a queued job, handed back to
	// KeyFrom as it was.
	QueuedPart(v *JobView) any
	// KeyFrom is the key of the queued job v from its part (nil: computed
	// now), and when it next changes by the clock alone (zero: never, or
	// the order is no Waker).
	KeyFrom(v *JobView, part any, ctx *OrderContext) (Key, time.Time)
}

// QueuedPart is what a cycle reads of a queued job that its caller keeps
// (PlanInput.QueueParts): the job's submit time, the queue's tie-break,
// and its PartedOrder's part.
type QueuedPart struct {
	submit submitTime
	order  any
}

// String shows the part, the order's own as it formats.
func (p QueuedPart) String() string {
	return fmt.Sprintf("{submitted %s, %+v}", time.Unix(p.submit.sec, int64(p.submit.nsec)).UTC().Format(time.RFC3339Nano), p.order)
}

// NewQueuedPart is the part of the queued job v for the order o, computed
// once the job's forecast and progress are set for its wait.
func NewQueuedPart(o PartedOrder, v *JobView) QueuedPart {
	return QueuedPart{submit: submitOf(v.Job.SubmitTime), order: o.QueuedPart(v)}
}

// IsStatic reports whether an order's keys are static.
func IsStatic(o QueueOrder) bool {
	s, ok := o.(StaticOrder)
	return ok && s.StaticKeys()
}

// SortedQueue keeps queued jobs in a static order's sequence: Add and
// Remove are a binary search and a slice move. Its Jobs go into
// PlanInput.Queue with PlanInput.QueueSorted set.
type SortedQueue struct {
	order QueueOrder
	items []ranked
	jobs  []*JobView
}

// NewSortedQueue returns an empty queue for a static order.
func NewSortedQueue(o QueueOrder) (*SortedQueue, bool) {
	if !IsStatic(o) {
		return nil, false
	}
	return &SortedQueue{order: o}, true
}

// Len is the number of jobs queued.
func (q *SortedQueue) Len() int { return len(q.items) }

// Jobs returns the jobs in order. The slice belongs to q and changes with
// the next Add or Remove.
func (q *SortedQueue) Jobs() []*JobView { return q.jobs }

// Add queues a job; its key is computed now.
func (q *SortedQueue) Add(v *JobView, now time.Time) {
	r := ranked{v: v, key: q.order.Key(v, &OrderContext{Now: now})}
	i := q.search(&r)
	q.items = slices.Insert(q.items, i, r)
	q.jobs = slices.Insert(q.jobs, i, v)
}

// Remove takes a job out; it reports whether the job was there.
func (q *SortedQueue) Remove(v *JobView) bool {
	i := q.search(&ranked{v: v, key: q.keyOf(v)})
	if i >= len(q.items) || q.items[i].v != v {
		return false
	}
	q.items = slices.Delete(q.items, i, i+1)
	q.jobs = slices.Delete(q.jobs, i, i+1)
	return true
}

// keyOf recomputes a queued job's key (static, so as when it was added).
func (q *SortedQueue) keyOf(v *JobView) Key { return q.order.Key(v, &OrderContext{}) }

// search is the first index whose item does not come before r.
func (q *SortedQueue) search(r *ranked) int {
	i, _ := slices.BinarySearchFunc(q.items, r, func(it ranked, t *ranked) int {
		if before(&it, t) {
			return -1
		}
		return 1
	})
	return i
}
