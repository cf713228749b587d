package executor

import (
	"fmt"
	"slices"
	"time"
)

// An IndexedOrder keeps, for a caller that keeps its queue from cycle to
// cycle (the simulator), an index of the queued jobs from which a cycle
// takes them in order without keying every one: a cycle on a full fleet
// reads the queue's head, a few dozen of hundreds of jobs, while an order
// whose keys age with the clock would otherwise key the whole queue every
// cycle. The index must yield exactly the order and keys that keying every
// job would (Key, then submit time, then ID).
type IndexedOrder interface {
	PartedOrder
	// NewQueueIndex returns an empty index for one queue.
	NewQueueIndex() QueueIndex
}

// QueueIndex is an IndexedOrder's index of one queue (PlanInput.QueueIndex).
// Its caller adds a job once its forecast and progress are set for its
// wait, and removes it when it leaves the queue.
type QueueIndex interface {
	Add(v *JobView)
	Remove(v *JobView)
	Len() int
	// Rank fills r with sources of the queued jobs at ctx.Now (each job in
	// one source, every job's key at least its source's bound) and the
	// earliest time after ctx.Now that a queued job's key changes by the
	// clock alone (Ranking.SetNext). It returns false when it cannot (a key
	// would be NaN, or the clock went back): the cycle then keys every job.
	Rank(ctx *OrderContext, r *Ranking) bool
}

// RankSource is a run of queued jobs in an index, read during one cycle.
type RankSource interface {
	// Take takes the source's next job and its key, and says the bound of
	// the jobs after it: no later job's key sorts before it. more is false
	// when none is left.
	Take(ctx *OrderContext) (v *JobView, k Key, bound Key, more bool)
}

// Ranking merges an index's sources into the queue's order: a source is
// opened (its next job keyed) only when its bound does not sort after the
// best job keyed so far, so a cycle that stops early keys the jobs near the
// head and the sources' heads.
type Ranking struct {
	sources []rankSource // a min-heap by bound
	cands   []ranked     // a min-heap in the queue's order (before)
	left    int
	next    time.Time
	ctx     *OrderContext
}

type rankSource struct {
	bound Key
	src   RankSource
}

// Add puts a source of n jobs whose keys are at least bound.
func (r *Ranking) Add(bound Key, n int, s RankSource) {
	if n <= 0 {
		return
	}
	r.left += n
	r.sources = append(r.sources, rankSource{bound, s})
}

// SetNext sets the earliest time after now that a queued job's key changes
// (zero: never).
func (r *Ranking) SetNext(t time.Time) { r.next = t }

// reset empties r for a cycle, keeping its buffers.
func (r *Ranking) reset(ctx *OrderContext) {
	clear(r.sources)
	clear(r.cands)
	*r = Ranking{sources: r.sources[:0], cands: r.cands[:0], ctx: ctx}
}

// init heapifies the sources once Rank has added them.
func (r *Ranking) init() { heapInit(r.sources, sourceBefore) }

func (r *Ranking) len() int { return r.left }

// pop takes the first job in the queue's order. A source whose bound is at
// or before the best candidate may hold a job before it (a tie in key goes
// to the submit time), so it is opened first.
func (r *Ranking) pop() ranked {
	for len(r.sources) > 0 && (len(r.cands) == 0 || !r.cands[0].key.Less(r.sources[0].bound)) {
		s := &r.sources[0]
		v, k, bound, more := s.src.Take(r.ctx)
		r.pushCand(ranked{v: v, key: k})
		if more {
			s.bound = bound
			siftDown(r.sources, 0, sourceBefore)
		} else {
			_, r.sources = heapPop(r.sources, sourceBefore)
		}
	}
	var top ranked
	top, r.cands = heapPop(r.cands, before)
	r.left--
	return top
}

func sourceBefore(a, b *rankSource) bool { return a.bound.Less(b.bound) }

func (r *Ranking) pushCand(c ranked) { r.cands = heapPush(r.cands, c, before) }

// heapInit orders h into a min-heap by less.
func heapInit[T any](h []T, less func(a, b *T) bool) {
	for i := len(h)/2 - 1; i >= 0; i-- {
		siftDown(h, i, less)
	}
}

// heapPush adds x to the min-heap h (by less).
func heapPush[T any](h []T, x T, less func(a, b *T) bool) []T {
	h = append(h, x)
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if !less(&h[i], &h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
	return h
}

// heapPop takes the first of the min-heap h (by less) out, clearing the
// slot it frees so that the array holds no stale pointer.
func heapPop[T any](h []T, less func(a, b *T) bool) (T, []T) {
	top, last := h[0], len(h)-1
	h[0] = h[last]
	var zero T
	h[last] = zero
	h = h[:last]
	siftDown(h, 0, less)
	return top, h
}

// siftDown moves h[i] down the min-heap h (by less) to its place.
func siftDown[T any](h []T, i int, less func(a, b *T) bool) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if x := l + 1; x < len(h) && less(&h[x], &h[l]) {
			m = x
		}
		if !less(&h[m], &h[i]) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

// CheckIndex reports the first job that ix, ranked at in.Now, gives out
// of the order or with another key than keying every job of in.Queue
// does, or a different next change. An index that declines to rank passes.
func CheckIndex(order QueueOrder, ix QueueIndex, in *PlanInput) error {
	if ix.Len() != len(in.Queue) {
		return fmt.Errorf("queue index holds %d jobs, the queue %d", ix.Len(), len(in.Queue))
	}
	var r Ranking
	r.reset(&OrderContext{Now: in.Now, in: in})
	if !ix.Rank(r.ctx, &r) {
		return nil
	}
	if r.len() != len(in.Queue) {
		return fmt.Errorf("queue index ranks %d jobs of %d", r.len(), len(in.Queue))
	}
	r.init()
	ctx := &OrderContext{Now: in.Now, in: in}
	want := make([]ranked, len(in.Queue))
	var next time.Time
	w, wakes := order.(Waker)
	for i, v := range in.Queue {
		want[i] = ranked{v: v, key: order.Key(v, ctx)}
		if wakes {
			if t := w.NextChange(v, false, in.Now); t.After(in.Now) && (next.IsZero() || t.Before(next)) {
				next = t
			}
		}
	}
	slices.SortFunc(want, func(a, b ranked) int {
		if before(&a, &b) {
			return -1
		}
		return 1
	})
	for i := range want {
		got := r.pop()
		if got.v != want[i].v || !sameKey(got.key, want[i].key) {
			return fmt.Errorf("queue index gives %s (key %v) at %d, keying every job %s (key %v)", got.v.Job.ID, got.key, i, want[i].v.Job.ID, want[i].key)
		}
	}
	if wakes && !r.next.Equal(next) {
		return fmt.Errorf("queue index says keys next change at %s, the jobs at %s", r.next, next)
	}
	return nil
}
