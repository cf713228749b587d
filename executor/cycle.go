package executor

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/prescient-sched/prescient/cluster"
)

// cycle is the state of one Plan call. Nothing in it outlives the call.
type cycle struct {
	f    *Framework
	p    *Policy
	in   *PlanInput
	octx *OrderContext
	plan Plan
	// holdUntil is the earliest time a job the Holder held may start.
	holdUntil time.Time

	queue   *orderedQueue
	buf     *[]entry // the heap's backing array, back to the pool after the cycle
	scanned int      // jobs considered since the first reservation
	// cands are the running jobs that may be preempted (not stopping),
	// keyed once needed (rank); preemptible counts them from the start.
	cands       Candidates
	ranked      bool
	preemptible int
	victims     map[cluster.JobID]bool

	clones  []*Capacity // the capacities the cycle cloned from the pool (clone)
	free    *Capacity   // free now, after this cycle's placements
	fenced  *Capacity   // free less reserved GPUs, for jobs running past a shadow time; nil without reservations
	pending *Capacity   // free once stopping jobs and victims are gone, less claims; nil until needed

	reservations []reservation
	ends         endList     // expected ends for shadow times; empty until needed
	placedEnds   []placedEnd // expected ends of this cycle's placements, by P90 remaining time
	minFail      int         // smallest plain whole-GPU demand that did not fit
	minNoVictims int         // smallest plain demand for which preemption found no room
	quotas       *Quotas     // tenants' GPUs against their quotas; nil when no tenant has one
	models       []string    // the fleet's GPU models, for quotas by model; read once needed
	attempts     int
	stopped      bool
	// last is the key of the job considered last; past records that the
	// walk has reached a job that may not preempt (key not before the
	// candidates' worst): no later one may either, as the queue comes in
	// key order.
	last   Key
	walked bool
	past   bool
	// shape is what the queue holds (queueShape), read once a cycle needs
	// it: a strict FIFO cycle that stops at its first job never does.
	shape *QueueFacts
}

// queueShape is the queue's Small and FewestPlain (QueueFacts), read on
// first use: from PlanInput.Facts, else by walking the queue.
func (c *cycle) queueShape() *QueueFacts {
	switch {
	case c.shape != nil:
	case c.in.Facts != nil:
		c.shape = c.in.Facts
	default:
		f := queueShape(c.in.Queue)
		c.shape = &f
	}
	return c.shape
}

// reservation holds GPUs (fenced) for a blocked job from its shadow time on.
type reservation struct {
	job    cluster.JobID
	shadow time.Time
}

// end is a job's expected end in the cycle's sorted list: when (Unix
// nanoseconds) and which job, i < len(in.Running) a running one, else
// placedEnds[i-len(in.Running)]. It holds no pointers, so sorting and
// inserting need no garbage-collector write barriers.
type end struct {
	ns int64
	i  int32
}

// placedEnd is a placement's expected end and GPUs.
type placedEnd struct {
	at     time.Time
	allocs []cluster.Allocation
}

func newCycle(f *Framework, in *PlanInput) *cycle {
	c := &cycle{f: f, p: &f.policy, in: in, minFail: int(^uint(0) >> 1), minNoVictims: int(^uint(0) >> 1)}
	if cp, ok := f.policy.Placer.(CyclePlacer); ok { // this cycle's placer; the policy itself is not changed
		pol := f.policy
		pol.Placer = cp.ForCycle(in)
		c.p = &pol
	}
	c.octx = &OrderContext{Now: in.Now, in: in}
	if m, _ := f.shares.Get().(map[string]FairShare); m != nil {
		c.octx.spare = m
	}
	if in.Free != nil {
		c.free = c.clone(in.Free)
	} else {
		c.free = NewCapacity(in.Cluster)
	}
	buf, _ := f.buffers.Get().(*[]entry)
	if buf == nil {
		buf = new([]entry)
	}
	c.buf = buf
	c.queue = newOrderedQueue(c.p.Order, in, c.octx, *buf, &f.rankings)
	c.countTenants()
	c.scanRunning()
	return c
}

