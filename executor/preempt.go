package executor

import (
	"fmt"
	"github.com/prescient-sched/prescient/cluster"
	"time"
)

// tryPreempt looks for GPUs for a job that does not fit: first among those
// of jobs already stopping, then by stopping the victims the Preemptor
// names, one at a time, until the job fits. The GPUs so found are claimed
// for the job (no other job of this cycle gets them); it starts when they
// come free, in a later cycle. v is the job as the cycle places it (its
// GPU models kept to its tenant's quotas).
func (c *cycle) tryPreempt(r ranked, v *JobView) bool {
	if c.p.Preemptor == nil || c.attempts >= c.f.limits.PreemptionAttempts {
		return false
	}
	if c.awaitStopping(v) {
		return true
	}
	// A job later in the order has no more victims than an earlier one, so
	// a plain job at least as large as one that found no room finds none.
	c.rank()
	if c.cands.Len() == 0 || !r.key.Less(c.cands.Worst()) || (plain(v.Job) && v.Job.Spec.GPUs >= c.minNoVictims) {
		return false
	}
	c.attempts++
	cands := c.p.Preemptor.Victims(r.v, r.key, &c.cands, c.octx, c.f.limits.VictimsPerJob+len(c.victims))
	if c.pending == nil && len(cands) > 0 {
		c.pending = c.clone(c.free)
	}
	if len(cands) > 0 && c.displace(r, v, cands, c.p.Preemptor.Name()) {
		return true
	}
	if plain(v.Job) {
		c.minNoVictims = min(c.minNoVictims, v.Job.Spec.GPUs)
	}
	return false
}

// displace releases victims into the pending capacity, in the order
// given, until the job v fits and the quotas admit it, and stops them for
// it (by names the preemptor in their reasons); if it never does, it puts
// them back.
func (c *cycle) displace(r ranked, v *JobView, cands []*RunningJob, by string) bool {
	var taken []*RunningJob
	for _, vic := range cands {
		if len(taken) >= c.f.limits.VictimsPerJob {
			break
		}
		if c.victims[vic.Job.ID] {
			continue
		}
		c.pending.ReleaseOn(vic.Nodes, vic.Allocations)
		taken = append(taken, vic)
		if plain(v.Job) && !mayFit(c.pending, v.Job.Spec.GPUs) {
			continue
		}
		allocs, ok, _ := c.p.Placer.Place(v.Job, c.pending)
		if !ok || !c.admits(v.Job, allocs, taken) {
			continue
		}
		c.claim(v.Job, allocs)
		c.preempt(r, taken, by)
		return true
	}
	for _, vic := range taken {
		_ = c.pending.Allocate(vic.Allocations)
	}
	return false
}

// awaitStopping claims for a job the GPUs of jobs that are stopping (or
// victims of this cycle) where it fits in them: it starts when they are
// free.
func (c *cycle) awaitStopping(v *JobView) bool {
	if c.pending == nil || (plain(v.Job) && !mayFit(c.pending, v.Job.Spec.GPUs)) {
		return false
	}
	allocs, ok, _ := c.p.Placer.Place(v.Job, c.pending)
	if !ok || !c.admits(v.Job, allocs, nil) {
		return false
	}
	c.claim(v.Job, allocs)
	c.wait(v.Job.ID, "waits for the GPUs of jobs that are stopping")
	return true
}

// admits reports whether the quotas let job run on allocs once victims
// have stopped; the victims' GPUs are given back only if it does.
func (c *cycle) admits(job *cluster.Job, allocs []cluster.Allocation, victims []*RunningJob) bool {
	if c.quotas == nil {
		return true
	}
	for _, v := range victims {
		c.quotas.Give(v.Job, v.Allocations)
	}
	if _, ok := c.quotas.Admit(job, allocs); ok {
		return true
	}
	for _, v := range victims {
		c.quotas.Take(v.Job, v.Allocations)
	}
	return false
}

// tryReclaim takes back quota a job's tenant lent: when the tenant is
// within its nominal quota and the job does not fit (no room, or its
// cohort's pool in use), jobs of members that borrow are stopped for it,
// the cheapest first, until it fits and the quotas admit it.
func (c *cycle) tryReclaim(r ranked, v *JobView) bool {
	if c.quotas == nil || c.attempts >= c.f.limits.PreemptionAttempts || !c.quotas.MayReclaim(r.v.Job) {
		return false
	}
	if c.awaitStopping(v) {
		return true
	}
	cands := c.quotas.Borrowers(r.v.Job, c.victims)
	if len(cands) == 0 {
		return false
	}
	c.attempts++
	if c.pending == nil {
		c.pending = c.clone(c.free)
	}
	return c.displace(r, v, cands, "quota reclaim")
}

func (c *cycle) preempt(r ranked, victims []*RunningJob, by string) {
	if c.victims == nil {
		c.victims = map[cluster.JobID]bool{}
	}
	for _, v := range victims {
		c.victims[v.Job.ID] = true
		ckpt := v.Job.Spec.Checkpointable
		stopBy := c.in.Now
		if ckpt {
			// The victim stops when its checkpoint lands or, at the latest,
			// when the grace period ends.
			stopBy = c.in.Now.Add(c.p.Grace)
		}
		pr := Preemption{Job: v.Job.ID, For: r.v.Job.ID, CheckpointFirst: ckpt, StopBy: stopBy, LostGPU: v.WorkSinceCheckpoint}
		if !c.in.Unexplained {
			pr.Reason = fmt.Sprintf("%s: makes room for %s (%d GPUs); %s of GPU work since its checkpoint",
				by, r.v.Job.ID, gpusOf(r.v.Job), v.WorkSinceCheckpoint.Round(time.Second))
		}
		c.plan.Preemptions = append(c.plan.Preemptions, pr)
	}
	if c.explaining() {
		c.wait(r.v.Job.ID, fmt.Sprintf("preempted %d job(s) for it", len(victims)))
	}
}

// claim holds GPUs in the pending capacity for a job that waits for them;
// the part of them that is free now is taken from the free (and fenced)
// capacity too, so that no later job of this cycle is placed on it and the
// pending capacity stays at least the free one.
func (c *cycle) claim(job *cluster.Job, allocs []cluster.Allocation) {
	_ = c.pending.Allocate(allocs)
	if c.quotas != nil {
		c.quotas.Take(job, allocs)
	}
	takeFree(c.free, allocs)
	if c.fenced != nil {
		takeFree(c.fenced, allocs)
	}
}
