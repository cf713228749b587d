package sim

import (
	"fmt"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
)

func (s *Simulator) enqueue(j *simJob) {
	s.queuedN[j.job.Spec.Tenant]++
	s.facts.Add(&j.view, s.now)
	if _, ok := s.waits[j.job.Spec.Tenant]; !ok {
		s.waits[j.job.Spec.Tenant] = executor.TenantWaits{} // its queued time counts from now (advance)
	}
	if s.sorted != nil {
		s.sorted.Add(&j.view, s.now)
		j.qpos = 0 // in the queue; positions are the sorted queue's
		return
	}
	j.qpos = len(s.queue)
	s.queue = append(s.queue, &j.view)
	if s.parted != nil { // its forecast and progress are set: they stay while it waits
		s.parts = append(s.parts, executor.NewQueuedPart(s.parted, &j.view))
	}
	if s.index != nil {
		s.index.Add(&j.view)
	}
}

func (s *Simulator) dequeue(j *simJob) {
	s.queuedN[j.job.Spec.Tenant]--
	s.facts.Remove(&j.view)
	if s.sorted != nil {
		s.sorted.Remove(&j.view)
		j.qpos = -1
		return
	}
	n := len(s.queue) - 1
	last := s.queue[n]
	s.queue[j.qpos] = last
	s.byID[last.Job.ID].qpos = j.qpos
	s.queue = s.queue[:n]
	if s.parted != nil {
		s.parts[j.qpos] = s.parts[n]
		s.parts = s.parts[:n]
	}
	if s.index != nil {
		s.index.Remove(&j.view)
	}
	j.qpos = -1
}

func (s *Simulator) addRunning(j *simJob) {
	j.rpos = len(s.running)
	s.running = append(s.running, &j.run)
	s.runJobs = append(s.runJobs, j)
	if s.runParted != nil { // its spec and forecast stay while it runs
		s.runParts = append(s.runParts, s.runParted.RunningPart(&j.run.JobView))
	}
}

func (s *Simulator) removeRunning(j *simJob) {
	n := len(s.running) - 1
	last := s.runJobs[n]
	s.running[j.rpos], s.runJobs[j.rpos] = s.running[n], last
	last.rpos = j.rpos
	s.running, s.runJobs = s.running[:n], s.runJobs[:n]
	if s.runParted != nil {
		s.runParts[j.rpos] = s.runParts[n]
		s.runParts[n] = nil
		s.runParts = s.runParts[:n]
	}
	j.rpos = -1
}

// placeNodes sets r.Nodes, in its own array, to the places of its
// allocations' nodes in the capacity index: the planner then finds each
// without a look-up by name.
func (s *Simulator) placeNodes(r *executor.RunningJob) {
	r.Nodes = r.Nodes[:0]
	for _, a := range r.Allocations {
		i, _ := s.free.NodeIndex(a.GPU.Node)
		r.Nodes = append(r.Nodes, int32(i))
	}
}

// start applies a placement.
func (s *Simulator) start(p executor.Placement) error {
	j, ok := s.byID[p.Job]
	if !ok || j.qpos < 0 {
		return fmt.Errorf("sim: plan places %s, which is not queued", p.Job)
	}
	boot := s.acct.park.bootDelay(s, p.Allocations) // before the allocation wakes the nodes
	if err := s.snap.Allocate(j.job.ID, p.Allocations); err != nil {
		return fmt.Errorf("sim: placement of %s: %w", j.job.ID, err)
	}
	if err := s.free.Allocate(p.Allocations); err != nil {
		return fmt.Errorf("sim: capacity index out of step for %s: %w", j.job.ID, err)
	}
	if err := j.job.Transition(cluster.StateRunning, s.now); err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	s.dequeue(j)
	if j.firstStart.IsZero() {
		j.firstStart = s.now
	}
	if j.firstWork.IsZero() {
		j.firstWork = s.now.Add(boot)
	}
	j.run = executor.RunningJob{JobView: j.view, Allocations: s.snap.Allocations(j.job.ID), Started: s.now, Nodes: j.run.Nodes}
	s.placeNodes(&j.run)
	j.seg = segment{start: s.now.Add(boot), saved: j.view.Progress, interval: p.CheckpointEvery, cost: j.job.Spec.CheckpointCost}
	j.capPower = 0
	j.seg.slow = s.modelSlowdown(&j.job, p.Allocations)
	if !p.PowerCap.Uncapped() {
		base := j.seg.slow
		if base <= 0 {
			base = 1
		}
		j.seg.slow, j.capPower = base*p.PowerCap.Slowdown, p.PowerCap.Power
		s.acct.capped++
	}
	j.run.Slowdown = j.seg.slow
	if d := j.job.Spec.Data; d != nil && s.warm(d, p.Allocations) {
		s.acct.savedBytes += d.Bytes
	}
	s.caches.started(s, j.job.Spec.Data, p.Allocations)
	s.addRunning(j)
	s.acct.allocate(s, j)
	end, _ := j.seg.finish(j.truth)
	s.ev.push(event{at: end, kind: evFinish, job: j, epoch: j.epoch})
	return nil
}

