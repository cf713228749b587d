package prescient

import (
	"container/heap"
	"math"
	"slices"
	"time"

	"github.com/prescient-sched/prescient/executor"
)

var _ executor.IndexedOrder = (*Order)(nil)

// NewQueueIndex implements executor.IndexedOrder. The index files each
// queued job by its state under Key:
//
//   - urgent and starving jobs, whose keys no longer change, in one run
//     sorted by key;
//   - the others in buckets by tier, tenant and when they were queued
//     (slots of AgingHorizon/16), each sorted by Gittins length. A job's
//     key in a bucket is its length times its tenant's weight divided by
//     its age, so the bucket's oldest possible age bounds every key in it
//     from below within 1/16 of the aging horizon's worth of age; a cycle
//     keys a bucket's jobs only as far as the queue's head reaches.
//
// A job moves from its bucket to the run when it starves or turns urgent,
// at times fixed when it is queued.
func (o *Order) NewQueueIndex() executor.QueueIndex {
	width := int64(max(o.args.AgingHorizon/16, time.Second) / time.Second)
	return &index{o: o, width: width, items: map[*executor.JobView]*item{}, buckets: map[bucketKey]*bucket{}}
}

// index is the order's executor.QueueIndex.
type index struct {
	o       *Order
	width   int64 // a bucket's slot of queued times, in seconds
	items   map[*executor.JobView]*item
	buckets map[bucketKey]*bucket
	live    []*bucket // the buckets with jobs, each at its at
	fixed   fixedRun  // urgent and starving jobs, by key
	moves   timeHeap  // when a job's state next changes
	wakes   timeHeap  // when a job's key changes (part.changes), as the planner wakes for it
	now     time.Time // the clock the states are at: the last Rank's
	odd     int       // odd items
}

// item is one queued job in the index.
type item struct {
	v     *executor.JobView
	p     part
	state state
	b     *bucket
	seq   uint32 // counts the item's changes: older heap entries are stale
	gone  bool
	odd   bool // its length is not finite: filed nowhere, and Rank declines
}

type state uint8

const (
	bucketed state = iota // ages (or, not queued, keeps its length)
	starving
	urgent
)

type bucketKey struct {
	tier   float64
	tenant int32
	slot   int64 // queued in [slot·width, (slot+1)·width) seconds; staticSlot: not queued, does not age
}

// staticSlot is the slot of jobs that do not age (their state is not
// queued).
const staticSlot = math.MinInt64

// bucket holds jobs of one tier and tenant queued in one slot, by length.
type bucket struct {
	o     *Order
	key   bucketKey
	name  string
	items []*item
	at    int // its place in index.live
	// For the cycle under way: the tenant's weight, the oldest age in the
	// slot, and the next job to take.
	w      tenantWeight
	ageMax float64
	pos    int
}

func (ix *index) Len() int { return len(ix.items) }

// Add implements executor.QueueIndex.
func (ix *index) Add(v *executor.JobView) {
	ix.Remove(v) // a job added again is filed anew
	it := &item{v: v, p: ix.o.part(v, ix.o.tenantID(v.Job.Spec.Tenant), true)}
	ix.items[v] = it
	if it.odd = math.IsNaN(it.p.length) || math.IsInf(it.p.length, 0); it.odd {
		ix.odd++
		return
	}
	ix.file(it)
	urgent, starve := it.p.changes()
	if !urgent.IsZero() {
		heap.Push(&ix.wakes, timed{urgent, it, 0})
	}
	heap.Push(&ix.wakes, timed{starve, it, 0})
}

// Remove implements executor.QueueIndex.
func (ix *index) Remove(v *executor.JobView) {
	it, ok := ix.items[v]
	if !ok {
		return
	}
	delete(ix.items, v)
	it.gone = true
	it.seq++
	if it.odd {
		ix.odd--
		return
	}
	ix.unfile(it)
}

// file puts it where its state at ix.now says and schedules its next
// move.
func (ix *index) file(it *item) {
	it.state = ix.o.stateOf(&it.p, ix.now)
	if it.state == bucketed {
		ix.bucketOf(it).insert(it)
	} else {
		ix.fixed.insert(it, it.p.fixedKey(it.state))
	}
	if t, ok := it.p.move(it.state); ok {
		heap.Push(&ix.moves, timed{t, it, it.seq})
	}
}

// unfile takes it out of its bucket or the run.
func (ix *index) unfile(it *item) {
	if it.state != bucketed {
		ix.fixed.remove(it)
		return
	}
	b := it.b
	b.remove(it)
	it.b = nil
	if len(b.items) == 0 {
		last := ix.live[len(ix.live)-1]
		ix.live[b.at], last.at = last, b.at
		ix.live = ix.live[:len(ix.live)-1]
		delete(ix.buckets, b.key)
	}
}

// bucketOf is its bucket, made for the first job in it.
func (ix *index) bucketOf(it *item) *bucket {
	k := bucketKey{tier: it.p.tier, tenant: it.p.tenant, slot: staticSlot}
	if it.p.queued {
		k.slot = floorDiv(it.p.since.Unix(), ix.width)
	}
	b, ok := ix.buckets[k]
	if !ok {
		b = &bucket{o: ix.o, key: k, name: it.p.name, at: len(ix.live)}
		ix.buckets[k] = b
		ix.live = append(ix.live, b)
	}
	it.b = b
	return b
}

