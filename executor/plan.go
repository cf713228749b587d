package executor

import (
	"context"
	"time"

	"github.com/prescient-sched/prescient/cluster"
)

// Forecast is what the planner knows about a job's duration before it ends:
// its P50 and P90 run time (of the whole job, not what remains) and where the
// figures came from ("oracle", "oracle+noise", a model version).
type Forecast struct {
	Job         cluster.JobID
	DurationP50 time.Duration
	DurationP90 time.Duration
	// MemoryP90Bytes is the forecast P90 of the job's peak memory on one
	// GPU; zero when unknown. Placement lets jobs share a GPU only when
	// their footprints fit its memory.
	MemoryP90Bytes int64
	Source         string
}

// Forecaster answers duration forecasts for jobs. The simulator asks it once
// per job when the job is submitted; the predictor, the oracle and test
// fakes implement it.
type Forecaster interface {
	Forecast(ctx context.Context, jobs []*cluster.Job) ([]Forecast, error)
}

// JobView is a job as the planner sees it: the job, its forecast, and the
// service it has had so far.
type JobView struct {
	Job *cluster.Job
	// Unplaceable, when set, says why no node may take the job (a
	// backend's constraints rule every one out): it waits with that
	// reason. (Beside Job: the walk reads it for every job.)
	Unplaceable string
	Forecast    Forecast
	// Progress is the work the job has done that a resume keeps (the progress
	// at its last checkpoint for a queued job; its live progress while it
	// runs).
	Progress time.Duration
	// AttainedGPU is the GPU-time the job has held over all its attempts.
	AttainedGPU time.Duration
	// QueuedSince is when the job last entered the queue.
	QueuedSince time.Time
	// LastRun is how long the job's last attempt held GPUs (zero before its
	// first attempt ends).
	LastRun time.Duration
}

// RemainingP50 is the forecast P50 time the job still needs, at least one
// second; raised for a job with a time limit that has outlived it (see
// Remaining).
func (v *JobView) RemainingP50() time.Duration {
	return Remaining(v.Forecast.DurationP50, v.Progress, v.timeLimit())
}

// RemainingP90 is the forecast P90 time the job still needs, at least one
// second; raised for a job with a time limit that has outlived it (see
// Remaining).
func (v *JobView) RemainingP90() time.Duration {
	return Remaining(v.Forecast.DurationP90, v.Progress, v.timeLimit())
}

// timeLimit is the job's time limit; zero for a view without a job (as
// tests build them).
func (v *JobView) timeLimit() time.Duration {
	if v.Job == nil {
		return 0
	}
	return v.Job.Spec.TimeLimit
}

// RunningJob is a job that holds GPUs.
type RunningJob struct {
	JobView
	Allocations []cluster.Allocation
	// Nodes, when set, holds the place of each allocation's node in
	// PlanInput.Free (Capacity.NodeIndex), index for index with
	// Allocations: a caller that keeps its running jobs across cycles (the
	// simulator) saves the planner a look-up by name for each. A hint only:
	// each is checked against the node's name.
	Nodes []int32
	// Started is when the current attempt started.
	Started time.Time
	// WorkSinceCheckpoint is the GPU-time the job would lose if stopped now.
	WorkSinceCheckpoint time.Duration
	// Stopping is set once the job was told to checkpoint and stop; its GPUs
	// are about to come free.
	Stopping bool
	// Slowdown is the wall time a unit of the job's forecast work takes
	// where it runs (a slower GPU model, a power cap; below 1 on a model
	// faster for the job); 0 or 1: as forecast.
	Slowdown float64
}