// countTenants accounts the running jobs against the tenants' quotas.
func (c *cycle) countTenants() {
	if c.in.Cluster == nil || len(c.in.Cluster.Tenants) == 0 {
		return
	}
	c.quotas = NewQuotas(c.in.Cluster.Tenants, c.in.Running, c.in.Cluster.GPUModel)
	if c.quotas != nil && c.quotas.Lends() {
		c.quotas.Want(c.in.Queue)
	}
}

// fleetModels are the GPU models of the fleet, in order.
func (c *cycle) fleetModels() []string {
	if c.models == nil {
		seen := map[string]bool{}
		for i := range c.in.Cluster.Nodes {
			for _, g := range c.in.Cluster.Nodes[i].GPUs {
				seen[g.Model] = true
			}
		}
		c.models = slices.Sorted(maps.Keys(seen))
	}
	return c.models
}

// scanRunning counts the running jobs that may be preempted and builds
// the pending capacity when some are already stopping.
func (c *cycle) scanRunning() {
	stopping := false
	for _, r := range c.in.Running {
		if r.Stopping {
			stopping = true
		} else if c.p.Preemptor != nil {
			c.preemptible++
		}
	}
	if stopping {
		c.pending = c.clone(c.free)
		for _, r := range c.in.Running {
			if r.Stopping {
				c.pending.ReleaseOn(r.Nodes, r.Allocations)
			}
		}
	}
}

// rank keys the running jobs that may be preempted, once a cycle looks
// for victims: a cycle that places every job it considers never does.
func (c *cycle) rank() {
	if c.ranked || c.preemptible == 0 {
		return
	}
	c.ranked = true
	if b, _ := c.f.candidates.Get().(*Candidates); b != nil {
		c.cands = Candidates{Jobs: b.Jobs[:0], Keys: b.Keys[:0], facts: b.facts[:0]}
	} else {
		c.cands = Candidates{Jobs: make([]*RunningJob, 0, c.preemptible), Keys: make([]Key, 0, c.preemptible)}
	}
	ro, parted := c.p.Order.(RunningPartedOrder)
	parted = parted && len(c.in.RunningParts) == len(c.in.Running)
	for i, r := range c.in.Running {
		switch {
		case r.Stopping:
		case parted:
			c.cands.Add(r, ro.KeyRunning(&r.JobView, c.in.RunningParts[i], c.octx))
		default:
			c.cands.Add(r, c.p.Order.Key(&r.JobView, c.octx))
		}
	}
}

// clone is src.Clone, its arrays from the framework's pool; the clone is
// the cycle's and goes back to the pool with release.
func (c *cycle) clone(src *Capacity) *Capacity {
	d, _ := c.f.capacities.Get().(*Capacity)
	d = src.CloneInto(d)
	c.clones = append(c.clones, d)
	return d
}

// release returns the heap's backing array (its entries hold no pointers
// into the input), the candidates' arrays (cleared of them) and the
// cycle's capacities (let go of the fleet) to the pools.
func (c *cycle) release() {
	if r := c.queue.ranked; r != nil {
		r.reset(nil)
		c.f.rankings.Put(r)
	} else {
		*c.buf = c.queue.h[:0]
	}
	c.f.buffers.Put(c.buf)
	if c.ranked {
		clear(c.cands.Jobs)
		c.f.candidates.Put(&Candidates{Jobs: c.cands.Jobs[:0], Keys: c.cands.Keys[:0], facts: c.cands.facts[:0]})
	}
	for _, d := range c.clones {
		d.nodes, d.index, d.first = nil, nil, nil
		c.f.capacities.Put(d)
	}
	if c.ends.built {
		c.f.ends.Put(&endList{sorted: c.ends.sorted[:0], rest: c.ends.rest[:0]})
	}
	if m := c.octx.Shares; m != nil {
		c.f.shares.Put(m)
	} else if c.octx.spare != nil {
		c.f.shares.Put(c.octx.spare)
	}
	c.octx.Shares, c.octx.spare = nil, nil
}

