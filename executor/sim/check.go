package sim

import (
	"fmt"
	"reflect"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/executor/lend"
)

// check verifies the invariants: no GPU beyond its capacity or given twice
// (the snapshot refuses both; here the index must agree with it), every job
// in exactly one of waiting-to-arrive, queue, running or done, matching its
// state.
func (s *Simulator) check() error {
	free := 0
	for i := range s.snap.Nodes {
		n := &s.snap.Nodes[i]
		for g := range n.GPUs {
			ref := cluster.GPURef{Node: n.Name, Index: g}
			sf, cf := s.snap.FreeMilli(ref), s.free.FreeMilli(i, g)
			if sf != cf || sf < 0 || sf > cluster.MilliGPU {
				return fmt.Errorf("%s: snapshot has %d milli free, index %d: %w", ref, sf, cf, ErrInvariant)
			}
			if sf == cluster.MilliGPU && !s.down[i] {
				free++
			}
		}
	}
	if free != s.free.FreeGPUs() {
		return fmt.Errorf("index counts %d free GPUs, snapshot %d: %w", s.free.FreeGPUs(), free, ErrInvariant)
	}
	if err := s.checkLending(); err != nil {
		return err
	}
	queued := map[*executor.JobView]int{}
	q := s.queue
	if s.sorted != nil {
		s.sorted.Advance(s.now) // as the next cycle will: keys are kept as of the last one
		if err := s.sorted.Check(s.now); err != nil {
			return fmt.Errorf("sorted queue: %w: %w", err, ErrInvariant)
		}
		q = s.sorted.Jobs()
	}
	for _, v := range q {
		queued[v]++
	}
	walked, kept := executor.QueueFactsOf(q, s.now), s.facts.Facts(s.now)
	if !kept.Same(&walked) {
		return fmt.Errorf("the queue's facts kept %+v, walked %+v: %w", *kept, walked, ErrInvariant)
	}
	if s.parted != nil {
		if len(s.parts) != len(s.queue) {
			return fmt.Errorf("%d queue parts kept for %d queued jobs: %w", len(s.parts), len(s.queue), ErrInvariant)
		}
		for i, v := range s.queue {
			if want := executor.NewQueuedPart(s.parted, v); !reflect.DeepEqual(s.parts[i], want) {
				return fmt.Errorf("job %s: queue part kept %v, computed %v: %w", v.Job.ID, s.parts[i], want, ErrInvariant)
			}
		}
	}
	in := executor.PlanInput{Now: s.now, Cluster: s.snap, Free: s.free, Queue: s.queue, Running: s.running, UsageGPU: s.usage, Waits: s.waits,
		RunningParts: s.runParts}
	if s.index != nil {
		if err := executor.CheckIndex(s.cfg.Order, s.index, &in); err != nil {
			return fmt.Errorf("%w: %w", err, ErrInvariant)
		}
	}
	if s.runParted != nil {
		if err := executor.CheckRunningParts(s.cfg.Order, &in); err != nil {
			return fmt.Errorf("%w: %w", err, ErrInvariant)
		}
	}
	if s.kept != nil {
		if err := s.kept.Check(&executor.PlanInput{Now: s.now, Queue: q, Running: s.running}); err != nil {
			return fmt.Errorf("%w: %w", err, ErrInvariant)
		}
	}
	for _, j := range s.jobs {
		if n := queued[&j.view]; n > 1 || (n == 1) != (j.qpos >= 0) {
			return fmt.Errorf("job %s is in the queue %d times (position %d): %w", j.job.ID, n, j.qpos, ErrInvariant)
		}
		if err := s.checkJob(j); err != nil {
			return err
		}
	}
	return nil
}

// checkLending verifies the inference nodes: the service's take no
// training (not ready, down) and run none once drained; only lent nodes
// may be ready.
func (s *Simulator) checkLending() error {
	l := s.lend
	if l == nil {
		return nil
	}
	for k, i := range l.nodes {
		name := s.snap.Nodes[i].Name
		switch st := l.state[k]; {
		case st != lend.Lent && (s.free.Ready(i) || !s.down[i]):
			return fmt.Errorf("inference node %s is the service's (%s) but ready %v, down %v: %w", name, st, s.free.Ready(i), s.down[i], ErrInvariant)
		case st == lend.Serving && s.nodeLoad(i) != 0:
			return fmt.Errorf("inference node %s serves the service with %d milli-GPUs of training on it: %w", name, s.nodeLoad(i), ErrInvariant)
		}
	}
	return nil
}

func (s *Simulator) checkJob(j *simJob) error {
	inQ := j.qpos >= 0
	inR := j.rpos >= 0 && j.rpos < len(s.running) && s.running[j.rpos] == &j.run
	holds := len(s.snap.Allocations(j.job.ID)) > 0 || (inR && j.gpus == 0)
	var ok bool
	switch st := j.job.State; {
	case st == cluster.StateQueued:
		ok = !inR && !holds && (inQ || (j.qpos < 0 && (j.unplaceable || j.job.SubmitTime.After(s.now) || j.view.QueuedSince.IsZero())))
	case st.Active():
		ok = inR && !inQ && holds
	case st.Terminal():
		ok = !inQ && !inR && !holds
	}
	if !ok {
		return fmt.Errorf("job %s: state %s, queued %v, running %v, holds GPUs %v: %w", j.job.ID, j.job.State, inQ, inR, holds, ErrInvariant)
	}
	return nil
}