// warm reports whether a copy of d sits on every node of the allocations
// (or their racks): the attempt reads it there instead of fetching it.
func (s *Simulator) warm(d *cluster.DataSource, allocs []cluster.Allocation) bool {
	for _, al := range allocs {
		if n, ok := s.snap.Node(al.GPU.Node); !ok || !d.WarmOn(n) {
			return false
		}
	}
	return len(allocs) > 0
}

// modelSlowdown is executor.Slowdown with Config.Speed (1 where it knows
// none of the GPUs), 0 without speeds.
func (s *Simulator) modelSlowdown(job *cluster.Job, allocs []cluster.Allocation) float64 {
	if s.cfg.Speed == nil {
		return 0
	}
	if slow := executor.Slowdown(s.cfg.Speed, job, allocs, s.snap); slow > 0 {
		return slow
	}
	return 1
}

// complete ends a job whose work is done.
func (s *Simulator) complete(j *simJob) error {
	_, n := j.seg.finish(j.truth)
	s.acct.checkpointGPU += time.Duration(n) * j.seg.cost * gpuWeight(j)
	s.release(j)
	if s.kept != nil {
		s.kept.Leave(&j.view)
	}
	if err := j.job.Transition(cluster.StateSucceeded, s.now); err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	s.acct.finish(j)
	if o, ok := s.cfg.Forecaster.(executor.Observer); ok {
		done := j.job.Clone()
		done.Outcome.RunTime = j.truth
		o.Observe(done)
	}
	return nil
}

// withdraw takes a queued job out as its user cancelled it (WithdrawnAt).
func (s *Simulator) withdraw(j *simJob) error {
	s.dequeue(j)
	if s.kept != nil {
		s.kept.Leave(&j.view)
	}
	if err := j.job.Transition(cluster.StateCancelled, s.now); err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	s.acct.withdrawn++
	s.dirty = true // a reservation it held may be free
	if o, ok := s.cfg.Forecaster.(executor.Observer); ok {
		o.Observe(j.job.Clone())
	}
	return nil
}

// preempt tells a running job to checkpoint and stop.
func (s *Simulator) preempt(p executor.Preemption) error {
	j, ok := s.byID[p.Job]
	if !ok || j.rpos < 0 || j.run.Stopping {
		return fmt.Errorf("sim: plan preempts %s, which is not running", p.Job)
	}
	prog, ck, k, writing := j.seg.at(s.now)
	s.acct.checkpointGPU += (time.Duration(k)*j.seg.cost + writing) * gpuWeight(j)
	j.epoch++
	j.stopProg, j.stopLost = prog, prog-ck
	j.stopAt = p.StopBy
	j.stopLands = p.CheckpointFirst && !s.now.Add(j.job.Spec.CheckpointCost).After(p.StopBy)
	j.stopBooting = s.now.Before(j.seg.start) // its node still boots: nothing done, nothing to write
	switch {
	case j.stopBooting:
		j.stopAt, j.stopLands = s.now, false
	case j.stopLands:
		j.stopAt = s.now.Add(j.job.Spec.CheckpointCost)
	}
	if err := j.job.Transition(cluster.StateCheckpointing, s.now); err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	j.run.Stopping = true
	s.acct.preemptions++
	s.ev.push(event{at: j.stopAt, kind: evStop, job: j, epoch: j.epoch})
	return nil
}

