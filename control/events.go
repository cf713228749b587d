package control

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/store"
)

// Stop reasons recorded in a placement say what an exit after a stop means.
const (
	stopPreempt = "preempt: "
	stopCancel  = "cancel: "
)

// How a failure's message begins, by its cause: the metrics count
// failures by it (jobMetrics).
const (
	failExitCode     = "exited with code"              // the job's own exit
	failStartRefused = "the backend refused the start" // MaxFailedStarts refusals
)

// How often apply tries an event the store refused because another process
// held the database's write lock (store.IsBusy), and its first wait between
// tries (doubled each time). An event is the only record of what happened
// on a node: dropping it at the first refusal would leave, say, a finished
// job running in the store.
const (
	applyTries   = 5
	applyBackoff = 200 * time.Millisecond
)

// apply is step 2: it records what the backend saw in the store. An event
// about an attempt other than the one the store says runs is stale and
// changes nothing (a start of such an attempt is stopped). An event the
// busy store refused is tried again (each step of it is idempotent).
func (p *Plane) apply(ctx context.Context, e executor.JobEvent) {
	defer p.changedState()
	err := p.applyOnce(ctx, e)
	for try, wait := 1, applyBackoff; err != nil && store.IsBusy(err) && try < applyTries && ctx.Err() == nil; try, wait = try+1, 2*wait {
		p.log.Warn("backend event not applied yet: the database is busy; trying again", "type", e.Type, "job", e.Job,
			"attempt", e.Attempt, "node", e.Node, "wait", wait, "error", err)
		select {
		case <-ctx.Done():
		case <-time.After(wait):
			err = p.applyOnce(ctx, e)
		}
	}
	if err != nil {
		p.log.Error("backend event not applied", "type", e.Type, "job", e.Job, "attempt", e.Attempt, "node", e.Node, "error", err)
	}
}

func (p *Plane) applyOnce(ctx context.Context, e executor.JobEvent) error {
	switch e.Type {
	case executor.JobStarted, executor.JobCheckpointed, executor.JobExited, executor.JobLost:
		if elsewhere, err := p.placedElsewhere(ctx, e); err != nil || elsewhere {
			return err
		}
	}
	var err error
	switch e.Type {
	case executor.JobStarted:
		err = p.started(ctx, e)
	case executor.JobCheckpointed:
		err = p.checkpointed(ctx, e)
	case executor.JobExited:
		err = p.exited(ctx, e)
	case executor.JobLost:
		msg := "lost on node " + e.Node
		if e.Message != "" {
			msg += ": " + e.Message
		}
		err = p.requeue(ctx, e.Job, e.Attempt, store.EventRequeued, msg)
	case executor.NodeSynced:
		p.mu.Lock()
		delete(p.silent, e.Node)
		p.mu.Unlock()
		err = p.synced(ctx, e)
	case executor.NodeSilent:
		// Its jobs may still run: they are requeued only if it stays
		// silent for NodeLostAfter (requeueSilentNodes).
		p.mu.Lock()
		if _, ok := p.silent[e.Node]; !ok {
			p.silent[e.Node] = p.cfg.Clock()
		}
		p.mu.Unlock()
		p.log.Warn("node silent: its jobs are requeued if it stays away", "node", e.Node, "after", p.cfg.NodeLostAfter)
	default:
		err = fmt.Errorf("unknown event type %q", e.Type)
	}
	return err
}

// current returns the placement of the attempt the event is about; ok is
// false when the store says another attempt (or none) runs.
func (p *Plane) current(ctx context.Context, job cluster.JobID, attempt int) (store.Placement, bool, error) {
	pl, err := p.cfg.Store.GetPlacement(ctx, job)
	if errors.Is(err, store.ErrNotFound) {
		return store.Placement{}, false, nil
	}
	if err != nil {
		return store.Placement{}, false, err
	}
	return pl, pl.Attempt == attempt, nil
}