// PlanInput is everything the planner reads. It must not be changed while a
// Plan call runs, and the planner changes none of it.
type PlanInput struct {
	Now     time.Time
	Cluster *cluster.Snapshot
	// Free is an index of free GPUs kept in step with Cluster; when nil the
	// planner builds one from Cluster (O(GPUs)).
	Free  *Capacity
	Queue []*JobView
	// QueueSorted says Queue is already in the order's sequence, no key
	// NaN (kept by a SortedQueue); it is honoured only for a StaticOrder or
	// a SteppedOrder. QueueKeys then holds their keys, index for index
	// (SortedQueue.Keys; nil: computed as the jobs are taken), and, for a
	// stepped order, QueueNext the earliest time after Now that a queued
	// job's key changes (SortedQueue.Next; zero: none).
	QueueSorted bool
	QueueKeys   []Key
	QueueNext   time.Time
	Running     []*RunningJob
	// UsageGPU is each tenant's decayed GPU-time, for fair share.
	UsageGPU map[string]time.Duration
	// Waits is each tenant's decayed queueing (job-seconds queued and jobs
	// arrived), for wait fairness; nil leaves it out.
	Waits map[string]TenantWaits
	// Carbon is the grid's carbon intensity, for a policy's Holder; nil
	// when unknown.
	Carbon Carbon
	// NodeMTBF is the mean time between failures of one node; zero means
	// failures are not expected.
	NodeMTBF time.Duration
	// PreemptionRate is the observed (or predicted) preemptions per running
	// job-hour.
	PreemptionRate float64
	// Unexplained leaves the reasons out of the plan, for a caller that
	// reads none (the simulator): no Waiting, placements and preemptions
	// without a Reason. The decisions are the same; the planner saves
	// formatting a reason for every job it considers.
	Unexplained bool
	// Facts, when set, are the Queue's facts (QueueFactsKeeper), so that
	// the cycle need not walk the whole queue for them; nil: it walks.
	Facts *QueueFacts
	// Kept, when set, is the policy's placer's JobKeeper for this replay
	// (KeepingPlacer); nil: the placer reads every job.
	Kept JobKeeper
	// QueueParts, when set, holds each job of Queue's part, index for
	// index (NewQueuedPart with the policy's PartedOrder), kept by the
	// caller while the jobs wait; nil: the planner reads the jobs.
	QueueParts []QueuedPart
	// RunningParts, when set, holds each job of Running's part, index for
	// index (RunningPartedOrder.RunningPart with the policy's order), kept
	// by the caller while the jobs run; nil: the planner reads the jobs.
	RunningParts []any
	// QueueIndex, when set, is the policy's IndexedOrder's index of Queue,
	// kept by the caller while the jobs wait: a cycle takes the jobs from
	// it in order rather than keying each.
	QueueIndex QueueIndex
}

// Plan is data: what to start where, what to stop, and why.
type Plan struct {
	Placements  []Placement
	Preemptions []Preemption
	// Waiting explains why queued jobs did not start, for the first few
	// blocked jobs in queue order.
	Waiting []Decision
	// Deadlines reports, for each queued job with a deadline, whether it can
	// still be met if it started now (by its P90).
	Deadlines []DeadlineReport
	// NextReplan is when the planner wants to be asked again even if nothing
	// happens (a reservation, a queue demotion, a deadline turning urgent);
	// zero means only on events.
	NextReplan time.Time
}

// Placement starts a job on the listed GPU shares.
type Placement struct {
	Job         cluster.JobID
	Allocations []cluster.Allocation
	// CheckpointEvery is the interval at which the job should checkpoint;
	// zero means no periodic checkpoints.
	CheckpointEvery time.Duration
	// PowerCap is the job's GPU power cap (zero: none), from the policy's
	// PowerCapper.
	PowerCap PowerCap
	Reason   string
	Forecast Forecast
}

// Preemption asks a running job to checkpoint and stop: it is stopped once
// the checkpoint lands or at StopBy, whichever comes first.
type Preemption struct {
	Job             cluster.JobID
	For             cluster.JobID // the job that needs its GPUs
	CheckpointFirst bool
	StopBy          time.Time
	// LostGPU is the work (GPU-time) lost if it is stopped without a
	// checkpoint.
	LostGPU time.Duration
	Reason  string
}

// Decision is a reason attached to one job.
type Decision struct {
	Job    cluster.JobID
	Reason string
}

// DeadlineReport says whether a job's deadline can still be met.
type DeadlineReport struct {
	Job      cluster.JobID
	Feasible bool
	// LatestStart is the deadline less the job's remaining P90.
	LatestStart time.Time
}

// Planner turns an input into a plan. Implementations are pure: the same
// input gives the same plan, and nothing is changed or called outside.
type Planner interface {
	Plan(ctx context.Context, in PlanInput) (Plan, error)
}

// Observer is implemented by forecasters that learn from jobs as they
// finish (the predictor's rolling history); the simulator tells them about
// each job it completes, with its true run time.
type Observer interface {
	Observe(j cluster.Job)
}
