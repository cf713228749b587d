package executor

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/prescient-sched/prescient/cluster"
)

// Limits bound the work of one planning cycle.
type Limits struct {
	// PreemptionAttempts is how many blocked jobs may look for victims.
	PreemptionAttempts int
	// VictimsPerJob is how many running jobs one job may displace.
	VictimsPerJob int
	// Explained is how many waiting jobs get a reason in the plan.
	Explained int
	// BackfillDepth is how many jobs are considered for backfill after the
	// first reservation (Slurm's bf_max_job_test).
	BackfillDepth int
}

// DefaultLimits are the limits New uses.
func DefaultLimits() Limits {
	return Limits{PreemptionAttempts: 16, VictimsPerJob: 16, Explained: 16, BackfillDepth: 1000}
}

// Framework is the Planner: it runs a Policy's plugins in a fixed sequence
// of steps. It keeps no state between calls.
type Framework struct {
	policy Policy
	limits Limits
	logger *slog.Logger
	// buffers recycles the per-cycle queue heap, rankings the merges of a
	// queue index, candidates the arrays of the running jobs a cycle ranks,
	// capacities a cycle's clones of the free capacity, ends the list of
	// expected ends its reservations walk, shares the map of its tenants'
	// fair shares; none holds state that outlives a call.
	buffers, rankings, candidates, capacities, ends, shares sync.Pool
}

var _ Planner = (*Framework)(nil)

// Option configures a Framework.
type Option func(*Framework)

// WithLogger sets the logger (default: slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(f *Framework) { f.logger = l } }

// WithLimits replaces the default limits.
func WithLimits(l Limits) Option { return func(f *Framework) { f.limits = l } }

// New returns a planner for the policy.
func New(p Policy, opts ...Option) (*Framework, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if p.Placer == nil {
		return nil, fmt.Errorf("policy %s: no placer: %w", p.Name, ErrInvalidPolicy)
	}
	f := &Framework{policy: p, limits: DefaultLimits(), logger: slog.Default()}
	for _, o := range opts {
		o(f)
	}
	f.logger = f.logger.With("component", "executor", "policy", p.Name)
	return f, nil
}

// Policy returns the policy the planner runs.
func (f *Framework) Policy() *Policy { return &f.policy }

// NewKeeper is a JobKeeper for one replay with this planner (PlanInput.Kept),
// or nil when the policy's placer keeps nothing (KeepingPlacer).
func (f *Framework) NewKeeper() JobKeeper {
	if kp, ok := f.policy.Placer.(KeepingPlacer); ok {
		return kp.NewKeeper()
	}
	return nil
}

// Plan implements Planner. The steps:
//
//  1. compute fair shares and the order key of every queued and running job;
//  2. sort the queue by key;
//  3. walk the queue: place each job that fits and respects the
//     reservations; for one that does not, preempt (if the policy may),
//     reserve (EASY) or stop (strict FIFO);
//  4. report deadline feasibility of newly submitted jobs and when to plan
//     again.
func (f *Framework) Plan(ctx context.Context, in PlanInput) (Plan, error) {
	if err := ctx.Err(); err != nil {
		return Plan{}, fmt.Errorf("plan: %w", err)
	}
	if in.Cluster == nil && in.Free == nil {
		return Plan{}, fmt.Errorf("plan: input has neither a snapshot nor a capacity index: %w", ErrInvalidPolicy)
	}
	c := newCycle(f, &in)
	for c.queue.len() > 0 && !c.done() {
		if err := c.consider(c.queue.pop(c.p.Order, c.octx)); err != nil {
			return Plan{}, err
		}
	}
	c.finish()
	c.release()
	return c.plan, nil
}

// ranked is a job with its order key.
type ranked struct {
	v   *JobView
	key Key
}

// before is the queue order: key, then submit time, then ID.
func before(a, b *ranked) bool {
	if a.key != b.key {
		return a.key.Less(b.key)
	}
	if !a.v.Job.SubmitTime.Equal(b.v.Job.SubmitTime) {
		return a.v.Job.SubmitTime.Before(b.v.Job.SubmitTime)
	}
	return a.v.Job.ID < b.v.Job.ID
}

// entry is a queued job in the planner's heap: its key and, copied out of
// the job, its submit time (Unix seconds and nanoseconds, and whether it
// carries a monotonic clock reading), with its index in the queue. It
// holds no pointers: comparing two does not chase them, and moving one
// needs no garbage-collector write barrier.
type entry struct {
	key Key
	submitTime
	idx int32
}

