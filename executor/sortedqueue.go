package executor

import (
	"container/heap"
	"fmt"
	"slices"
	"sort"
	"time"
)

// StaticOrder is implemented by queue orders whose keys for a queued job do
// not change while it waits (they may change while it runs): FIFO, SJF,
// SRTF, Tiresias without promotion. For them a caller can keep the queue
// sorted as jobs come and go (SortedQueue) and the planner need not order
// it every cycle.
type StaticOrder interface {
	StaticKeys() bool
}

// A SteppedOrder's key of a queued job changes only at the times its
// NextChange gives and stays the same in between: Tiresias's, whose waiting
// job moves to the first queue when it is promoted. A caller can keep its
// queue sorted as a static order's, keying a job again when its time comes
// (SortedQueue.Advance).
type SteppedOrder interface {
	Waker
	SteppedKeys() bool
}

// IsStepped reports whether an order's keys are stepped.
func IsStepped(o QueueOrder) bool {
	s, ok := o.(SteppedOrder)
	return ok && s.SteppedKeys()
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

// A RunningPartedOrder keys running jobs as a PartedOrder keys queued
// ones: from a part that stays while the job runs (its spec and forecast)
// and what moves (its progress, the clock, fair shares). A caller that
// keeps its running jobs from cycle to cycle keeps each one's part
// (PlanInput.RunningParts), so that a cycle ranking them for victims reads
// less of each. KeyRunning(v, RunningPart(v), ctx) must be Key(v, ctx) for
// as long as the job runs.
type RunningPartedOrder interface {
	QueueOrder
	RunningPart(v *JobView) any
	KeyRunning(v *JobView, part any, ctx *OrderContext) Key
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

// SortedQueue keeps queued jobs in a static or stepped order's sequence:
// Add and Remove are a binary search and a slice move, and for a stepped
// order Advance keys again the jobs whose keys changed. Its Jobs go into
// PlanInput.Queue with PlanInput.QueueSorted set (when Total), its Keys
// into QueueKeys and, for a stepped order, Next into QueueNext.
type SortedQueue struct {
	order QueueOrder
	jobs  []*JobView // in order
	keys  []Key      // keys[i] is jobs[i]'s
	nan   int        // jobs whose key has a NaN
	// For a stepped order: each job's key and next change, and the
	// changes to come, soonest first (a job's entry is stale once its next
	// change moved or it left).
	waker   Waker
	keyed   map[*JobView]keyed
	changes []change
}

type keyed struct {
	key  Key
	next time.Time
}

type change struct {
	at time.Time
	v  *JobView
}

// NewSortedQueue returns an empty queue for a static or stepped order.
func NewSortedQueue(o QueueOrder) (*SortedQueue, bool) {
	switch {
	case IsStatic(o):
		return &SortedQueue{order: o}, true
	case IsStepped(o):
		return &SortedQueue{order: o, waker: o.(Waker), keyed: map[*JobView]keyed{}}, true
	}
	return nil, false
}

// Len is the number of jobs queued.
func (q *SortedQueue) Len() int { return len(q.jobs) }

// Jobs returns the jobs in order. The slice belongs to q and changes with
// the next Add, Remove or Advance.
func (q *SortedQueue) Jobs() []*JobView { return q.jobs }

// Keys returns the jobs' keys, Keys()[i] of Jobs()[i], as of the last Add
// or Advance. The slice belongs to q as Jobs' does.
func (q *SortedQueue) Keys() []Key { return q.keys }

// Total reports whether no key is NaN, so that the order is total.
func (q *SortedQueue) Total() bool { return q.nan == 0 }

// Add queues a job; its key is computed now.
func (q *SortedQueue) Add(v *JobView, now time.Time) {
	r := ranked{v: v, key: q.order.Key(v, &OrderContext{Now: now})}
	i := q.search(&r)
	q.jobs = slices.Insert(q.jobs, i, v)
	q.keys = slices.Insert(q.keys, i, r.key)
	if r.key.hasNaN() {
		q.nan++
	}
	if q.waker != nil {
		next := q.waker.NextChange(v, false, now)
		q.keyed[v] = keyed{key: r.key, next: next}
		if next.After(now) {
			heap.Push((*changes)(&q.changes), change{at: next, v: v})
		}
	}
}

// Remove takes a job out; it reports whether the job was there.
func (q *SortedQueue) Remove(v *JobView) bool {
	var k Key
	if q.waker != nil {
		kd, ok := q.keyed[v]
		if !ok {
			return false
		}
		k = kd.key
	} else {
		k = q.order.Key(v, &OrderContext{}) // static, so as when it was added
	}
	i := q.search(&ranked{v: v, key: k})
	if i >= len(q.jobs) || q.jobs[i] != v {
		return false
	}
	q.jobs = slices.Delete(q.jobs, i, i+1)
	q.keys = slices.Delete(q.keys, i, i+1)
	if k.hasNaN() {
		q.nan--
	}
	delete(q.keyed, v)
	return true
}

// Advance keys again, at now, the jobs of a stepped order whose keys have
// changed by now. A static order's never change.
func (q *SortedQueue) Advance(now time.Time) {
	for len(q.changes) > 0 && !q.changes[0].at.After(now) {
		c := heap.Pop((*changes)(&q.changes)).(change)
		if kd, ok := q.keyed[c.v]; ok && kd.next.Equal(c.at) {
			q.Remove(c.v)
			q.Add(c.v, now)
		}
	}
}

// Next is the earliest time after the last Advance at which a queued job's
// key changes; zero if none will.
func (q *SortedQueue) Next() time.Time {
	for len(q.changes) > 0 {
		c := q.changes[0]
		if kd, ok := q.keyed[c.v]; ok && kd.next.Equal(c.at) {
			return c.at
		}
		heap.Pop((*changes)(&q.changes))
	}
	return time.Time{}
}

// Check reports the first job whose kept key is not its key at now, or
// that is out of order; call it after Advance(now).
func (q *SortedQueue) Check(now time.Time) error {
	ctx := &OrderContext{Now: now}
	if len(q.keys) != len(q.jobs) {
		return fmt.Errorf("%d keys kept for %d jobs", len(q.keys), len(q.jobs))
	}
	for i, v := range q.jobs {
		if k := q.order.Key(v, ctx); !sameKey(k, q.keys[i]) {
			return fmt.Errorf("job %s kept with key %v, its key %v", v.Job.ID, q.keys[i], k)
		}
		if i > 0 && before(q.at(i), q.at(i-1)) {
			return fmt.Errorf("job %s (key %v) kept after %s (key %v)", v.Job.ID, q.keys[i], q.jobs[i-1].Job.ID, q.keys[i-1])
		}
	}
	return nil
}

// sameKey is k == o, a NaN equal to a NaN.
func sameKey(k, o Key) bool {
	for i := range k {
		if k[i] != o[i] && (k[i] == k[i] || o[i] == o[i]) {
			return false
		}
	}
	return true
}

// changes is a min-heap of key changes by time.
type changes []change

func (h changes) Len() int           { return len(h) }
func (h changes) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h changes) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *changes) Push(x any)        { *h = append(*h, x.(change)) }
func (h *changes) Pop() any {
	old := *h
	c := old[len(old)-1]
	*h = old[:len(old)-1]
	return c
}

// at is the i-th job with its key.
func (q *SortedQueue) at(i int) *ranked { return &ranked{v: q.jobs[i], key: q.keys[i]} }

// search is the first index whose job does not come before r.
func (q *SortedQueue) search(r *ranked) int {
	return sort.Search(len(q.jobs), func(i int) bool { return !before(q.at(i), r) })
}

// CheckRunningParts reports the first running job of in whose key from its
// kept part (in.RunningParts) is not its key, for a RunningPartedOrder.
func CheckRunningParts(order QueueOrder, in *PlanInput) error {
	ro, ok := order.(RunningPartedOrder)
	if !ok {
		return nil
	}
	if len(in.RunningParts) != len(in.Running) {
		return fmt.Errorf("%d running parts kept for %d running jobs", len(in.RunningParts), len(in.Running))
	}
	ctx := &OrderContext{Now: in.Now, in: in}
	for i, r := range in.Running {
		if k, want := ro.KeyRunning(&r.JobView, in.RunningParts[i], ctx), order.Key(&r.JobView, ctx); !sameKey(k, want) {
			return fmt.Errorf("running job %s: key %v from its kept part, %v from the job", r.Job.ID, k, want)
		}
	}
	return nil
}
