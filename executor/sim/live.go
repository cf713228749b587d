package sim

import (
	"fmt"
	"slices"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
)

// Placed is a job that holds GPUs when a replay starts from a live state
// (Config.Start): it keeps its allocations and resumes its work where it
// is.
type Placed struct {
	// Job is the job; its Outcome.RunTime is the work it needs in all (a
	// what-if gives its P50 forecast).
	Job         cluster.Job
	Allocations []cluster.Allocation
	// Started is when its current attempt started, at or before Start.
	Started time.Time
	// Progress is the work it has done by Start.
	Progress time.Duration
	// Forecast is what the planner knows of it.
	Forecast        executor.Forecast
	CheckpointEvery time.Duration
}

// JobOutcome is when one job of a replay first started working (a boot
// after it first held GPUs, when its nodes were parked) and when it
// finished; a zero time means it did not (before Config.Until).
type JobOutcome struct {
	Job   cluster.JobID
	Start time.Time
	End   time.Time
}

// placeRunning puts Config.Running on the fleet at the start.
func (s *Simulator) placeRunning() error {
	for i := range s.cfg.Running {
		if err := s.placeOne(&s.cfg.Running[i]); err != nil {
			return fmt.Errorf("sim: running job %s: %w", s.cfg.Running[i].Job.ID, err)
		}
	}
	if len(s.cfg.Running) > 0 {
		slices.SortStableFunc(s.jobs, func(a, b *simJob) int { return a.job.SubmitTime.Compare(b.job.SubmitTime) })
	}
	return nil
}

func (s *Simulator) placeOne(p *Placed) error {
	if _, dup := s.byID[p.Job.ID]; dup {
		return fmt.Errorf("appears twice")
	}
	if p.Started.After(s.now) {
		return fmt.Errorf("started %s, after the replay's start %s", p.Started.Format(time.RFC3339), s.now.Format(time.RFC3339))
	}
	j := &simJob{truth: p.Job.Outcome.RunTime, gpus: p.Job.Spec.GPUs, qpos: -1, rpos: -1, preplaced: true, firstStart: p.Started, firstWork: p.Started}
	j.job = cluster.NewJob(p.Job.ID, p.Job.Clone().Spec, p.Job.SubmitTime)
	if err := j.job.Transition(cluster.StateRunning, p.Started); err != nil {
		return err
	}
	j.view = executor.JobView{Job: &j.job, Forecast: p.Forecast, Progress: p.Progress}
	j.feasible = j.job.Spec.HasDeadline() && !j.job.Spec.Deadline.Before(s.now.Add(max(j.truth-p.Progress, 0)))
	if err := s.snap.Allocate(j.job.ID, p.Allocations); err != nil {
		return err
	}
	if err := s.free.Allocate(p.Allocations); err != nil {
		return fmt.Errorf("capacity index out of step: %w", err)
	}
	j.run = executor.RunningJob{JobView: j.view, Allocations: s.snap.Allocations(j.job.ID), Started: p.Started}
	s.placeNodes(&j.run)
	j.seg = segment{start: s.now, saved: p.Progress, interval: p.CheckpointEvery, cost: j.job.Spec.CheckpointCost}
	s.addRunning(j)
	if s.kept != nil {
		s.kept.Arrive(&j.view)
	}
	s.acct.allocate(s, j)
	end, _ := j.seg.finish(j.truth)
	s.ev.push(event{at: end, kind: evFinish, job: j, epoch: j.epoch})
	s.jobs = append(s.jobs, j)
	s.byID[j.job.ID] = j
	return nil
}

// outcomes lists every job's first start and end.
func (s *Simulator) outcomes() []JobOutcome {
	out := make([]JobOutcome, len(s.jobs))
	for i, j := range s.jobs {
		out[i] = JobOutcome{Job: j.job.ID, Start: j.firstWork}
		if j.job.State == cluster.StateSucceeded {
			out[i].End = j.job.EndTime
		}
	}
	return out
}