// done reports whether no job left in the queue can start or preempt: the
// walk stopped (strict FIFO), or no whole GPU is free (or none of the fewest
// asked for) and no job may preempt or fit in a share.
func (c *cycle) done() bool {
	if c.stopped {
		return true
	}
	if len(c.reservations) > 0 {
		if c.scanned++; c.scanned > c.f.limits.BackfillDepth {
			return true
		}
	}
	full := c.free.FreeGPUs() == 0 || c.minFail <= 1
	mayPreempt := c.p.Preemptor != nil && c.attempts < c.f.limits.PreemptionAttempts && (c.preemptible > 0 || c.pending != nil)
	if mayPreempt && c.free.FreeGPUs() == 0 && !c.queueShape().Small && c.noLaterVictims() {
		mayPreempt = false
	}
	mayReclaim := c.quotas != nil && c.quotas.Lends() && c.attempts < c.f.limits.PreemptionAttempts
	return full && !mayPreempt && !mayReclaim && !c.queueShape().Small
}

// noLaterVictims reports whether no job left in the queue can preempt
// (tryPreempt would turn each down): the pending capacity (GPUs of
// stopping jobs and victims, less claims) has no whole GPU free for a job
// to wait for, and either every job is plain and asks for at least as many
// GPUs as one that found no victims, or the walk has passed the worst key
// among the running jobs, which every later job's key is at least (the
// order is total unless a key is NaN). done asks only when no whole GPU is
// free and every job left needs whole GPUs (so none can start), and this
// holds only once no more waiting jobs are explained, so stopping the walk
// early changes nothing in the plan.
func (c *cycle) noLaterVictims() bool {
	if c.pending != nil && c.pending.FreeGPUs() > 0 || c.explaining() {
		return false
	}
	if f := c.queueShape().FewestPlain; f > 0 && f >= c.minNoVictims {
		return true
	}
	if !c.queue.total() {
		return false
	}
	c.rank()
	if !c.past && c.walked && !c.last.Less(c.cands.Worst()) {
		c.past = true
	}
	return c.past
}

// consider decides one queued job.
func (c *cycle) consider(r ranked) error {
	j := r.v.Job
	c.last, c.walked = r.key, true
	if r.v.Unplaceable != "" {
		c.wait(j.ID, r.v.Unplaceable)
		return nil
	}
	if c.quotas != nil {
		if why, ok := c.quotas.Gate(j); !ok {
			c.wait(j.ID, why)
			return nil
		}
	}
	if c.p.Hold != nil {
		if until, why, hold := c.p.Hold.Hold(r.v, c.in); hold {
			c.wait(j.ID, why)
			if c.holdUntil.IsZero() || until.Before(c.holdUntil) {
				c.holdUntil = until
			}
			return nil
		}
	}
	v := r.v
	if c.quotas != nil {
		if ms := c.quotas.Models(j, c.fleetModels()); ms != nil {
			if len(ms) == 0 {
				c.wait(j.ID, fmt.Sprintf("tenant %s has no quota of the GPU models it asks for", j.Spec.Tenant))
				return nil
			}
			v = withModels(v, ms)
		}
	}
	allocs, ok, why := c.tryPlace(v)
	if ok && c.quotas != nil {
		if qwhy, admitted := c.quotas.Admit(j, allocs); !admitted {
			if c.tryReclaim(r, v) {
				return nil
			}
			c.wait(j.ID, qwhy)
			return nil
		}
	}
	if ok {
		return c.place(r.v, allocs, why)
	}
	if c.tryPreempt(r, v) || c.tryReclaim(r, v) {
		return nil
	}
	c.wait(j.ID, why)
	switch c.p.Blocking {
	case HeadOfLine:
		c.stopped = true
	case Reserve:
		c.reserve(r.v)
	}
	return nil
}

// withModels is v with its job asking for the GPU models ms only.
func withModels(v *JobView, ms []string) *JobView {
	w, j := *v, *v.Job
	j.Spec.GPUModels = ms
	w.Job = &j
	return &w
}

