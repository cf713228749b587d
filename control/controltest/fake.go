package controltest

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/service"
)

// Forecaster answers a forecast for a spec; Fake uses it for Predict, for
// the forecast of every submitted job and for what-if durations.
type Forecaster func(cluster.JobSpec) service.Forecast

// Source is the Source of the forecasts DefaultForecast makes.
const Source = "controltest"

// DefaultForecast is the rule Fake forecasts by unless told otherwise:
// P50 is 30 minutes per GPU (30 minutes for a job without GPUs), P90 twice
// that, and no memory forecast. It is a rule for tests, not a model.
func DefaultForecast(s cluster.JobSpec) service.Forecast {
	p50 := 30 * time.Minute * time.Duration(max(1, s.GPUs))
	return service.Forecast{DurationP50S: p50.Seconds(), DurationP90S: 2 * p50.Seconds(), Source: Source}
}

// Prices are what Stats charges for a GPU-hour and a kWh; GPUPowerW is the
// draw it assumes for one busy GPU when it turns GPU-hours into energy.
type Prices struct {
	PerGPUHour float64
	PerKWh     float64
	Currency   string
	GPUPowerW  float64
}

// GPUTelemetry is what the fleet view shows of one GPU's latest sample.
type GPUTelemetry struct {
	UtilizationPct  float64
	MemoryUsedBytes int64
	PowerW          float64
}

// Option configures a Fake.
type Option func(*Fake)

// WithClock sets the clock (default time.Now).
func WithClock(now func() time.Time) Option { return func(f *Fake) { f.now = now } }

// WithNodes sets the fleet.
func WithNodes(nodes ...cluster.Node) Option {
	return func(f *Fake) { f.nodes = slices.Clone(nodes) }
}

// WithForecaster replaces DefaultForecast.
func WithForecaster(fc Forecaster) Option { return func(f *Fake) { f.forecast = fc } }

// WithPrices sets the prices Stats charges (default: none, in "USD").
func WithPrices(p Prices) Option { return func(f *Fake) { f.prices = p } }

// WithModels sets the published model versions.
func WithModels(ms ...service.ModelVersion) Option {
	return func(f *Fake) { f.models = slices.Clone(ms) }
}

// WithMode sets the starting mode (default advisor).
func WithMode(m service.Mode) Option { return func(f *Fake) { f.mode = m } }

// Fake is an in-memory service.Service. It is safe for concurrent use.
type Fake struct {
	mu       sync.Mutex
	quotas   []service.QuotaUsage // SetQuotaUsage
	now      func() time.Time
	forecast Forecaster
	prices   Prices
	nodes    []cluster.Node
	jobs     map[cluster.JobID]*entry
	seq      int
	mode     service.Mode
	recs     []service.Recommendation
	models   []service.ModelVersion
	samples  []sample
	gpuTel   map[cluster.GPURef]GPUTelemetry
	loans    map[string]service.NodeLoan
	power    map[string]string // nodes parked or waking (SetParking)
	fail     map[string]error
	retrains int
	idleFor  map[cluster.GPURef]time.Duration
	logs     map[logKey]string       // SetJobLog
	asked    []service.WhatIfRequest // the what-ifs asked (WhatIfsAsked)
}

var _ service.Service = (*Fake)(nil)

// entry is one job and what the fake knows of it beyond cluster.Job.
type entry struct {
	job        cluster.Job
	command    []string
	env        map[string]string
	placement  []cluster.GPURef
	forecast   service.Forecast
	reason     string
	failure    string
	exitCode   *int
	firstStart time.Time
	runs       []interval // one per attempt; the last is open while it runs
	seq        int
	events     []service.JobEvent
	lastError  string // the reason of the newest failure or requeue
}

// interval is one attempt: when it ran, on which GPUs, and the event that
// ended it with its message.
type interval struct {
	from, to time.Time
	refs     []cluster.GPURef
	endedBy  string
	message  string
}

