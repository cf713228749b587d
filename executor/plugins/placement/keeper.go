package placement

import (
	"fmt"
	"math"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
)

// keeper is what a replay's cycles read of every job, kept as jobs arrive
// and leave (executor.JobKeeper) so that a cycle need not read every job:
// the typical-request histogram, and the jobs' views by ID (the queued
// jobs' forecast footprints and time left). A job counts in its class
// with weight 2^((submit−base)/HalfLife). A cycle that reads the jobs
// weighs each 2^(−age/HalfLife) (requestWeight); the two differ by
// 2^((base−now)/HalfLife), one factor for every job, which the typical
// distribution's normalisation cancels.
type keeper struct {
	placer   *Placer
	halfLife float64   // seconds
	base     time.Time // zero before the first arrival
	jobs     map[cluster.JobID]keptJob
	members  []*executor.JobView // the jobs counted, for summing again (rebase)
	classes  []keptClass         // slots; the slot of a class whose jobs all left is reused
	spare    []int32             // slots free for reuse
	index    map[Class]int32
}

type keptJob struct {
	view *executor.JobView // its view in the queue whenever it is queued
	slot int32
	pos  int32 // in members
	w    float64
}

type keptClass struct {
	class Class
	n     int     // jobs counted
	sum   float64 // their weights
}

// rebaseAfter is how many half-lives past base a submission moves base to
// itself and sums every weight again. Weights then stay within 2^±8 of one
// for the jobs that matter, and the rounding a sum gathers by adding and
// subtracting stays far below the weights it counts.
const rebaseAfter = 8

// NewKeeper implements executor.KeepingPlacer: a keeper of the typical
// distribution for the placements that weigh fragmentation (NeedsTypical);
// nil for the others, which read nothing of the jobs for it.
func (p *Placer) NewKeeper() executor.JobKeeper {
	if !NeedsTypical(p.name) {
		return nil
	}
	return &keeper{placer: p, halfLife: p.args.HalfLife.Seconds(), jobs: map[cluster.JobID]keptJob{}, index: map[Class]int32{}}
}

// Arrive implements executor.JobKeeper.
func (k *keeper) Arrive(v *executor.JobView) {
	j := v.Job
	if _, ok := k.jobs[j.ID]; ok {
		return
	}
	if k.base.IsZero() || j.SubmitTime.Sub(k.base).Seconds() > rebaseAfter*k.halfLife {
		k.rebase(j.SubmitTime)
	}
	r := RequestOf(&j.Spec)
	c := classOf(&r)
	slot, ok := k.index[c]
	if !ok {
		if n := len(k.spare); n > 0 {
			slot, k.spare = k.spare[n-1], k.spare[:n-1]
			k.classes[slot] = keptClass{class: c}
		} else {
			slot = int32(len(k.classes))
			k.classes = append(k.classes, keptClass{class: c})
		}
		k.index[c] = slot
	}
	w := k.weight(j.SubmitTime)
	k.jobs[j.ID] = keptJob{view: v, slot: slot, pos: int32(len(k.members)), w: w}
	k.members = append(k.members, v)
	k.classes[slot].n++
	k.classes[slot].sum += w
}

// Leave implements executor.JobKeeper.
func (k *keeper) Leave(v *executor.JobView) {
	id := v.Job.ID
	kj, ok := k.jobs[id]
	if !ok {
		return
	}
	delete(k.jobs, id)
	last := len(k.members) - 1
	if moved := k.members[last]; moved.Job.ID != id {
		k.members[kj.pos] = moved
		m := k.jobs[moved.Job.ID]
		m.pos = kj.pos
		k.jobs[moved.Job.ID] = m
	}
	k.members = k.members[:last]
	c := &k.classes[kj.slot]
	if c.n--; c.n > 0 {
		c.sum -= kj.w
		return
	}
	delete(k.index, c.class)
	*c = keptClass{}
	k.spare = append(k.spare, kj.slot)
}

func (k *keeper) weight(submit time.Time) float64 {
	return math.Exp2(submit.Sub(k.base).Seconds() / k.halfLife)
}

// rebase weighs every job again from base.
func (k *keeper) rebase(base time.Time) {
	k.base = base
	for i := range k.classes {
		k.classes[i].sum = 0
	}
	for _, v := range k.members {
		kj := k.jobs[v.Job.ID]
		kj.w = k.weight(v.Job.SubmitTime)
		k.jobs[v.Job.ID] = kj
		k.classes[kj.slot].sum += kj.w
	}
}

// typical is the typical distribution of the jobs counted; nil without a
// job of any weight.
func (k *keeper) typical() *Typical {
	h := histogram{counts: make(map[Class]float64, len(k.index))}
	for i := range k.classes {
		if c := &k.classes[i]; c.n > 0 && c.sum > 0 {
			h.counts[c.class] = c.sum
			h.total += c.sum
		}
	}
	t, _ := h.typical(DefaultPopularity) // nil without a job of any weight
	return t
}

// Check implements executor.JobKeeper: the jobs counted are in's queued
// and running ones, each in its class, a queued one by its queue's view,
// and each class's weight, scaled to in.Now, is what reading the jobs
// gives, within 10⁻⁹ of the total.
func (k *keeper) Check(in *executor.PlanInput) error {
	if n := len(in.Queue) + len(in.Running); n != len(k.jobs) {
		return fmt.Errorf("placement: the typical distribution counts %d jobs, %d are queued or running", len(k.jobs), n)
	}
	read := newHistogram()
	count := func(v *executor.JobView) error {
		kj, ok := k.jobs[v.Job.ID]
		r := RequestOf(&v.Job.Spec)
		if c := classOf(&r); !ok || k.classes[kj.slot].class != c {
			return fmt.Errorf("placement: job %s (%+v) is not counted in its class", v.Job.ID, c)
		}
		read.add(&r, requestWeight(in.Now, v.Job.SubmitTime, k.halfLife))
		return nil
	}
	for _, v := range in.Queue {
		if err := count(v); err != nil {
			return err
		}
		if k.jobs[v.Job.ID].view != v {
			return fmt.Errorf("placement: queued job %s is kept with another view", v.Job.ID)
		}
	}
	for _, r := range in.Running {
		if err := count(&r.JobView); err != nil {
			return err
		}
	}
	scale := math.Exp2(k.base.Sub(in.Now).Seconds() / k.halfLife)
	for i := range k.classes {
		c := &k.classes[i]
		if c.n == 0 {
			continue
		}
		if got, want := c.sum*scale, read.counts[c.class]; math.Abs(got-want) > 1e-9*read.total {
			return fmt.Errorf("placement: class %+v weighs %g kept, %g read (of %g)", c.class, got, want, read.total)
		}
	}
	return nil
}