// plain jobs ask for whole GPUs of any model, not as a gang: if one of n
// GPUs did not fit, none of more will.
func plain(j *cluster.Job) bool {
	return j.Spec.GPUs > 0 && !j.Spec.Fractional() && len(j.Spec.GPUModels) == 0 && j.Spec.Nodes == nil && j.Spec.GangSize <= 1
}

// tryPlace asks the placer for GPUs: among all free ones for a job that
// ends before every reservation's shadow time, outside the fenced ones for
// a job that runs past one (backfill).
func (c *cycle) tryPlace(v *JobView) ([]cluster.Allocation, bool, string) {
	j := v.Job
	if plain(j) && j.Spec.GPUs >= c.minFail {
		if !c.explaining() {
			return nil, false, ""
		}
		return nil, false, fmt.Sprintf("needs %d GPUs; a job of %d did not fit", j.Spec.GPUs, c.minFail)
	}
	capacity, backfill := c.free, c.fenced != nil && c.runsPastShadow(v)
	if backfill {
		capacity = c.fenced
	}
	allocs, ok, why := c.p.Placer.Place(j, capacity)
	if !ok && plain(j) && !backfill {
		c.minFail = min(c.minFail, j.Spec.GPUs)
	}
	if !ok && backfill {
		why = "backfill refused: it would run past a reservation's shadow time and no unreserved GPUs fit it"
	}
	if !ok && c.explaining() {
		why = fmt.Sprintf("needs %d GPUs, %d wholly free: %s", j.Spec.GPUs, c.free.FreeGPUs(), why)
	}
	return allocs, ok, why
}

func (c *cycle) place(v *JobView, allocs []cluster.Allocation, why string) error {
	if err := c.free.Allocate(allocs); err != nil {
		return fmt.Errorf("plan %s: placer %s chose a taken GPU: %w", v.Job.ID, c.p.Placer.Name(), err)
	}
	if c.pending != nil {
		if err := c.pending.Allocate(allocs); err != nil {
			return fmt.Errorf("plan %s: pending capacity out of step: %w", v.Job.ID, err)
		}
	}
	if c.fenced != nil {
		takeFree(c.fenced, allocs)
	}
	if c.in.Unexplained {
		why = ""
	}
	p := Placement{Job: v.Job.ID, Allocations: allocs, Forecast: v.Forecast, Reason: why}
	if c.p.Checkpoint != nil {
		p.CheckpointEvery = c.p.Checkpoint.Interval(v, nodesOf(allocs), c.in)
	}
	if c.p.PowerCap != nil && len(allocs) > 0 && !v.Job.Spec.Fractional() { // a cap limits whole GPUs
		var cw string
		p.PowerCap, cw = c.p.PowerCap.Cap(v, len(allocs), c.in.Now)
		if cw != "" && p.Reason != "" {
			p.Reason += "; " + cw
		}
	}
	c.plan.Placements = append(c.plan.Placements, p)
	if c.quotas != nil {
		c.quotas.Take(v.Job, allocs)
	}
	rem := v.RemainingP90()
	if s := p.PowerCap.Slowdown; s > 1 {
		rem = time.Duration(float64(rem) * s)
	}
	if s := Slowdown(c.p.Speed, v.Job, allocs, c.in.Cluster); s > 0 && s != 1 {
		rem = time.Duration(float64(rem) * s)
	}
	e := placedEnd{at: c.in.Now.Add(rem), allocs: allocs}
	c.placedEnds = append(c.placedEnds, e)
	if c.ends.built {
		c.ends.add(end{ns: e.at.UnixNano(), i: int32(len(c.in.Running) + len(c.placedEnds) - 1)})
	}
	return nil
}

// explaining reports whether waiting jobs still get their reason recorded.
func (c *cycle) explaining() bool {
	return !c.in.Unexplained && len(c.plan.Waiting) < c.f.limits.Explained
}

func (c *cycle) wait(id cluster.JobID, reason string) {
	if c.explaining() {
		c.plan.Waiting = append(c.plan.Waiting, Decision{Job: id, Reason: reason})
	}
}