// placedElsewhere reports, and logs, an event from a node about the
// attempt the store runs on other nodes: a node speaks only of its own
// work, whatever its backend let through.
func (p *Plane) placedElsewhere(ctx context.Context, e executor.JobEvent) (bool, error) {
	if e.Node == "" {
		return false, nil
	}
	pl, ok, err := p.current(ctx, e.Job, e.Attempt)
	if err != nil || !ok || onNode(pl.Allocations, e.Node) {
		return false, err
	}
	p.log.Warn("backend event refused: its node does not run the attempt", "type", e.Type, "job", e.Job,
		"attempt", e.Attempt, "node", e.Node)
	return true, nil
}

// stopStale stops an attempt the store does not run, through the
// backend's StopAttempt where it has one (Stop stops the newest attempt,
// which may be the one the store runs).
func (p *Plane) stopStale(ctx context.Context, job cluster.JobID, attempt int) error {
	if s, ok := p.cfg.Backend.(executor.AttemptStopper); ok {
		return s.StopAttempt(ctx, job, attempt, p.grace)
	}
	return p.cfg.Backend.Stop(ctx, job, p.grace)
}

func (p *Plane) started(ctx context.Context, e executor.JobEvent) error {
	_, ok, err := p.current(ctx, e.Job, e.Attempt)
	if err != nil {
		return err
	}
	if !ok {
		p.log.Warn("an attempt the store does not run started; stopping it", "job", e.Job, "attempt", e.Attempt, "node", e.Node)
		return p.stopStale(ctx, e.Job, e.Attempt)
	}
	return p.cfg.Store.ConfirmPlacement(ctx, e.Job, e.Attempt)
}

func (p *Plane) checkpointed(ctx context.Context, e executor.JobEvent) error {
	pl, ok, err := p.current(ctx, e.Job, e.Attempt)
	if err != nil || !ok || e.Checkpoint == nil {
		return err
	}
	cp := *e.Checkpoint
	j, err := p.cfg.Store.UpdateJob(ctx, e.Job, func(j *cluster.Job) (store.EventType, string, error) {
		return store.EventCheckpointed, fmt.Sprintf("step %d at %s", cp.Step, cp.Path), j.Checkpointed(cp)
	})
	if err != nil {
		return err
	}
	p.notify(ctx, store.EventCheckpointed, j, "")
	if pl.Stopping() {
		// The preempted job's checkpoint landed: stop it now.
		return p.cfg.Backend.Stop(ctx, e.Job, p.grace)
	}
	return nil
}

func (p *Plane) exited(ctx context.Context, e executor.JobEvent) error {
	pl, ok, err := p.current(ctx, e.Job, e.Attempt)
	if err != nil || !ok {
		return err
	}
	switch {
	case e.Stopped && strings.HasPrefix(pl.StopReason, stopCancel):
		return p.transition(ctx, e.Job, cluster.StateCancelled, store.EventCancelled, strings.TrimPrefix(pl.StopReason, stopCancel))
	case e.Stopped:
		msg := strings.TrimPrefix(pl.StopReason, stopPreempt)
		if msg == "" {
			msg = "stopped by the backend"
		}
		return p.requeue(ctx, e.Job, e.Attempt, store.EventPreempted, msg)
	}
	typ, to, msg := store.EventFinished, cluster.StateSucceeded, "exited 0"
	if e.ExitCode != 0 {
		typ, to, msg = store.EventFailed, cluster.StateFailed, fmt.Sprintf("%s %d", failExitCode, e.ExitCode)
		if e.Message != "" {
			msg += ": " + e.Message
		}
	}
	j, err := p.cfg.Store.UpdateJob(ctx, e.Job, func(j *cluster.Job) (store.EventType, string, error) {
		j.Outcome.ExitCode = e.ExitCode
		return typ, msg, j.Transition(to, p.cfg.Clock())
	})
	if err != nil {
		return err
	}
	p.forget(e.Job)
	if o, ok := p.cfg.Forecaster.(executor.Observer); ok {
		o.Observe(j) // the forecasts' history learns the outcome before the next retraining
	}
	p.notify(ctx, typ, j, msg)
	return nil
}

