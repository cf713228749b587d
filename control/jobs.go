package control

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"sort"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/control/live"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/service"
	"github.com/prescient-sched/prescient/store"
)

// DefaultJobsLimit is how many jobs Jobs lists when the query says 0.
const DefaultJobsLimit = service.DefaultJobsLimit

// Submit implements Service.
func (p *Plane) Submit(ctx context.Context, req service.SubmitRequest) (service.JobStatus, error) {
	spec, err := p.checkSpec(req.Spec, "spec")
	if err != nil {
		return service.JobStatus{}, err
	}
	if err := p.checkRun(req.Command, req.Env); err != nil {
		return service.JobStatus{}, err
	}
	id := req.ID
	if id == "" {
		id = newJobID()
	}
	job := cluster.NewJob(id, spec, p.cfg.Clock())
	sub := store.Submission{Job: job, Run: store.RunSpec{Command: req.Command, Env: req.Env}}
	// The forecast is stored with the job, in its transaction: one fsync.
	fc, fcErr := p.cfg.Forecaster.Forecast(ctx, []*cluster.Job{&job})
	if fcErr == nil && (len(fc) != 1 || fc[0].Job != id) {
		fcErr = fmt.Errorf("%d forecasts for one job", len(fc))
	}
	if fcErr == nil {
		f := storedForecast(fc[0])
		sub.Forecast = &f
	}
	err = p.cfg.Store.Submit(ctx, sub)
	if errors.Is(err, store.ErrExists) {
		return p.resubmitted(ctx, job, req)
	}
	if err != nil {
		return service.JobStatus{}, fmt.Errorf("submit %s: %w", id, err)
	}
	p.notify(ctx, store.EventSubmitted, job, "")
	if fcErr != nil {
		p.log.Warn("no forecast for a submitted job", "job", id, "error", fcErr)
	} else {
		p.mu.Lock()
		p.forecasts[id] = fc[0]
		p.mu.Unlock()
	}
	p.wake()
	return p.status(ctx, job)
}

// resubmitted answers a submission whose ID is stored: the stored job when
// it is the same, ErrConflict when not.
func (p *Plane) resubmitted(ctx context.Context, job cluster.Job, req service.SubmitRequest) (service.JobStatus, error) {
	stored, err := p.cfg.Store.GetJob(ctx, job.ID)
	if err != nil {
		return service.JobStatus{}, fmt.Errorf("submit %s: %w", job.ID, err)
	}
	run, err := p.cfg.Store.GetRun(ctx, job.ID)
	if err != nil {
		return service.JobStatus{}, fmt.Errorf("submit %s: %w", job.ID, err)
	}
	if !sameSpec(stored.Spec, job.Spec) || !slices.Equal(run.Command, req.Command) || !maps.Equal(run.Env, req.Env) {
		return service.JobStatus{}, fmt.Errorf("job %s exists with another spec: %w", job.ID, service.ErrConflict)
	}
	return p.status(ctx, stored)
}

func sameSpec(a, b cluster.JobSpec) bool {
	norm := func(s cluster.JobSpec) cluster.JobSpec {
		if len(s.GPUModels) == 0 {
			s.GPUModels = nil
		}
		if len(s.Labels) == 0 {
			s.Labels = nil
		}
		if d := s.Data; d != nil {
			c := *d
			if len(c.Nodes) == 0 {
				c.Nodes = nil
			}
			if len(c.Racks) == 0 {
				c.Racks = nil
			}
			s.Data = &c
		}
		s.Deadline = s.Deadline.UTC()
		return s
	}
	return reflect.DeepEqual(norm(a), norm(b))
}

