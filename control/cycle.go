package control

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/control/advice"
	"github.com/prescient-sched/prescient/control/live"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/service"
	"github.com/prescient-sched/prescient/store"
)

// liveState reads the queue, the running jobs with their placements and
// the nodes, and builds the planner's input.
func (p *Plane) liveState(ctx context.Context) (*live.State, error) {
	lv := &live.State{Now: p.cfg.Clock().UTC(), Nodes: p.cfg.Nodes.Nodes(), Placements: map[cluster.JobID]store.Placement{}}
	var err error
	if lv.Queued, err = p.listJobs(ctx, cluster.StateQueued); err != nil {
		return nil, err
	}
	if lv.Active, err = p.listJobs(ctx, cluster.StateRunning, cluster.StateCheckpointing); err != nil {
		return nil, err
	}
	pls, err := p.cfg.Store.Placements(ctx)
	if err != nil {
		return nil, err
	}
	for _, pl := range pls {
		lv.Placements[pl.Job] = pl
	}
	all := append(slices.Clone(lv.Queued), lv.Active...)
	if lv.Forecasts, err = p.forecastsFor(ctx, all); err != nil {
		p.log.Warn("forecasts missing; those jobs are planned on a default", "error", err)
	}
	p.refiner.Refine(ctx, lv)
	p.drainOutOfPlan(lv)
	lv.Snap = cluster.NewSnapshot(&cluster.Fleet{Nodes: lv.Nodes, Tenants: p.tenantsNow()}, lv.Now)
	lv.In = executor.PlanInput{Now: lv.Now, Cluster: lv.Snap, UsageGPU: p.fair.usageNow(lv), Waits: p.fair.waitsNow(lv)}
	waiter, _ := p.cfg.Backend.(executor.Waiter)
	constrainer, _ := p.cfg.Backend.(executor.NodeConstrainer)
	for i := range lv.Queued {
		if waiter != nil && waiter.Waiting(lv.Queued[i].ID) {
			continue // its backend cannot start it yet
		}
		v := p.view(&lv.Queued[i], lv)
		if constrainer != nil {
			constrain(v, constrainer)
		}
		lv.In.Queue = append(lv.In.Queue, v)
	}
	for i := range lv.Active {
		j := &lv.Active[i]
		pl, ok := lv.Placements[j.ID]
		if !ok {
			p.log.Warn("active job without a placement; left out of the plan", "job", j.ID)
			continue
		}
		if err := lv.Snap.Allocate(j.ID, pl.Allocations); err != nil {
			p.log.Warn("running job's GPUs are not in the fleet; left out of the plan", "job", j.ID, "error", err)
			continue
		}
		v := p.view(j, lv)
		if m, ok := p.refiner.Memory(j.ID); ok {
			v.Forecast.MemoryP90Bytes = m // from its memory series so far (the refiner)
		}
		v.Progress = live.SavedProgress(j) + lv.Now.Sub(j.StartTime)
		v.AttainedGPU = (j.Outcome.RunTime + lv.Now.Sub(j.StartTime)) * time.Duration(max(j.Spec.GPUs, 1))
		lv.In.Running = append(lv.In.Running, &executor.RunningJob{JobView: *v, Allocations: lv.Snap.Allocations(j.ID),
			Started: j.StartTime, WorkSinceCheckpoint: j.WorkSinceCheckpoint(lv.Now), Stopping: pl.Stopping()})
	}
	return lv, nil
}

// drainOutOfPlan takes out of the plan the nodes training may not use
// now: the inference nodes not lent (forTraining) and the parked and
// waking nodes. They are drained: what runs there stays until it is
// stopped.
func (p *Plane) drainOutOfPlan(lv *live.State) {
	if p.cfg.Lending == nil && p.cfg.Parking == nil {
		return
	}
	lv.Nodes = slices.Clone(lv.Nodes) // the node source's own, shared
	for i := range lv.Nodes {
		if n := &lv.Nodes[i]; n.State != cluster.NodeFailed && (!p.lending.ForTraining(n, lv.Now) || p.parking.Drained(n.Name)) {
			n.State = cluster.NodeDrained
		}
	}
}