// transition moves a job to a terminal state and tells the notifier.
func (p *Plane) transition(ctx context.Context, id cluster.JobID, to cluster.JobState, typ store.EventType, msg string) error {
	j, err := p.cfg.Store.UpdateJob(ctx, id, func(j *cluster.Job) (store.EventType, string, error) {
		return typ, msg, j.Transition(to, p.cfg.Clock())
	})
	if err != nil {
		return err
	}
	p.forget(id)
	p.notify(ctx, typ, j, msg)
	return nil
}

// requeue puts an active job back in the queue (to resume from its last
// checkpoint) if attempt is the one that runs.
func (p *Plane) requeue(ctx context.Context, id cluster.JobID, attempt int, typ store.EventType, msg string) error {
	_, ok, err := p.current(ctx, id, attempt)
	if err != nil || !ok {
		return err
	}
	j, err := p.cfg.Store.UpdateJob(ctx, id, func(j *cluster.Job) (store.EventType, string, error) {
		return typ, msg, j.Transition(cluster.StateQueued, p.cfg.Clock())
	})
	if err != nil {
		return err
	}
	p.notify(ctx, typ, j, msg)
	return nil
}

// synced reconciles a node's list of running attempts with the store: the
// node's list wins. An attempt the store runs there but the node does not
// list was lost; one the node lists but the store does not run there is
// stopped.
func (p *Plane) synced(ctx context.Context, e executor.JobEvent) error {
	listed := map[executor.RunningAttempt]bool{}
	for _, r := range e.Running {
		listed[r] = true
	}
	placements, err := p.cfg.Store.Placements(ctx)
	if err != nil {
		return err
	}
	expected := map[executor.RunningAttempt]bool{}
	var errs []error
	for _, pl := range placements {
		if !onNode(pl.Allocations, e.Node) {
			continue
		}
		ra := executor.RunningAttempt{Job: pl.Job, Attempt: pl.Attempt}
		expected[ra] = true
		if listed[ra] {
			if !pl.Confirmed {
				errs = append(errs, p.cfg.Store.ConfirmPlacement(ctx, pl.Job, pl.Attempt))
			}
			continue
		}
		if !pl.Confirmed && p.startedAfter(ctx, pl.Job, e.Time) {
			// Recorded after the node's list was taken (a plan ran between
			// the agent's registration and this event): the list cannot
			// know it; the node's started event confirms it.
			continue
		}
		msg := fmt.Sprintf("node %s does not run attempt %d", e.Node, pl.Attempt)
		if pl.Stopping() {
			// It was being stopped, and it is: the stop is done.
			errs = append(errs, p.exited(ctx, executor.JobEvent{Job: pl.Job, Attempt: pl.Attempt, Stopped: true, Node: e.Node}))
			continue
		}
		p.log.Warn("reconcile: job lost", "job", pl.Job, "attempt", pl.Attempt, "node", e.Node)
		errs = append(errs, p.requeue(ctx, pl.Job, pl.Attempt, store.EventRequeued, msg))
	}
	current := map[cluster.JobID]int{} // the attempt the store runs of each job placed
	for _, pl := range placements {
		current[pl.Job] = pl.Attempt
	}
	var ad *adoption // read once, when the first attempt may be adopted
	for _, r := range e.Running {
		if expected[r] {
			continue
		}
		if att, ok := current[r.Job]; ok && att == r.Attempt {
			p.log.Warn("reconcile: node lists an attempt that runs on other nodes; ignored", "job", r.Job,
				"attempt", r.Attempt, "node", e.Node)
			continue
		}
		allocs := e.Holdings[r]
		if all, ok := p.syncHoldings[r]; ok {
			allocs = all // every node's share of it
		}
		if len(allocs) > 0 && ad == nil {
			if ad, err = p.newAdoption(ctx); err != nil {
				return errors.Join(append(errs, err)...)
			}
		}
		if len(allocs) > 0 {
			adopted, err := p.adopt(ctx, ad, e.Node, r, allocs)
			if err != nil {
				errs = append(errs, err)
			}
			if adopted || err != nil {
				continue
			}
		}
		p.log.Warn("reconcile: node runs an attempt the store does not; stopping it", "job", r.Job, "attempt", r.Attempt, "node", e.Node)
		errs = append(errs, p.stopStale(ctx, r.Job, r.Attempt))
	}
	return errors.Join(errs...)
}