// submitTime is a job's submit time as the queue's tie-break compares it.
type submitTime struct {
	sec  int64
	nsec int32
	mono bool // it has a monotonic reading: compare the times themselves
}

func submitOf(t time.Time) submitTime {
	return submitTime{sec: t.Unix(), nsec: int32(t.Nanosecond()), mono: t != t.Round(0)}
}

// entryBefore is before for the entries of queue: key, then submit time,
// then ID.
func entryBefore(queue []*JobView, a, b *entry) bool {
	for i := range a.key { // a.key.Less(b.key) when they differ, spelled out: this is the hot loop
		if a.key[i] != b.key[i] {
			return a.key[i] < b.key[i]
		}
	}
	switch {
	case a.mono && b.mono: // time.Time compares by the monotonic readings then
		if ta, tb := queue[a.idx].Job.SubmitTime, queue[b.idx].Job.SubmitTime; !ta.Equal(tb) {
			return ta.Before(tb)
		}
	case a.sec != b.sec:
		return a.sec < b.sec
	case a.nsec != b.nsec:
		return a.nsec < b.nsec
	}
	return queue[a.idx].Job.ID < queue[b.idx].Job.ID
}

// orderedQueue hands out the queue in order, lazily: keys are computed once
// (O(n)), the heap is built in O(n), and each job taken costs O(log n), so a
// cycle that stops early (the fleet is full) does not pay for sorting the
// whole queue.
type orderedQueue struct {
	h      []entry
	queue  []*JobView // what the entries index
	sorted []*JobView // when the input came sorted: taken from the front
	keys   []Key      // the sorted jobs' keys, given with them; nil: computed
	nan    bool       // some key is NaN: the order is not total
	// woken says next is the earliest change after Now of a queued job's
	// key (Waker), found as the keys were computed or given with a sorted
	// queue; zero if none.
	woken bool
	next  time.Time
	// ranked, when set, hands the jobs out from the caller's index
	// (PlanInput.QueueIndex); h, sorted and keys are then unused.
	ranked *Ranking
}

func newOrderedQueue(order QueueOrder, in *PlanInput, octx *OrderContext, buf []entry, rankings *sync.Pool) *orderedQueue {
	if static, stepped := IsStatic(order), IsStepped(order); in.QueueSorted && (static || stepped) {
		// A static order's queued keys never change; a stepped one's next
		// change comes with the queue.
		q := &orderedQueue{sorted: in.Queue, woken: !static, next: in.QueueNext}
		if len(in.QueueKeys) == len(in.Queue) {
			q.keys = in.QueueKeys
		}
		return q
	}
	if ix := in.QueueIndex; ix != nil && ix.Len() == len(in.Queue) {
		r, _ := rankings.Get().(*Ranking)
		if r == nil {
			r = new(Ranking)
		}
		r.reset(octx)
		if ix.Rank(octx, r) && r.len() == len(in.Queue) {
			r.init()
			_, wakes := order.(Waker)
			return &orderedQueue{ranked: r, woken: wakes, next: r.next}
		}
		r.reset(nil)
		rankings.Put(r)
	}
	q := &orderedQueue{h: buf[:0], queue: in.Queue}
	w, wakes := order.(Waker)
	po, parted := order.(PartedOrder)
	kept := parted && len(in.QueueParts) == len(in.Queue)
	for i, v := range in.Queue {
		// The key, and the next change here, while the view is at hand,
		// rather than in a second walk (cycle.finish).
		var k Key
		var c time.Time
		var t submitTime // from the part, so that a kept queue reads no job
		switch {
		case kept:
			part := &in.QueueParts[i]
			k, c = po.KeyFrom(v, part.order, octx)
			t = part.submit
		case parted:
			k, c = po.KeyFrom(v, nil, octx)
			t = submitOf(v.Job.SubmitTime)
		default:
			k, t = order.Key(v, octx), submitOf(v.Job.SubmitTime)
			if wakes {
				c = w.NextChange(v, false, in.Now)
			}
		}
		q.add(k, t, i)
		if c.After(in.Now) && (q.next.IsZero() || c.Before(q.next)) {
			q.next = c
		}
	}
	q.woken = wakes
	heapInit(q.h, q.before)
	return q
}

// add puts the key of queue[i], submitted at t, into the heap's array.
func (q *orderedQueue) add(k Key, t submitTime, i int) {
	q.nan = q.nan || k.hasNaN()
	q.h = append(q.h, entry{key: k, submitTime: t, idx: int32(i)})
}

func (q *orderedQueue) len() int {
	if q.ranked != nil {
		return q.ranked.len()
	}
	return len(q.h) + len(q.sorted)
}