// defaultForecast stands in for a job the forecaster could not answer.
const defaultForecast = time.Hour

// view is a job as the planner sees it. Its QueuedSince is its submit time
// plus the time its earlier attempts ran: a requeued job has waited now −
// QueuedSince in all (gaps between attempts counted as one), so a job that
// ran for days before a preemption is not starving the moment it is back.
func (p *Plane) view(j *cluster.Job, lv *live.State) *executor.JobView {
	f, ok := lv.Forecasts[j.ID]
	if !ok {
		f = executor.Forecast{Job: j.ID, DurationP50: defaultForecast, DurationP90: 2 * defaultForecast, Source: "default"}
	}
	return &executor.JobView{Job: j, Forecast: f, Progress: live.SavedProgress(j),
		AttainedGPU: j.Outcome.RunTime * time.Duration(max(j.Spec.GPUs, 1)), QueuedSince: j.SubmitTime.Add(j.Outcome.RunTime)}
}

// constrain puts the backend's node constraints on the planner's view of
// a queued job: its copy of the job may use the nodes allowed only, its
// tasks apart or few to a node where they must be, with its preferences
// among the nodes,
// and one no node may take says why.
func constrain(v *executor.JobView, c executor.NodeConstrainer) {
	nodes, why, constrained := c.AllowedNodes(v.Job.ID)
	var apart bool
	var perNode map[string]int
	if v.Job.Spec.GangSize > 1 {
		apart, perNode = c.TaskLimits(v.Job.ID)
	}
	var prefs map[string]float64
	if !constrained || len(nodes) > 0 {
		prefs = c.NodePreferences(v.Job.ID)
	}
	if !constrained && !apart && perNode == nil && prefs == nil {
		return
	}
	j := *v.Job
	j.Spec.TasksApart, j.Spec.TasksPerNode, j.Spec.NodePreference = apart, perNode, prefs
	if constrained {
		j.Spec.Nodes = nodes
		if j.Spec.Nodes == nil {
			j.Spec.Nodes = []string{}
		}
	}
	v.Job = &j
	if constrained && len(nodes) == 0 {
		v.Unplaceable = why
	}
}

// cycle is steps 3 and 4 of Run: plan on the live state and act on the
// plan, calling each concern's hook in this order:
//
//  1. lending applies the loans its last read decided, and parking
//     settles the nodes' power (programs that ended, nodes seen up or
//     down): both change which nodes the plan may use, so they come
//     before the live state is read;
//  2. the live state is read (the nodes training may not use drained;
//     the memory refinement starts beside the loop);
//  3. the jobs whose stop is due, and those on inference nodes lending
//     takes back, are stopped before the plan, which then sees them
//     stopping;
//  4. the planner plans; autopilot carries the plan out, the advisor
//     recommends it;
//  5. idle jobs recommend on their last read and start the next;
//  6. parking decides on this plan: the parked nodes the jobs it left
//     waiting need, the empty nodes that are spare;
//  7. lending starts its next read of the pools, whatever the planner
//     answered.
func (p *Plane) cycle(ctx context.Context) {
	defer p.changedState() // its starts and stops change the live state
	start := time.Now()
	// 1.
	p.lending.Apply(ctx, p.cfg.Clock().UTC())
	p.parking.Settle(ctx, p.cfg.Clock().UTC())
	// 2.
	lv, err := p.liveState(ctx)
	if err != nil {
		p.log.Error("plan cycle: reading the live state failed", "error", err)
		return
	}
	defer p.lending.Watch(ctx, lv) // 7.
	// 3.
	p.enforceStops(ctx, lv)
	for _, pr := range p.lending.Reclaim(ctx, lv) {
		if err := p.preempt(ctx, lv, pr); err != nil {
			p.log.Error("lending: a job on a node taken back was not stopped", "job", pr.Job, "error", err)
		}
	}
	// 4.
	plan, err := p.planner.Plan(ctx, lv.In)
	if err != nil {
		p.log.Error("plan cycle: the planner failed", "error", err)
		return
	}
	p.remember(lv, plan)
	mode := p.Mode()
	if mode == service.ModeAutopilot {
		p.act(ctx, lv, plan)
	} else {
		p.recommend(ctx, lv, plan)
	}
	// 5.
	p.idleJobs.Recommend(ctx, lv)
	p.idleJobs.Watch(ctx, lv)
	// 6.
	p.parking.Decide(ctx, lv, plan)
	p.log.Debug("plan cycle", "mode", mode, "queued", len(lv.Queued), "running", len(lv.In.Running),
		"placements", len(plan.Placements), "preemptions", len(plan.Preemptions), "took_s", time.Since(start).Seconds())
}