// adopt takes over an attempt the backend says runs, with the GPUs it
// holds, when the store has its job queued and at an earlier attempt: a
// control plane that took over from another replica (with another store)
// keeps what the API server says runs instead of stopping it. It reports
// whether it adopted; an allocation that does not fit the fleet as the
// plane knows it, or a job the store does not have queued, is not adopted.
func (p *Plane) adopt(ctx context.Context, ad *adoption, node string, r executor.RunningAttempt, allocs []cluster.Allocation) (bool, error) {
	j, err := p.cfg.Store.GetJob(ctx, r.Job)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if r.Attempt <= j.Attempts {
		return false, nil
	}
	if j.State.Active() {
		// The store runs an earlier attempt (elsewhere, as far as this
		// node's list goes): the backend's later one wins.
		old, err := p.cfg.Store.GetPlacement(ctx, r.Job)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return false, err
		}
		if err := p.requeue(ctx, r.Job, j.Attempts, store.EventRequeued,
			fmt.Sprintf("superseded: node %s runs attempt %d", node, r.Attempt)); err != nil {
			return false, err
		}
		if j, err = p.cfg.Store.GetJob(ctx, r.Job); err != nil {
			return false, err
		}
		if !j.State.Active() {
			ad.release(old.Allocations)
		}
	}
	if j.State != cluster.StateQueued {
		return false, nil
	}
	allocs = ad.freeIndices(allocs)
	if err := ad.fits(allocs); err != nil {
		p.log.Warn("reconcile: a running attempt not adopted", "job", r.Job, "attempt", r.Attempt, "node", node, "error", err)
		return false, nil
	}
	msg := fmt.Sprintf("adopted: node %s runs attempt %d", node, r.Attempt)
	j, err = p.cfg.Store.AdoptJob(ctx, r.Job, r.Attempt, allocs, msg)
	if err != nil {
		return false, err
	}
	ad.take(allocs)
	p.log.Info("reconcile: running attempt adopted", "job", r.Job, "attempt", r.Attempt, "node", node, "gpus", len(allocs))
	p.notify(ctx, store.EventStarted, j, msg)
	return true, nil
}

// startedAfter reports whether the job's current attempt was recorded as
// started after t (false when t is zero or the job is unreadable).
func (p *Plane) startedAfter(ctx context.Context, id cluster.JobID, t time.Time) bool {
	if t.IsZero() {
		return false
	}
	j, err := p.cfg.Store.GetJob(ctx, id)
	return err == nil && j.StartTime.After(t)
}

// forget drops what the plane remembers of a job that is done.
func (p *Plane) forget(id cluster.JobID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.forecasts, id)
	delete(p.reasons, id)
	delete(p.deadlines, id)
}

// onNode reports whether any of allocs is on node.
func onNode(allocs []cluster.Allocation, node string) bool {
	for _, a := range allocs {
		if a.GPU.Node == node {
			return true
		}
	}
	return false
}