// Rank implements executor.QueueIndex.
func (ix *index) Rank(ctx *executor.OrderContext, r *executor.Ranking) bool {
	now := ctx.Now
	if ix.odd > 0 || now.Before(ix.now) {
		return false
	}
	ix.now = now
	for len(ix.moves) > 0 && !ix.moves[0].at.After(now) {
		m := heap.Pop(&ix.moves).(timed)
		if it := m.it; !it.gone && it.seq == m.seq {
			ix.unfile(it)
			it.seq++
			ix.file(it)
		}
	}
	for len(ix.wakes) > 0 && (!ix.wakes[0].at.After(now) || ix.wakes[0].it.gone) {
		heap.Pop(&ix.wakes)
	}
	if len(ix.wakes) > 0 {
		r.SetNext(ix.wakes[0].at)
	}
	hs := ix.o.args.AgingHorizon.Seconds()
	for _, b := range ix.live {
		b.w, b.pos, b.ageMax = ix.o.tenantOf(b.key.tenant, b.name, ctx), 0, 1
		if math.IsNaN(b.w.fair) || math.IsInf(b.w.fair, 0) {
			return false
		}
		if b.key.slot != staticSlot {
			b.ageMax = 1 + max(now.Sub(time.Unix(b.key.slot*ix.width, 0)), 0).Seconds()/hs
		}
		r.Add(b.bound(0), len(b.items), b)
	}
	if len(ix.fixed.items) > 0 {
		ix.fixed.pos = 0
		r.Add(ix.fixed.keys[0], len(ix.fixed.items), &ix.fixed)
	}
	return true
}

// bound is a lower bound of the keys of the bucket's jobs from the i-th on
// (sorted by length): the i-th's length at the slot's oldest age. As keyOf
// computes it, length × weight ÷ age, which is no less at a younger age
// (for a negative product, no less than the product at age 1).
func (b *bucket) bound(i int) executor.Key {
	x := b.items[i].p.length * b.w.fair
	if x >= 0 && b.key.slot != staticSlot {
		x /= b.ageMax
	}
	return executor.Key{b.key.tier, b.w.class, x}
}

// Take implements executor.RankSource.
func (b *bucket) Take(ctx *executor.OrderContext) (*executor.JobView, executor.Key, executor.Key, bool) {
	it := b.items[b.pos]
	b.pos++
	k := b.o.weighed(&it.p, b.w, ctx.Now)
	if b.pos < len(b.items) {
		return it.v, k, b.bound(b.pos), true
	}
	return it.v, k, executor.Key{}, false
}

func (b *bucket) insert(it *item) {
	b.items = slices.Insert(b.items, b.search(it.p.length), it)
}

func (b *bucket) remove(it *item) {
	for i := b.search(it.p.length); i < len(b.items); i++ {
		if b.items[i] == it {
			b.items = slices.Delete(b.items, i, i+1)
			return
		}
	}
}

// search is the first place whose job is not shorter than length.
func (b *bucket) search(length float64) int {
	i, _ := slices.BinarySearchFunc(b.items, length, func(x *item, l float64) int {
		if x.p.length < l {
			return -1
		}
		return 1
	})
	return i
}

// fixedRun holds the urgent and starving jobs sorted by their keys, which
// stay while they are in it.
type fixedRun struct {
	items []*item
	keys  []executor.Key
	pos   int
}

func (f *fixedRun) search(k executor.Key) int {
	i, _ := slices.BinarySearchFunc(f.keys, k, func(x, k executor.Key) int {
		if x.Less(k) {
			return -1
		}
		return 1
	})
	return i
}

func (f *fixedRun) insert(it *item, k executor.Key) {
	i := f.search(k)
	f.items = slices.Insert(f.items, i, it)
	f.keys = slices.Insert(f.keys, i, k)
}

func (f *fixedRun) remove(it *item) {
	for i := f.search(it.p.fixedKey(it.state)); i < len(f.items); i++ {
		if f.items[i] == it {
			f.items = slices.Delete(f.items, i, i+1)
			f.keys = slices.Delete(f.keys, i, i+1)
			return
		}
	}
}

// Take implements executor.RankSource.
func (f *fixedRun) Take(*executor.OrderContext) (*executor.JobView, executor.Key, executor.Key, bool) {
	i := f.pos
	f.pos++
	if f.pos < len(f.items) {
		return f.items[i].v, f.keys[i], f.keys[f.pos], true
	}
	return f.items[i].v, f.keys[i], executor.Key{}, false
}

// move is when a job in state s next changes state: it turns urgent, or
// (queued) starves.
func (p *part) move(s state) (time.Time, bool) {
	switch {
	case s == urgent:
		return time.Time{}, false
	case s == starving || !p.queued:
		return p.urgent, p.deadline
	case p.deadline && p.urgent.Before(p.starve):
		return p.urgent, true
	}
	return p.starve, true
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// timed is a time in one of the index's heaps, for an item at its seq.
type timed struct {
	at  time.Time
	it  *item
	seq uint32
}

type timeHeap []timed

func (h timeHeap) Len() int           { return len(h) }
func (h timeHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h timeHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timeHeap) Push(x any)        { *h = append(*h, x.(timed)) }
func (h *timeHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = timed{}
	*h = old[:len(old)-1]
	return t
}