// remember keeps the plan's reasons and deadline reports for the API.
func (p *Plane) remember(lv *live.State, plan executor.Plan) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lastPlan = lv.Now
	p.quotaUse = quotaUsage(lv)
	p.runningBy = map[string]int{}
	for _, r := range lv.In.Running {
		if !r.Stopping {
			p.runningBy[r.Job.Spec.Tenant]++
		}
	}
	for _, d := range plan.Waiting {
		p.reasons[d.Job] = d.Reason
	}
	for _, pl := range plan.Placements {
		p.reasons[pl.Job] = pl.Reason
	}
	for _, d := range plan.Deadlines {
		p.deadlines[d.Job] = d
	}
}

// act is autopilot: each step is recorded in the store before the backend
// is asked, so that a crash in between is repaired by recover (a start is
// resent; the backend starts each attempt once).
func (p *Plane) act(ctx context.Context, lv *live.State, plan executor.Plan) {
	for _, pr := range plan.Preemptions {
		if err := p.preempt(ctx, lv, pr); err != nil {
			p.log.Error("preemption failed", "job", pr.Job, "for", pr.For, "error", err)
		}
	}
	for _, pl := range plan.Placements {
		if err := p.start(ctx, pl); err != nil {
			p.log.Error("start failed", "job", pl.Job, "error", err)
		}
	}
}

func (p *Plane) start(ctx context.Context, pl executor.Placement) error {
	var opts []store.StartOption
	if !pl.PowerCap.Uncapped() {
		opts = append(opts, store.WithPowerLimit(pl.PowerCap.Fraction))
	}
	j, placed, err := p.cfg.Store.StartJob(ctx, pl.Job, pl.Allocations, pl.CheckpointEvery, pl.Reason, opts...)
	if err != nil {
		return err
	}
	p.notify(ctx, store.EventStarted, j, pl.Reason)
	if err := p.sendStart(ctx, &j, placed); err != nil {
		if ctx.Err() != nil {
			return nil // shutting down: whether it started is for recover to settle
		}
		return p.startRefused(ctx, j.ID, placed.Attempt, failStartRefused, err)
	}
	return nil
}

// startRefused puts back in the queue a job whose start the backend
// refused, or fails it once the backend refused MaxFailedStarts of its
// starts: a job it can never start must not be started and requeued
// forever. A node not ready yet (executor.ErrNodeNotReady) and a plan
// overtaken by the fleet (executor.ErrPlanStale) are not the job's fault,
// and do not count.
func (p *Plane) startRefused(ctx context.Context, id cluster.JobID, attempt int, what string, refusal error) error {
	msg := what + ": " + refusal.Error()
	if errors.Is(refusal, executor.ErrNodeNotReady) || errors.Is(refusal, executor.ErrPlanStale) {
		return p.requeue(ctx, id, attempt, store.EventRequeued, msg)
	}
	evs, err := p.cfg.Store.Events(ctx, id)
	if err != nil {
		return err
	}
	n := 1
	for _, e := range evs {
		if e.Type == store.EventStartFailed {
			n++
		}
	}
	if n < p.cfg.MaxFailedStarts {
		return p.requeue(ctx, id, attempt, store.EventStartFailed, fmt.Sprintf("%s (failed start %d; the job fails at %d)", msg, n, p.cfg.MaxFailedStarts))
	}
	if _, ok, err := p.current(ctx, id, attempt); err != nil || !ok {
		return err
	}
	p.log.Warn("job failed: the backend refused its every start", "job", id, "failed_starts", n, "error", refusal)
	return p.transition(ctx, id, cluster.StateFailed, store.EventFailed, fmt.Sprintf("%s (failed start %d, the last allowed)", msg, n))
}