// stop ends a preempted job's attempt: its checkpoint landed, or the grace
// period ran out and the work since its last checkpoint is lost.
func (s *Simulator) stop(j *simJob) error {
	saved := j.stopProg - j.stopLost
	switch {
	case j.stopBooting: // stopped before its node booted: it keeps what it had
		saved = j.stopProg
	case j.stopLands:
		s.acct.checkpointGPU += j.job.Spec.CheckpointCost * gpuWeight(j)
		if err := j.job.Checkpointed(cluster.Checkpoint{Time: s.now, Step: int64(j.stopProg / time.Second)}); err != nil {
			return fmt.Errorf("sim: %w", err)
		}
		saved = j.stopProg
	default:
		s.acct.lostGPU += j.seg.wall(j.stopLost) * gpuWeight(j)
		s.acct.lossyStops++
	}
	return s.requeue(j, saved)
}

// interrupt ends a job's attempt without warning (its node failed): it
// resumes from its last checkpoint.
func (s *Simulator) interrupt(j *simJob) error {
	saved := j.stopProg - j.stopLost
	if !j.run.Stopping {
		prog, ck, k, writing := j.seg.at(s.now)
		s.acct.checkpointGPU += (time.Duration(k)*j.seg.cost + writing) * gpuWeight(j)
		saved = ck
		j.stopLost = prog - ck
	}
	s.acct.lostGPU += j.seg.wall(j.stopLost) * gpuWeight(j)
	j.epoch++
	return s.requeue(j, saved)
}

func (s *Simulator) requeue(j *simJob, saved time.Duration) error {
	if j.firstWork.After(s.now) {
		j.firstWork = time.Time{} // stopped while its node booted: it has not worked yet
	}
	s.release(j)
	if err := j.job.Transition(cluster.StateQueued, s.now); err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	j.view.Progress, j.view.QueuedSince = saved, s.now
	s.enqueue(j)
	return nil
}

// release frees a job's GPUs and takes it off the running list.
func (s *Simulator) release(j *simJob) {
	held := s.now.Sub(j.run.Started)
	j.held += held
	j.view.AttainedGPU += held * gpuWeight(j)
	j.view.LastRun = held
	s.acct.release(s, j)
	allocs := s.snap.Release(j.job.ID)
	s.free.Release(allocs)
	s.removeRunning(j)
	j.run = executor.RunningJob{Nodes: j.run.Nodes[:0]} // the array for its next attempt
	s.dirty = true
}

// fail takes a node down; its jobs go back to the queue.
func (s *Simulator) fail(i int) error {
	if s.down[i] {
		return nil
	}
	for _, j := range s.jobsOn(i) {
		if err := s.interrupt(j); err != nil {
			return err
		}
	}
	s.setNodeUp(i, false, cluster.NodeFailed)
	s.acct.failures++
	s.ev.push(event{at: s.now.Add(s.cfg.NodeRepair), kind: evRepair, node: i})
	return nil
}

func (s *Simulator) repair(i int) { s.setNodeUp(i, true, cluster.NodeReady) }

// setNodeUp gives node i to training (up: it draws its idle power, takes
// jobs and the planner is called) or takes it away, in state st.
func (s *Simulator) setNodeUp(i int, up bool, st cluster.NodeState) {
	s.acct.nodeState(s, i, up)
	s.down[i] = !up
	s.snap.Nodes[i].State = st
	s.free.SetReady(i, up)
	if up {
		s.dirty = true
	}
}

// jobsOn are the running jobs with a GPU on node i.
func (s *Simulator) jobsOn(i int) []*simJob {
	name := s.snap.Nodes[i].Name
	var on []*simJob
	for k, r := range s.running {
		for _, a := range r.Allocations {
			if a.GPU.Node == name {
				on = append(on, s.runJobs[k])
				break
			}
		}
	}
	return on
}

// gpuWeight is the GPUs a job's time is multiplied by for GPU-time (a
// fractional job counts its share).
func gpuWeight(j *simJob) time.Duration {
	if j.job.Spec.Fractional() {
		return 1 // counted as one GPU; shares are rare in the traces replayed
	}
	return time.Duration(j.gpus)
}

// arrived counts a job's GPUs among the decayed arrivals.
func (s *Simulator) arrived(j *simJob) {
	s.arrivals.Add(s.now, s.now, float64(j.job.Spec.MilliGPUs())/cluster.MilliGPU)
}

// arrivalRate is the GPUs arriving per second lately.
func (s *Simulator) arrivalRate() float64 { return s.arrivals.Rate(s.now) }