// checkSpec validates a submitted spec (field names under prefix) and
// fills the defaults: a whole GPU share for GPU jobs.
func (p *Plane) checkSpec(s cluster.JobSpec, prefix string) (cluster.JobSpec, error) {
	s = cloneSpec(s)
	if s.GPUs > 0 && s.GPUMilli == 0 {
		s.GPUMilli = cluster.MilliGPU
	}
	var errs []error
	if s.Tenant == "" {
		errs = append(errs, fmt.Errorf("%s.tenant: empty", prefix))
	}
	if err := s.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", prefix, err))
	}
	if s.GPUs == 0 {
		errs = append(errs, fmt.Errorf("%s.gpus: 0; a job needs at least one GPU (gpu_milli asks for a share of one)", prefix))
	}
	if s.GangSize > 1 && s.GPUs > 0 && s.GPUs%s.GangSize != 0 {
		errs = append(errs, fmt.Errorf("%s.gang_size: %d does not divide gpus %d", prefix, s.GangSize, s.GPUs))
	}
	if y := s.Deadline.Year(); !s.Deadline.IsZero() && (y < minDeadlineYear || y > maxDeadlineYear) {
		errs = append(errs, fmt.Errorf("%s.deadline: %s is outside the years %d to %d", prefix, s.Deadline.Format(time.RFC3339), minDeadlineYear, maxDeadlineYear))
	}
	if err := cluster.FitsFleet(p.cfg.Nodes.Nodes(), s); err != nil {
		errs = append(errs, fmt.Errorf("%s.%w", prefix, err))
	}
	for _, t := range p.tenantsNow() {
		if t.Name == s.Tenant && !t.AllowsTier(s.Tier) {
			errs = append(errs, fmt.Errorf("%s.tier: tenant %s may use %v only (the tenants file), not %s", prefix, t.Name, t.Tiers, s.Tier))
		}
	}
	for k := range s.Labels {
		if k == "" {
			errs = append(errs, fmt.Errorf("%s.labels: empty key", prefix))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return s, fmt.Errorf("%w: %w", service.ErrInvalid, err)
	}
	return s, nil
}

// checkRun refuses at submit a command the backend could never run (none,
// on the node agents: executor.RunChecker), and env without a command.
func (p *Plane) checkRun(command []string, env map[string]string) error {
	if len(command) == 0 && len(env) > 0 {
		return fmt.Errorf("%w: env: given without a command", service.ErrInvalid)
	}
	if rc, ok := p.cfg.Backend.(executor.RunChecker); ok {
		if err := rc.CheckRun(command, env); err != nil {
			return fmt.Errorf("%w: %w", service.ErrInvalid, err)
		}
	}
	return nil
}

func cloneSpec(s cluster.JobSpec) cluster.JobSpec {
	return cluster.Job{Spec: s}.Clone().Spec
}

// The deadlines a job may carry: a time the store can keep (nanoseconds
// since 1970 in 64 bits end in 2262) and a scheduler can mean.
const (
	minDeadlineYear = 1970
	maxDeadlineYear = 2200
)

// newJobID makes an ID for a job submitted without one.
func newJobID() cluster.JobID {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return cluster.JobID("j-" + hex.EncodeToString(b[:]))
}

// Jobs implements Service.
func (p *Plane) Jobs(ctx context.Context, q service.JobQuery) ([]service.JobStatus, error) {
	if q.Limit < 0 {
		return nil, fmt.Errorf("limit %d is negative: %w", q.Limit, service.ErrInvalid)
	}
	for _, st := range q.States {
		if !st.Valid() {
			return nil, fmt.Errorf("state %q is not a job state: %w", st, service.ErrInvalid)
		}
	}
	limit := q.Limit
	if limit == 0 {
		limit = DefaultJobsLimit
	}
	f := store.JobFilter{Tenant: q.Tenant, States: q.States, Limit: store.DefaultLimit, After: q.After}
	if q.After != "" {
		// A cursor is one of the jobs listed: another tenant's job answers
		// as a missing one, so that IDs cannot be probed through it.
		j, err := p.cfg.Store.GetJob(ctx, q.After)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
		if err != nil || q.Tenant != "" && j.Spec.Tenant != q.Tenant {
			return nil, fmt.Errorf("after: %s is not a job of this listing: %w", q.After, service.ErrInvalid)
		}
	}
	var out []service.JobStatus
	for {
		page, err := p.cfg.Store.ListJobs(ctx, f)
		if err != nil {
			return nil, fmt.Errorf("list jobs: %w", err)
		}
		for _, j := range page {
			if !hasLabels(j.Spec.Labels, q.Labels) {
				continue
			}
			st, err := p.status(ctx, j)
			if err != nil {
				return nil, err
			}
			if out = append(out, st); len(out) == limit {
				return out, nil
			}
		}
		if len(page) < f.Limit {
			return out, nil
		}
		f.After = page[len(page)-1].ID
	}
}