// requeueSilentNodes gives the jobs of every node silent for NodeLostAfter
// back to the queue, to resume from their last checkpoint elsewhere. If the
// node comes back still running them, its NodeSynced stops them (the
// store no longer runs them there).
func (p *Plane) requeueSilentNodes(ctx context.Context) {
	now := p.cfg.Clock()
	p.mu.Lock()
	var lost []string
	for node, since := range p.silent {
		if now.Sub(since) >= p.cfg.NodeLostAfter {
			lost = append(lost, node)
			delete(p.silent, node)
		}
	}
	p.mu.Unlock()
	if len(lost) == 0 {
		return
	}
	placements, err := p.cfg.Store.Placements(ctx)
	if err != nil {
		p.log.Error("requeue the jobs of silent nodes", "nodes", lost, "error", err)
		return
	}
	for _, node := range lost {
		for _, pl := range placements {
			if !onNode(pl.Allocations, node) {
				continue
			}
			msg := fmt.Sprintf("node %s silent for %s", node, p.cfg.NodeLostAfter)
			p.log.Warn("requeueing the job of a silent node", "job", pl.Job, "attempt", pl.Attempt, "node", node)
			if err := p.requeue(ctx, pl.Job, pl.Attempt, store.EventRequeued, msg); err != nil {
				p.log.Error("requeue", "job", pl.Job, "error", err)
			}
		}
	}
}

// adoption is what adopting the attempts of a sync needs of the fleet,
// read once per sync: the GPUs the store's placements hold and each
// node's GPU count, kept up to date as attempts are adopted.
type adoption struct {
	used map[cluster.GPURef]bool
	gpus map[string]int
}

func (p *Plane) newAdoption(ctx context.Context) (*adoption, error) {
	pls, err := p.cfg.Store.Placements(ctx)
	if err != nil {
		return nil, err
	}
	ad := &adoption{used: map[cluster.GPURef]bool{}, gpus: map[string]int{}}
	for _, pl := range pls {
		ad.take(pl.Allocations)
	}
	for _, n := range p.cfg.Nodes.Nodes() {
		ad.gpus[n.Name] = len(n.GPUs)
	}
	return ad, nil
}

// take marks allocations' GPUs held; release frees them.
func (ad *adoption) take(allocs []cluster.Allocation) {
	for _, a := range allocs {
		ad.used[a.GPU] = true
	}
}

func (ad *adoption) release(allocs []cluster.Allocation) {
	for _, a := range allocs {
		delete(ad.used, a.GPU)
	}
}

// fits checks that every allocation names a GPU of a node the plane's
// node source has.
func (ad *adoption) fits(allocs []cluster.Allocation) error {
	for _, a := range allocs {
		n, ok := ad.gpus[a.GPU.Node]
		if !ok {
			return fmt.Errorf("%s: no such node", a.GPU)
		}
		if a.GPU.Index < 0 || a.GPU.Index >= n || a.Milli < 1 || a.Milli > cluster.MilliGPU {
			return fmt.Errorf("%s (%d milli-GPUs): not a GPU share of the node's %d GPUs", a.GPU, a.Milli, n)
		}
	}
	return nil
}

// freeIndices moves adopted allocations off the GPU indices held on their
// node, to the lowest ones free: a backend that reports holdings numbers
// its GPUs itself (the device plugin, not the scheduler, picks a pod's
// devices), so only the count on each node is its word.
func (ad *adoption) freeIndices(allocs []cluster.Allocation) []cluster.Allocation {
	mine := map[cluster.GPURef]bool{} // this attempt's, as moved so far
	used := func(g cluster.GPURef) bool { return ad.used[g] || mine[g] }
	out := make([]cluster.Allocation, len(allocs))
	next := map[string]int{}
	for i, a := range allocs {
		if used(a.GPU) {
			for used(cluster.GPURef{Node: a.GPU.Node, Index: next[a.GPU.Node]}) {
				next[a.GPU.Node]++
			}
			a.GPU.Index = next[a.GPU.Node]
		}
		mine[a.GPU] = true
		out[i] = a
	}
	return out
}