// finish adds the deadline reports and the next replanning time.
func (c *cycle) finish() {
	now := c.in.Now
	report := func(v *JobView) {
		if v.Job.Spec.HasDeadline() {
			latest := LatestStart(v)
			c.plan.Deadlines = append(c.plan.Deadlines, DeadlineReport{Job: v.Job.ID, Feasible: !now.After(latest), LatestStart: latest})
		}
	}
	if c.in.Facts != nil {
		for _, v := range c.in.Facts.New {
			report(v)
		}
	} else {
		for _, v := range c.in.Queue {
			if newJob(v, now) {
				report(v)
			}
		}
	}
	next := time.Time{}
	consider := func(t time.Time) {
		if t.After(now) && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	consider(c.holdUntil) // a held job may start then
	w, ok := c.p.Order.(Waker)
	if !ok {
		c.plan.NextReplan = next
		return
	}
	for _, r := range c.in.Running {
		if !r.Stopping {
			consider(w.NextChange(&r.JobView, true, now))
		}
	}
	if c.queue.woken {
		consider(c.queue.next)
	} else {
		for _, v := range c.in.Queue {
			consider(w.NextChange(v, false, now))
		}
	}
	c.plan.NextReplan = next
}

// sortedEnds lists when running and just-placed jobs should end by their
// P90, soonest first. It is built once a cycle, when the first reservation
// needs it, and sorted only as far as reservations read it; placements
// after that are added in order. Ends at the same time are released
// together, so their order is free.
func (c *cycle) sortedEnds() *endList {
	if c.ends.built {
		return &c.ends
	}
	if b, _ := c.f.ends.Get().(*endList); b != nil {
		c.ends = *b
	}
	c.ends.built = true
	for i := range c.in.Running {
		c.ends.rest = append(c.ends.rest, end{ns: c.endAt(int32(i)).UnixNano(), i: int32(i)})
	}
	for k, e := range c.placedEnds {
		c.ends.rest = append(c.ends.rest, end{ns: e.at.UnixNano(), i: int32(len(c.in.Running) + k)})
	}
	heapInit(c.ends.rest, endBefore)
	return &c.ends
}

// endList is a list of ends sorted as far as it has been read: sorted
// holds the soonest in order, rest a min-heap of the others, none sooner
// than sorted's last. Reservations mostly find room after the first few
// ends, so most of the list is never sorted.
type endList struct {
	built        bool
	sorted, rest []end
}

func endBefore(a, b *end) bool { return a.ns < b.ns }

// at is the k-th soonest end; false past the last.
func (l *endList) at(k int) (end, bool) {
	for len(l.sorted) <= k && len(l.rest) > 0 {
		var e end
		e, l.rest = heapPop(l.rest, endBefore)
		l.sorted = append(l.sorted, e)
	}
	if k < len(l.sorted) {
		return l.sorted[k], true
	}
	return end{}, false
}

// add adds a just-placed job's expected end, keeping the order.
func (l *endList) add(e end) {
	if n := len(l.sorted); len(l.rest) > 0 && (n == 0 || e.ns >= l.sorted[n-1].ns) {
		l.rest = heapPush(l.rest, e, endBefore)
		return
	}
	i, _ := slices.BinarySearchFunc(l.sorted, e.ns, func(x end, ns int64) int { return cmp.Compare(x.ns, ns) })
	l.sorted = slices.Insert(l.sorted, i, e)
}

// endAt is when job i of the ends list should end: a running job by its
// P90 (now when it is stopping), a placement as recorded.
func (c *cycle) endAt(i int32) time.Time {
	if int(i) >= len(c.in.Running) {
		return c.placedEnds[int(i)-len(c.in.Running)].at
	}
	r := c.in.Running[i]
	if r.Stopping {
		return c.in.Now
	}
	return endOf(r, c.in.Now)
}

// endAllocs are the GPUs job i of the ends list frees, with their nodes'
// places where known (RunningJob.Nodes).
func (c *cycle) endAllocs(i int32) ([]int32, []cluster.Allocation) {
	if int(i) >= len(c.in.Running) {
		return nil, c.placedEnds[int(i)-len(c.in.Running)].allocs
	}
	r := c.in.Running[i]
	return r.Nodes, r.Allocations
}