func (p *Plane) preempt(ctx context.Context, lv *live.State, pr executor.Preemption) error {
	var job *cluster.Job
	for i := range lv.Active {
		if lv.Active[i].ID == pr.Job {
			job = &lv.Active[i]
		}
	}
	if job == nil {
		return fmt.Errorf("not running")
	}
	checkpoint := pr.CheckpointFirst && job.Spec.Checkpointable
	stopBy := pr.StopBy
	if !checkpoint || stopBy.IsZero() {
		stopBy = lv.Now
	}
	j, err := p.cfg.Store.RequestStop(ctx, pr.Job, stopBy, stopPreempt+pr.Reason, checkpoint)
	if err != nil {
		return err
	}
	if !checkpoint {
		return p.sendStop(ctx, pr.Job)
	}
	p.notify(ctx, store.EventCheckpointRequested, j, pr.Reason)
	return p.cfg.Backend.Checkpoint(ctx, pr.Job)
}

// sendStop asks the backend to stop a job. enforceStops asks again at
// every cycle until the exit arrives; backends answer a stop of a job that
// has ended with nil.
func (p *Plane) sendStop(ctx context.Context, id cluster.JobID) error {
	return p.cfg.Backend.Stop(ctx, id, p.grace)
}

// enforceStops stops the jobs being stopped whose time is up (a
// checkpoint that did not land by StopBy, or a restart that lost the
// request).
func (p *Plane) enforceStops(ctx context.Context, lv *live.State) {
	for _, pl := range lv.Placements {
		if pl.Stopping() && !lv.Now.Before(pl.StopBy) {
			if err := p.sendStop(ctx, pl.Job); err != nil {
				p.log.Error("stop failed", "job", pl.Job, "error", err)
			}
		}
	}
}

// recommend is advisor: it records each decision of the plan as a
// recommendation, once while it stays the same, and dismisses the open
// ones the plan no longer makes (the job started, ended, or is now
// recommended elsewhere). Idle recommendations are recommendIdle's.
func (p *Plane) recommend(ctx context.Context, lv *live.State, plan executor.Plan) {
	current := map[string]bool{}
	for _, pr := range plan.Preemptions {
		p.advice.Add(ctx, lv.Now, current, advice.Preempt, pr.Job, pr.Reason, advice.Details{For: string(pr.For), StopBy: pr.StopBy,
			LostGPUS: pr.LostGPU.Seconds(), CheckpointFirst: pr.CheckpointFirst})
	}
	for _, pl := range plan.Placements {
		p.advice.Add(ctx, lv.Now, current, advice.Start, pl.Job, pl.Reason, advice.Details{Placement: gpuNames(pl.Allocations),
			CheckpointEveryS: pl.CheckpointEvery.Seconds(), DurationP50S: apiSeconds(pl.Forecast.DurationP50),
			DurationP90S: apiSeconds(pl.Forecast.DurationP90), ForecastSource: pl.Forecast.Source})
	}
	p.advice.Dismiss(ctx, current, advice.Start, advice.Preempt)
}

// gpuNames names allocations as "node/gpuN".
func gpuNames(allocs []cluster.Allocation) []string {
	out := make([]string, len(allocs))
	for i, a := range allocs {
		out[i] = a.GPU.String()
	}
	return out
}