// logKey names one attempt's log on one node.
type logKey struct {
	job     cluster.JobID
	attempt int
	node    string
}

type sample struct {
	t              time.Time
	utilPct, power float64
}

// New returns an empty Fake in advisor mode.
func New(opts ...Option) *Fake {
	f := &Fake{
		now:      time.Now,
		forecast: DefaultForecast,
		prices:   Prices{Currency: "USD"},
		jobs:     map[cluster.JobID]*entry{},
		mode:     service.ModeAdvisor,
		gpuTel:   map[cluster.GPURef]GPUTelemetry{},
		loans:    map[string]service.NodeLoan{},
		power:    map[string]string{},
		fail:     map[string]error{},
		logs:     map[logKey]string{},
	}
	for _, o := range opts {
		o(f)
	}
	return f
}

// FailWith makes the Service method of that name ("Submit", "Jobs", ...)
// answer err until FailWith is called again with nil.
func (f *Fake) FailWith(method string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil {
		delete(f.fail, method)
		return
	}
	f.fail[method] = err
}

func (f *Fake) failure(method string) error {
	if err := f.fail[method]; err != nil {
		return fmt.Errorf("controltest: %s: %w", method, err)
	}
	return nil
}

func (f *Fake) clock() time.Time { return f.now().UTC() }

// Submit stores the job as queued with its forecast and deadline feasibility.
func (f *Fake) Submit(_ context.Context, req service.SubmitRequest) (service.JobStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.failure("Submit"); err != nil {
		return service.JobStatus{}, err
	}
	if req.Spec.Tenant == "" {
		return service.JobStatus{}, fmt.Errorf("tenant: empty: %w", service.ErrInvalid)
	}
	if err := req.Spec.Validate(); err != nil {
		return service.JobStatus{}, fmt.Errorf("%w: %w", service.ErrInvalid, err)
	}
	if e, ok := f.jobs[req.ID]; ok && req.ID != "" {
		if !reflect.DeepEqual(e.job.Spec, req.Spec) || !slices.Equal(e.command, req.Command) || !maps.Equal(e.env, req.Env) {
			return f.status(e), fmt.Errorf("job %s exists with another spec: %w", req.ID, service.ErrConflict)
		}
		return f.status(e), nil
	}
	f.seq++
	id := req.ID
	if id == "" {
		id = cluster.JobID(fmt.Sprintf("job-%06d", f.seq))
	}
	spec := req.Spec
	spec.Labels = maps.Clone(spec.Labels)
	spec.GPUModels = slices.Clone(spec.GPUModels)
	e := &entry{
		job:      cluster.NewJob(id, spec, f.clock()),
		command:  slices.Clone(req.Command),
		env:      maps.Clone(req.Env),
		forecast: f.forecast(spec),
		reason:   "queued",
		seq:      f.seq,
	}
	e.forecast.Job = id
	f.jobs[id] = e
	return f.status(e), nil
}

// Jobs lists the jobs that match q, newest submission first.
func (f *Fake) Jobs(_ context.Context, q service.JobQuery) ([]service.JobStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.failure("Jobs"); err != nil {
		return nil, err
	}
	if q.Limit < 0 {
		return nil, fmt.Errorf("limit: %d is negative: %w", q.Limit, service.ErrInvalid)
	}
	limit := cmp.Or(q.Limit, 100)
	var out []*entry
	for _, e := range f.jobs {
		if matches(e, q) {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b *entry) int {
		return cmp.Or(b.job.SubmitTime.Compare(a.job.SubmitTime), cmp.Compare(b.seq, a.seq))
	})
	if q.After != "" {
		i := slices.IndexFunc(out, func(e *entry) bool { return e.job.ID == q.After })
		if i < 0 {
			return nil, fmt.Errorf("after: %s is not a job of this listing: %w", q.After, service.ErrInvalid)
		}
		out = out[i+1:]
	}
	res := make([]service.JobStatus, 0, min(limit, len(out)))
	for _, e := range out[:min(limit, len(out))] {
		res = append(res, f.status(e))
	}
	return res, nil
}