// total reports whether the jobs come out in a total order of their keys
// (no key is NaN, as PlanInput.QueueSorted promises of a sorted input):
// then no job taken later has a key before that of one taken earlier.
func (q *orderedQueue) total() bool { return !q.nan }

// pop takes the first job in order.
func (q *orderedQueue) pop(order QueueOrder, octx *OrderContext) ranked {
	if q.ranked != nil {
		return q.ranked.pop()
	}
	if len(q.sorted) > 0 {
		v := q.sorted[0]
		q.sorted = q.sorted[1:]
		if q.keys != nil {
			k := q.keys[0]
			q.keys = q.keys[1:]
			return ranked{v: v, key: k}
		}
		return ranked{v: v, key: order.Key(v, octx)}
	}
	var top entry
	top, q.h = heapPop(q.h, q.before)
	return ranked{v: q.queue[top.idx], key: top.key}
}

// before orders the heap's entries (entryBefore).
func (q *orderedQueue) before(a, b *entry) bool { return entryBefore(q.queue, a, b) }

// fairShares computes each tenant's share (by weight) and usage (decayed
// GPU-time), both as fractions of the fleet's, for the tenants the snapshot
// lists or that have used GPUs (weight 1 unless listed). A tenant that is
// neither has no entry: order plugins treat it as at its share.
// It fills out, emptied first, when given.
func fairShares(in *PlanInput, out map[string]FairShare) map[string]FairShare {
	var tenants []cluster.Tenant
	if in.Cluster != nil {
		tenants = in.Cluster.Tenants
	}
	if out == nil {
		out = make(map[string]FairShare, len(tenants)+len(in.UsageGPU))
	}
	clear(out)
	for _, t := range tenants { // Share holds the weight until the sums are known
		out[t.Name] = FairShare{Share: t.Weight}
	}
	for name := range in.UsageGPU {
		if _, ok := out[name]; !ok {
			out[name] = FairShare{Share: 1}
		}
	}
	// Sums in the names' order: a sum over a map's order differs in its
	// last bits from run to run, which is enough to flip a near tie.
	var buf [64]string
	var wsum, usum float64
	for _, name := range sortedNames(out, buf[:0]) {
		wsum += out[name].Share
		usum += in.UsageGPU[name].Seconds()
	}
	for name, fs := range out {
		fs = FairShare{Share: fs.Share / wsum}
		if usum > 0 {
			fs.Usage = in.UsageGPU[name].Seconds() / usum
		}
		fs.Factor = math.Exp2(fs.Usage/fs.Share - 1)
		out[name] = fs
	}
	addWaitRatios(out, in.Waits)
	return out
}

// sortedNames appends m's keys to buf, sorted: a planning cycle's few
// tenants fit a buffer on its stack.
func sortedNames[V any](m map[string]V, buf []string) []string {
	for name := range m {
		buf = append(buf, name)
	}
	slices.Sort(buf)
	return buf
}

// addWaitRatios sets each tenant's WaitRatio: its average wait per arrived
// job (queued job-seconds over arrivals, both decayed; by Little's law the
// mean wait) over the fleet's. A tenant that only appears here gets a
// FairShare at its share (Factor 1).
func addWaitRatios(out map[string]FairShare, waits map[string]TenantWaits) {
	var q, a float64
	var buf [64]string
	for _, name := range sortedNames(waits, buf[:0]) { // in order, as fairShares
		q += waits[name].QueuedS
		a += waits[name].Arrivals
	}
	if q <= 0 || a <= 0 {
		return
	}
	fleet := q / a
	for name, w := range waits {
		if w.Arrivals <= 0 {
			continue
		}
		fs, ok := out[name]
		if !ok {
			fs.Factor = 1
		}
		fs.WaitRatio = w.QueuedS / w.Arrivals / fleet
		out[name] = fs
	}
}

// gpusOf is a job's whole-GPU demand for counting (a share counts as one).
func gpusOf(j *cluster.Job) int { return j.Spec.GPUs }

// nodesOf counts the distinct nodes of an allocation.
func nodesOf(allocs []cluster.Allocation) int {
	n := 0
	for i, a := range allocs {
		if i == 0 || a.GPU.Node != allocs[i-1].GPU.Node {
			n++
		}
	}
	return n
}

// endOf is when a running job is expected to end by its P90, at its
// Slowdown.
func endOf(r *RunningJob, now time.Time) time.Time {
	if r.Slowdown > 0 && r.Slowdown != 1 {
		return now.Add(time.Duration(float64(r.RemainingP90()) * r.Slowdown))
	}
	return now.Add(r.RemainingP90())
}