func hasLabels(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// Job implements Service.
func (p *Plane) Job(ctx context.Context, id cluster.JobID) (service.JobStatus, error) {
	j, err := p.getJob(ctx, id)
	if err != nil {
		return service.JobStatus{}, err
	}
	st, err := p.status(ctx, j)
	if err != nil {
		return service.JobStatus{}, err
	}
	evs, err := p.cfg.Store.Events(ctx, id)
	if err != nil {
		return service.JobStatus{}, err
	}
	st.LastError = lastError(evs)
	if err := p.history(ctx, &st, evs, p.cfg.Clock()); err != nil {
		return service.JobStatus{}, fmt.Errorf("job %s: history: %w", id, err)
	}
	return st, nil
}

// JobTenant implements Service.
func (p *Plane) JobTenant(ctx context.Context, id cluster.JobID) (string, error) {
	tenant, err := p.cfg.Store.JobTenant(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return "", fmt.Errorf("job %s: %w", id, service.ErrNotFound)
	}
	return tenant, err
}

// JobEvents implements Service.
func (p *Plane) JobEvents(ctx context.Context, id cluster.JobID) ([]service.JobEvent, error) {
	if _, err := p.getJob(ctx, id); err != nil {
		return nil, err
	}
	evs, err := p.cfg.Store.Events(ctx, id)
	if err != nil {
		return nil, err
	}
	out := make([]service.JobEvent, len(evs))
	for i, e := range evs {
		out[i] = service.JobEvent{Time: e.Time.UTC(), Type: string(e.Type), From: e.From, To: e.To, Message: e.Message}
	}
	return out, nil
}

// lastError is the message of the newest event that says what went wrong
// (JobStatus.LastError).
func lastError(evs []store.Event) string {
	for i := len(evs) - 1; i >= 0; i-- {
		switch evs[i].Type {
		case store.EventFailed, store.EventStartFailed, store.EventRequeued, store.EventCheckpointAbandoned:
			return evs[i].Message
		}
	}
	return ""
}

func (p *Plane) getJob(ctx context.Context, id cluster.JobID) (cluster.Job, error) {
	j, err := p.cfg.Store.GetJob(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return cluster.Job{}, fmt.Errorf("job %s: %w", id, service.ErrNotFound)
	}
	return j, err
}

// Cancel implements Service: a queued job is cancelled at once; a running
// one is stopped and is cancelled when it has exited.
func (p *Plane) Cancel(ctx context.Context, id cluster.JobID) (service.JobStatus, error) {
	j, err := p.getJob(ctx, id)
	if err != nil {
		return service.JobStatus{}, err
	}
	switch {
	case j.State.Terminal():
		return service.JobStatus{}, fmt.Errorf("job %s is %s already: %w", id, j.State, service.ErrConflict)
	case j.State == cluster.StateQueued:
		j, err = p.cfg.Store.UpdateJob(ctx, id, func(j *cluster.Job) (store.EventType, string, error) {
			return store.EventCancelled, "cancelled by request", j.Transition(cluster.StateCancelled, p.cfg.Clock())
		})
		if errors.Is(err, cluster.ErrInvalidTransition) { // it started meanwhile
			return p.Cancel(ctx, id)
		}
		if err != nil {
			return service.JobStatus{}, fmt.Errorf("cancel %s: %w", id, err)
		}
		p.forget(id)
		p.notify(ctx, store.EventCancelled, j, "cancelled by request")
		p.wake()
		return p.status(ctx, j)
	}
	if _, err := p.cfg.Store.RequestStop(ctx, id, p.cfg.Clock(), stopCancel+"cancelled by request", false); err != nil {
		return service.JobStatus{}, fmt.Errorf("cancel %s: %w", id, err)
	}
	p.changedState()
	if err := p.cfg.Backend.Stop(ctx, id, p.grace); err != nil {
		return service.JobStatus{}, fmt.Errorf("cancel %s: stop: %w", id, err)
	}
	return p.Job(ctx, id)
}

// status is a job as the API shows it, with what the plane knows of it.
func (p *Plane) status(ctx context.Context, j cluster.Job) (service.JobStatus, error) {
	st := service.JobStatus{ID: j.ID, Name: j.Spec.Name, Tenant: j.Spec.Tenant, User: j.Spec.User, Tier: j.Spec.Tier.String(),
		GPUs: j.Spec.GPUs, GPUMilli: j.Spec.GPUMilli, Labels: j.Spec.Labels, State: j.State, Attempts: j.Attempts,
		SubmitTime: j.SubmitTime}
	st.StartTime, st.EndTime, st.Deadline = timePtr(j.StartTime), timePtr(j.EndTime), timePtr(j.Spec.Deadline)
	if j.LastCheckpoint != nil {
		st.LastCheckpoint = timePtr(j.LastCheckpoint.Time)
	}
	if j.State == cluster.StateSucceeded || j.State == cluster.StateFailed {
		code := j.Outcome.ExitCode
		st.ExitCode = &code
	}
	now := p.cfg.Clock().UTC()
	if j.State.Active() {
		pl, err := p.cfg.Store.GetPlacement(ctx, j.ID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return service.JobStatus{}, err
		}
		st.Placement = gpuNames(pl.Allocations)
		if pl.Stopping() {
			st.Reason = "stopping: " + pl.StopReason
		}
	}
	f, ok := p.knownForecast(ctx, j.ID)
	if ok {
		st.Forecast = &service.Forecast{Job: j.ID, DurationP50S: apiSeconds(f.DurationP50), DurationP90S: apiSeconds(f.DurationP90),
			MemoryP90Bytes: f.MemoryP90Bytes, Source: f.Source}
		if m, ok := p.refiner.Memory(j.ID); ok && j.State.Active() {
			st.Forecast.MemoryP90RefinedBytes = m
		}
	}
	if w, ok := p.cfg.Backend.(executor.Waiter); ok && j.State == cluster.StateQueued && w.Waiting(j.ID) {
		st.Reason = "waiting: its backend cannot start it yet (its pods do not all exist); plans and forecasts leave it out"
	}
	p.mu.Lock()
	if st.Reason == "" && !j.State.Terminal() {
		st.Reason = p.reasons[j.ID]
	}
	report, reported := p.deadlines[j.ID]
	p.mu.Unlock()
	if j.State.Active() && ok {
		v := executor.JobView{Job: &j, Forecast: f, Progress: live.SavedProgress(&j) + now.Sub(j.StartTime)}
		st.PredictedStart, st.PredictedEnd = timePtr(j.StartTime), timePtr(now.Add(v.RemainingP50()))
	}
	if j.State == cluster.StateQueued {
		if a, ok := p.whatif.QueuedAhead(j.ID, now); ok {
			st.PredictedStart, st.PredictedEnd, st.PredictedStartAfter = timePtr(a.Start), timePtr(a.End), timePtr(a.After)
		}
	}
	if j.Spec.HasDeadline() {
		feasible, latest := p.feasibility(ctx, &j, f, ok, now)
		if reported && j.State == cluster.StateQueued {
			feasible, latest = report.Feasible, report.LatestStart
		}
		st.DeadlineFeasible = &feasible
		if !latest.IsZero() {
			st.LatestStart = &latest
		}
	}
	return st, nil
}

// knownForecast is the forecast the plane remembers or the store kept.
func (p *Plane) knownForecast(ctx context.Context, id cluster.JobID) (executor.Forecast, bool) {
	p.mu.Lock()
	f, ok := p.forecasts[id]
	p.mu.Unlock()
	if ok {
		return f, true
	}
	stored, err := p.cfg.Store.Forecasts(ctx, []cluster.JobID{id})
	if err != nil {
		return executor.Forecast{}, false
	}
	sf, ok := stored[id]
	return executor.Forecast{Job: id, DurationP50: sf.DurationP50, DurationP90: sf.DurationP90,
		MemoryP90Bytes: sf.MemoryP90Bytes, Source: sf.Source}, ok
}

// feasibility says whether a job's deadline can be met: a finished job
// met it or not; a running one if its remaining P90 ends before it; a
// queued one if enough GPUs are free now, or come free by the P90 ends of
// the running jobs, before its latest start (deadline less its P90).
func (p *Plane) feasibility(ctx context.Context, j *cluster.Job, f executor.Forecast, known bool, now time.Time) (bool, time.Time) {
	switch {
	case j.State.Terminal():
		return j.State == cluster.StateSucceeded && !j.EndTime.After(j.Spec.Deadline), time.Time{}
	case !known:
		return !j.Spec.Deadline.Before(now), time.Time{}
	}
	v := executor.JobView{Job: j, Forecast: f, Progress: live.SavedProgress(j)}
	if j.State.Active() {
		v.Progress += now.Sub(j.StartTime)
		return !now.Add(v.RemainingP90()).After(j.Spec.Deadline), time.Time{}
	}
	latest := executor.LatestStart(&v)
	if latest.Before(now) {
		return false, latest
	}
	at, err := p.gpusFreeAt(ctx, j.Spec.GPUs, now)
	if err != nil {
		p.log.Warn("deadline feasibility: free capacity unknown", "job", j.ID, "error", err)
		return true, latest
	}
	return !at.IsZero() && !at.After(latest), latest
}

// gpusFreeAt is the earliest time n whole GPUs are free, by the P90 ends
// of the running jobs; zero when the fleet never has n.
func (p *Plane) gpusFreeAt(ctx context.Context, n int, now time.Time) (time.Time, error) {
	nodes := p.cfg.Nodes.Nodes()
	pls, err := p.cfg.Store.Placements(ctx)
	if err != nil {
		return time.Time{}, err
	}
	total, held := 0, 0
	counted := map[string]bool{} // the nodes training may use now
	for i := range nodes {
		if (nodes[i].State == "" || nodes[i].State == cluster.NodeReady) && p.lending.ForTraining(&nodes[i], now) {
			total += len(nodes[i].GPUs)
			counted[nodes[i].Name] = true
		}
	}
	type release struct {
		at   time.Time
		gpus int
	}
	var rel []release
	for _, pl := range pls {
		gpus := 0
		for _, a := range pl.Allocations {
			if counted[a.GPU.Node] {
				gpus++
			}
		}
		if gpus == 0 {
			continue
		}
		held += gpus
		end := now
		if f, ok := p.knownForecast(ctx, pl.Job); ok {
			if j, err := p.cfg.Store.GetJob(ctx, pl.Job); err == nil && j.State.Active() {
				v := executor.JobView{Job: &j, Forecast: f, Progress: live.SavedProgress(&j) + now.Sub(j.StartTime)}
				end = now.Add(v.RemainingP90())
			}
		}
		rel = append(rel, release{at: end, gpus: gpus})
	}
	free := total - held
	if free >= n {
		return now, nil
	}
	sort.Slice(rel, func(a, b int) bool { return rel[a].at.Before(rel[b].at) })
	for _, r := range rel {
		if free += r.gpus; free >= n {
			return r.at, nil
		}
	}
	return time.Time{}, nil
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

// apiSeconds is a duration in seconds to the millisecond, as the API shows
// forecasts: a model's float seconds, once a time.Duration, would show
// 899.999999999.
func apiSeconds(d time.Duration) float64 { return math.Round(d.Seconds()*1000) / 1000 }