func matches(e *entry, q service.JobQuery) bool {
	if q.Tenant != "" && e.job.Spec.Tenant != q.Tenant {
		return false
	}
	if len(q.States) > 0 && !slices.Contains(q.States, e.job.State) {
		return false
	}
	for k, v := range q.Labels {
		if got, ok := e.job.Spec.Labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// JobTenant answers a job's tenant or ErrNotFound.
func (f *Fake) JobTenant(_ context.Context, id cluster.JobID) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.failure("JobTenant"); err != nil {
		return "", err
	}
	e, err := f.get(id)
	if err != nil {
		return "", err
	}
	return e.job.Spec.Tenant, nil
}

// Job answers one job or ErrNotFound.
func (f *Fake) Job(_ context.Context, id cluster.JobID) (service.JobStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.failure("Job"); err != nil {
		return service.JobStatus{}, err
	}
	e, err := f.get(id)
	if err != nil {
		return service.JobStatus{}, err
	}
	st := f.status(e)
	st.LastError = e.lastError
	f.history(e, &st)
	return st, nil
}

// history fills st's attempts and their sums as the control plane does; a
// running attempt counts to now. Energy is the GPU-hours at the draw of
// Prices.GPUPowerW, unavailable when that is 0.
func (f *Fake) history(e *entry, st *service.JobStatus) {
	now := f.clock()
	total, known := 0.0, true
	for i, r := range e.runs {
		end := cmp.Or(r.to, now)
		a := service.JobAttempt{Attempt: i + 1, StartTime: r.from, EndTime: timePtr(r.to), EndedBy: r.endedBy,
			Message: r.message, RunS: max(end.Sub(r.from), 0).Seconds()}
		for _, ref := range r.refs {
			a.Allocations = append(a.Allocations, service.GPUShare{Node: ref.Node, GPU: ref.Index, Milli: e.job.Spec.GPUMilli})
		}
		a.GPUHours = a.RunS / 3600 * float64(len(r.refs)*e.job.Spec.GPUMilli) / cluster.MilliGPU
		if f.prices.GPUPowerW > 0 {
			kwh := a.GPUHours * f.prices.GPUPowerW / 1000
			a.EnergyKWh, total = &kwh, total+kwh
		} else {
			a.EnergyUnavailable, known = "the fake control plane reads no power telemetry", false
		}
		st.RunS += a.RunS
		st.GPUHours += a.GPUHours
		st.History = append(st.History, a)
	}
	if known && len(e.runs) > 0 {
		st.EnergyKWh = &total
	}
}

// Cancel cancels a queued or running job; a finished one is ErrConflict.
func (f *Fake) Cancel(_ context.Context, id cluster.JobID) (service.JobStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.failure("Cancel"); err != nil {
		return service.JobStatus{}, err
	}
	e, err := f.get(id)
	if err != nil {
		return service.JobStatus{}, err
	}
	if e.job.State.Terminal() {
		return f.status(e), fmt.Errorf("job %s is already %s: %w", id, e.job.State, service.ErrConflict)
	}
	if err := f.transition(e, cluster.StateCancelled, ""); err != nil {
		return service.JobStatus{}, err
	}
	e.reason = "cancelled"
	return f.status(e), nil
}

// eventType is the store's event type of a move to each state, as the
// fake records them (requeues and preemptions alike "requeued").
var eventType = map[cluster.JobState]string{
	cluster.StateQueued: "requeued", cluster.StateRunning: "started", cluster.StateCheckpointing: "checkpoint_requested",
	cluster.StateSucceeded: "finished", cluster.StateFailed: "failed", cluster.StateCancelled: "cancelled",
}

// JobLog implements service.Service: the text SetJobLog gave each node of
// the attempt (the newest for attempt 0), and "unavailable" for the nodes
// it gave none.
func (f *Fake) JobLog(_ context.Context, id cluster.JobID, attempt, maxBytes int) (service.JobLog, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.failure("JobLog"); err != nil {
		return service.JobLog{}, err
	}
	e, err := f.get(id)
	if err != nil {
		return service.JobLog{}, err
	}
	if len(e.runs) == 0 || attempt > len(e.runs) {
		return service.JobLog{}, fmt.Errorf("job %s has no attempt %d: %w", id, attempt, service.ErrNotFound)
	}
	out := service.JobLog{Job: id, Attempt: cmp.Or(attempt, len(e.runs))}
	for _, g := range e.runs[out.Attempt-1].refs {
		if len(out.Nodes) > 0 && out.Nodes[len(out.Nodes)-1].Node == g.Node {
			continue
		}
		text, ok := f.logs[logKey{id, out.Attempt, g.Node}]
		switch {
		case !ok:
			out.Nodes = append(out.Nodes, service.NodeLog{Node: g.Node, Unavailable: "the fake control plane keeps no logs"})
		case maxBytes > 0 && len(text) > maxBytes:
			out.Nodes = append(out.Nodes, service.NodeLog{Node: g.Node, Text: text[len(text)-maxBytes:], Truncated: true})
		default:
			out.Nodes = append(out.Nodes, service.NodeLog{Node: g.Node, Text: text})
		}
	}
	return out, nil
}

// JobEvents lists the job's moves since its submission, oldest first.
func (f *Fake) JobEvents(_ context.Context, id cluster.JobID) ([]service.JobEvent, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.failure("JobEvents"); err != nil {
		return nil, err
	}
	e, err := f.get(id)
	if err != nil {
		return nil, err
	}
	first := service.JobEvent{Time: e.job.SubmitTime, Type: "submitted", To: cluster.StateQueued}
	return append([]service.JobEvent{first}, e.events...), nil
}

func (f *Fake) get(id cluster.JobID) (*entry, error) {
	e, ok := f.jobs[id]
	if !ok {
		return nil, fmt.Errorf("job %s: %w", id, service.ErrNotFound)
	}
	return e, nil
}

// transition moves e's job with message as the event's reason, closing
// its run interval and releasing its GPUs when it stops running.
func (f *Fake) transition(e *entry, to cluster.JobState, message string) error {
	now := f.clock()
	wasActive, from := e.job.State.Active(), e.job.State
	if err := e.job.Transition(to, now); err != nil {
		return err
	}
	e.events = append(e.events, service.JobEvent{Time: now, Type: eventType[to], From: from, To: to, Message: message})
	if wasActive && !to.Active() {
		r := &e.runs[len(e.runs)-1]
		r.to, r.endedBy, r.message = now, eventType[to], message
		e.placement = nil
	}
	return nil
}

// Start runs a queued job on the given GPUs of node. It fails when the
// node or a GPU is unknown or lacks the job's share.
func (f *Fake) Start(id cluster.JobID, node string, gpus ...int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, err := f.get(id)
	if err != nil {
		return err
	}
	n := f.node(node)
	if n == nil {
		return fmt.Errorf("controltest: start %s: no node %q", id, node)
	}
	if len(gpus) != e.job.Spec.GPUs {
		return fmt.Errorf("controltest: start %s: %d GPUs given, the job asks for %d", id, len(gpus), e.job.Spec.GPUs)
	}
	used := f.allocated()
	refs := make([]cluster.GPURef, 0, len(gpus))
	for _, i := range gpus {
		ref := cluster.GPURef{Node: node, Index: i}
		if i < 0 || i >= len(n.GPUs) {
			return fmt.Errorf("controltest: start %s: %s has no GPU %d", id, node, i)
		}
		if used[ref]+e.job.Spec.GPUMilli > cluster.MilliGPU {
			return fmt.Errorf("controltest: start %s: %s has %d milli-GPU free, the job needs %d", id, ref, cluster.MilliGPU-used[ref], e.job.Spec.GPUMilli)
		}
		refs = append(refs, ref)
	}
	if err := f.transition(e, cluster.StateRunning, ""); err != nil {
		return err
	}
	now := f.clock()
	if e.firstStart.IsZero() {
		e.firstStart = now
	}
	e.runs = append(e.runs, interval{from: now, refs: refs})
	e.placement, e.reason = refs, "started by the test"
	return nil
}

// Checkpoint records a checkpoint of a running job at step.
func (f *Fake) Checkpoint(id cluster.JobID, step int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, err := f.get(id)
	if err != nil {
		return err
	}
	return e.job.Checkpointed(cluster.Checkpoint{Time: f.clock(), Step: step})
}

// Preempt sends a running job back to the queue.
func (f *Fake) Preempt(id cluster.JobID, reason string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, err := f.get(id)
	if err != nil {
		return err
	}
	if err := f.transition(e, cluster.StateQueued, reason); err != nil {
		return err
	}
	e.reason, e.lastError = reason, reason
	return nil
}

// Finish ends a running job: exit code 0 succeeds, anything else fails
// with reason (default "exit code N").
func (f *Fake) Finish(id cluster.JobID, exitCode int, reason string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, err := f.get(id)
	if err != nil {
		return err
	}
	to := cluster.StateSucceeded
	if exitCode != 0 {
		to = cluster.StateFailed
		e.failure = cmp.Or(reason, fmt.Sprintf("exit code %d", exitCode))
	}
	if !e.job.State.Active() {
		return fmt.Errorf("controltest: finish %s: it is %s, not running", id, e.job.State)
	}
	if err := f.transition(e, to, e.failure); err != nil {
		return err
	}
	if to == cluster.StateFailed {
		e.lastError = e.failure
	}
	e.exitCode = &exitCode
	e.reason = cmp.Or(e.failure, "finished")
	return nil
}

func (f *Fake) node(name string) *cluster.Node {
	for i := range f.nodes {
		if f.nodes[i].Name == name {
			return &f.nodes[i]
		}
	}
	return nil
}

// allocated is the milli-GPUs running jobs hold on each GPU.
func (f *Fake) allocated() map[cluster.GPURef]int {
	used := map[cluster.GPURef]int{}
	for _, e := range f.jobs {
		for _, ref := range e.placement {
			used[ref] += e.job.Spec.GPUMilli
		}
	}
	return used
}

// status is the API's view of e.
func (f *Fake) status(e *entry) service.JobStatus {
	j := e.job
	fc := e.forecast
	st := service.JobStatus{
		ID: j.ID, Name: j.Spec.Name, Tenant: j.Spec.Tenant, User: j.Spec.User, Tier: j.Spec.Tier.String(),
		GPUs: j.Spec.GPUs, GPUMilli: j.Spec.GPUMilli, Labels: maps.Clone(j.Spec.Labels),
		State: j.State, Attempts: j.Attempts, SubmitTime: j.SubmitTime,
		StartTime: timePtr(j.StartTime), EndTime: timePtr(j.EndTime), Deadline: timePtr(j.Spec.Deadline),
		Reason: e.reason, Forecast: &fc, ExitCode: e.exitCode,
	}
	for _, ref := range e.placement {
		st.Placement = append(st.Placement, ref.String())
	}
	if j.LastCheckpoint != nil {
		st.LastCheckpoint = timePtr(j.LastCheckpoint.Time)
	}
	if j.Spec.HasDeadline() {
		p90 := time.Duration(fc.DurationP90S * float64(time.Second))
		latest := j.Spec.Deadline.Add(-p90)
		feasible := j.State == cluster.StateSucceeded && !j.EndTime.After(j.Spec.Deadline) ||
			!j.State.Terminal() && !f.clock().After(latest)
		st.DeadlineFeasible, st.LatestStart = &feasible, &latest
	}
	return st
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
