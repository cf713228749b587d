package control

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/collector"
	"github.com/prescient-sched/prescient/control/advice"
	"github.com/prescient-sched/prescient/control/lending"
	"github.com/prescient-sched/prescient/control/live"
	"github.com/prescient-sched/prescient/control/parking"
	"github.com/prescient-sched/prescient/control/telemetry"
	"github.com/prescient-sched/prescient/control/whatif"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/executor/plugins/placement"
	"github.com/prescient-sched/prescient/executor/policies"
	"github.com/prescient-sched/prescient/service"
	"github.com/prescient-sched/prescient/store"
)

// Plane is the control plane. The store is the source of truth for jobs:
// every accepted job and every transition is in it before anyone is told.
// One goroutine (Run) applies the backend's events and plans; the Service
// methods may be called from any goroutine.
type Plane struct {
	cfg     Config
	log     *slog.Logger
	planner *executor.Framework
	policy  executor.Policy
	grace   time.Duration
	tenants atomic.Pointer[[]cluster.Tenant] // in force: Config.Tenants, then SetTenants
	metrics *jobMetrics                      // nil without Config.Metrics
	advice  *advice.Book                     // the advisor's recommendations, of every concern

	poke  chan struct{} // something changed: plan soon
	ready chan struct{} // closed once recovery is done
	// version counts changes of the plane's state (submissions, events,
	// plans): a what-if baseline taken at the same version is reused.
	version atomic.Uint64
	// whatif answers what-if questions and forecasts the queue
	// (control/whatif).
	whatif *whatif.WhatIf
	// background are the goroutines Run waits for before it returns.
	background sync.WaitGroup
	// syncHoldings, while Run applies a backend's initial events, merges
	// what each attempt holds on every node (adopt); the loop's own.
	syncHoldings map[executor.RunningAttempt][]cluster.Allocation

	mu         sync.Mutex
	mode       service.Mode
	forecasts  map[cluster.JobID]executor.Forecast
	reasons    map[cluster.JobID]string
	deadlines  map[cluster.JobID]executor.DeadlineReport
	lastPlan   time.Time
	quotaUse   []service.QuotaUsage // as of lastPlan
	runningBy  map[string]int       // running jobs by tenant, as of lastPlan
	retraining bool
	// util is every GPU's recent utilization, which idleJobs, the idle
	// forecast and lending read; refiner re-forecasts running jobs'
	// memory (control/telemetry).
	util     *telemetry.Utilization
	idleJobs *telemetry.IdleJobs
	refiner  *telemetry.Refiner
	// unsent are recorded starts that the backend could not send at
	// recovery because their node was not ready, with when that was first
	// seen: the node's NodeSynced settles them, or they are resent on the
	// tick, and requeued after NodeSyncTimeout.
	unsent map[cluster.JobID]time.Time
	// silent are the nodes reported silent (NodeSilent), since when.
	silent map[string]time.Time
	// lending lends idle inference nodes to training (control/lending).
	lending *lending.Lending
	// fair is the tenants' usage and waits, and the arrivals.
	fair *fairness
	// parking parks and wakes nodes (control/parking).
	parking *parking.Parking
}

var _ service.Service = (*Plane)(nil)

// New builds a Plane. It does nothing until Run.
func New(cfg Config) (*Plane, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Policy == "" {
		cfg.Policy = "prescient"
	}
	if cfg.Tick == 0 {
		cfg.Tick = DefaultTick
	}
	if cfg.Debounce == 0 {
		cfg.Debounce = DefaultDebounce
	}
	if cfg.MaxFailedStarts == 0 {
		cfg.MaxFailedStarts = DefaultMaxFailedStarts
	}
	if cfg.NodeLostAfter == 0 {
		cfg.NodeLostAfter = DefaultNodeLostAfter
	}
	if cfg.NodeSyncTimeout == 0 {
		cfg.NodeSyncTimeout = DefaultNodeSyncTimeout
	}
	if cfg.UsageHalfLife == 0 {
		cfg.UsageHalfLife = 24 * time.Hour
	}
	if cfg.WaitHalfLife == 0 {
		cfg.WaitHalfLife = executor.DefaultWaitHalfLife
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if sf, ok := cfg.Nodes.(service.StaticFleet); ok && sf.Fleet != nil && sf.Fleet.AllowCrossTenantSharing {
		cfg.AllowCrossTenantSharing = true
	}
	pol, err := buildPolicy(cfg.Policy, &cfg)
	if err != nil {
		return nil, fmt.Errorf("control: %w", err)
	}
	planner, err := newPlanner(pol, cfg.BackfillDepth, cfg.Logger)
	if err != nil {
		return nil, fmt.Errorf("control: %w", err)
	}
	var metrics *jobMetrics
	if cfg.Metrics != nil {
		if metrics, err = newJobMetrics(cfg.Metrics); err != nil {
			return nil, err
		}
	}
	log := cfg.Logger.With("component", "control")
	p := &Plane{cfg: cfg, log: log, planner: planner, policy: pol, metrics: metrics, advice: advice.New(cfg.Store, cfg.Recommendations, log),
		poke: make(chan struct{}, 1), ready: make(chan struct{}), mode: cfg.Mode,
		forecasts: map[cluster.JobID]executor.Forecast{}, reasons: map[cluster.JobID]string{},
		deadlines: map[cluster.JobID]executor.DeadlineReport{},
		unsent:    map[cluster.JobID]time.Time{}, silent: map[string]time.Time{},
		fair: &fairness{usageHalfLife: cfg.UsageHalfLife, waitHalfLife: cfg.WaitHalfLife, usage: map[string]time.Duration{},
			waits: map[string]executor.TenantWaits{}},
	}
	p.parking = parking.New(cfg.Parking, parking.Deps{Store: cfg.Store, Nodes: cfg.Nodes, Cordoner: cfg.Cordoner,
		Planner: planner, Advice: p.advice, Notifier: cfg.Notifier, Mode: p.Mode,
		Inference: func(n *cluster.Node) bool { _, ok := p.lending.Inference(n); return ok }, ArrivalRate: p.fair.arrivalRate,
		Changed: p.changedState, Poke: p.wake, Background: &p.background, NodeSyncTimeout: cfg.NodeSyncTimeout,
		Clock: cfg.Clock, Log: log})
	p.readTelemetry(cfg.Telemetry)
	var parked whatif.Parked
	if cfg.Parking != nil {
		parked = p.parking
	}
	p.whatif = whatif.New(whatif.Deps{Source: planeSource{p}, Policy: pol, Planner: planner, Parked: parked,
		Forecaster: cfg.Forecaster, QueueEvery: cfg.QueueForecastEvery, Budget: cfg.WhatIfBudget, Clock: cfg.Clock, Log: log})
	if cfg.TenantsFile != nil {
		cfg.Tenants = cfg.TenantsFile.Tenants()
	}
	p.tenants.Store(&cfg.Tenants)
	p.grace = cfg.Grace
	if p.grace == 0 {
		p.grace = pol.Grace
	}
	return p, nil
}

// readTelemetry has the plane read GPU telemetry from st (nil: none):
// the utilization, the idle jobs and the memory refinement.
func (p *Plane) readTelemetry(st collector.TelemetryStore) {
	p.cfg.Telemetry = st
	p.util = telemetry.NewUtilization(st, p.log)
	p.lending = lending.New(p.cfg.Lending, lending.Deps{Store: p.cfg.Store, Nodes: p.cfg.Nodes, Telemetry: st, Util: p.util,
		Idle: p.cfg.Idle, Advice: p.advice, Notifier: p.cfg.Notifier, Mode: p.Mode, Changed: p.changedState, Poke: p.wake, Log: p.log})
	p.idleJobs = telemetry.NewIdleJobs(p.util, st, p.cfg.Idle, p.advice, p.cfg.IdleJobAfter, p.log)
	p.refiner = telemetry.NewRefiner(p.cfg.PeakRefiner, st, p.cfg.RefineEvery, p.log)
}

// changedState marks the plane's state as changed: what-if baselines taken
// before are not reused.
func (p *Plane) changedState() { p.version.Add(1) }

// WhatIf implements Service (control/whatif).
func (p *Plane) WhatIf(ctx context.Context, req service.WhatIfRequest) (service.WhatIfResult, error) {
	return p.whatif.Answer(ctx, req)
}

// planeSource is the plane as what-if reads it.
type planeSource struct{ p *Plane }

func (s planeSource) Live(ctx context.Context) (*live.State, error) { return s.p.liveState(ctx) }
func (s planeSource) Version() uint64                               { return s.p.version.Load() }
func (s planeSource) CheckSpec(spec cluster.JobSpec, field string) (cluster.JobSpec, error) {
	return s.p.checkSpec(spec, field)
}

func (s planeSource) Policy(name string) (executor.Policy, executor.Planner, error) {
	pol, err := buildPolicy(name, &s.p.cfg)
	if err != nil {
		return executor.Policy{}, nil, err
	}
	planner, err := newPlanner(pol, s.p.cfg.BackfillDepth, slog.New(slog.DiscardHandler))
	return pol, planner, err
}

// buildPolicy assembles the queue policy name with the configured
// placement (or the policy's own, told the fleet's sharing rule) and power
// caps.
func buildPolicy(name string, cfg *Config) (executor.Policy, error) {
	pol, err := policies.New(name, cfg.PolicyOptions)
	if err != nil {
		return executor.Policy{}, err
	}
	if cfg.PowerCapPrice > 0 {
		if pol.PowerCap, err = executor.NewCostCapper(cfg.PowerCapPrice, executor.ZeusV100Caps); err != nil {
			return executor.Policy{}, fmt.Errorf("power caps: %w", err)
		}
	}
	place := cfg.Placement
	if own, ok := pol.Placer.(*placement.Placer); ok && place == "" {
		place = own.Name()
	}
	if place != "" {
		pl, err := placement.NewPlacer(place, placement.PlacerArgs{AllowCrossTenantSharing: cfg.AllowCrossTenantSharing})
		if err != nil {
			return executor.Policy{}, fmt.Errorf("placement: %w", err)
		}
		pol.Placer = pl
	}
	return pol, nil
}

// newPlanner is the policy's planner with the configured backfill depth.
func newPlanner(pol executor.Policy, backfillDepth int, log *slog.Logger) (*executor.Framework, error) {
	lim := executor.DefaultLimits()
	if backfillDepth > 0 {
		lim.BackfillDepth = backfillDepth
	}
	return executor.New(pol, executor.WithLimits(lim), executor.WithLogger(log))
}

// Ready is closed once Run has recovered the state from the store.
func (p *Plane) Ready() <-chan struct{} { return p.ready }

// Run is the control loop; it returns when ctx ends (nil) or the backend's
// event stream breaks. Its steps:
//
//  1. recover: read the active jobs and their placements from the store,
//     rebuild the tenants' decayed usage and waits from its events
//     (restoreFairness),
//     forecast the jobs, and resend the starts no node has confirmed (the
//     backend starts each attempt once, however often it is asked);
//  2. watch the backend's events and apply each to the store;
//  3. plan after events (debounced) and on every tick, with the policy's
//     planner on the live state;
//  4. act on the plan: record recommendations (advisor) or start and
//     preempt through the backend, recording each step first (autopilot);
//     stop the preempted jobs whose time is up.
func (p *Plane) Run(ctx context.Context) error {
	defer p.background.Wait()
	defer p.idleJobs.Wait()
	defer p.lending.Wait()
	defer p.whatif.Wait()
	events, err := p.cfg.Backend.Watch(ctx)
	if err != nil {
		return fmt.Errorf("control: watch the backend: %w", err)
	}
	if f := p.cfg.TenantsFile; f != nil {
		p.background.Add(1)
		go func() {
			defer p.background.Done()
			f.Watch(ctx, cmp.Or(p.cfg.TenantsReload, DefaultTenantsReload), p.cfg.TenantsSignal, p.SetTenants)
		}()
	}
	if err := p.recover(ctx); err != nil {
		return err
	}
	if is, ok := p.cfg.Backend.(executor.InitialSyncer); ok {
		initial := make([]executor.JobEvent, 0, is.InitialEvents())
		for range is.InitialEvents() {
			select {
			case <-ctx.Done():
				return nil
			case e, ok := <-events:
				if !ok {
					return errors.New("control: the backend's event stream ended")
				}
				initial = append(initial, e)
			}
		}
		// An attempt that runs on several nodes (a gang) is adopted whole,
		// from the holdings of every node, at the first node's sync.
		p.syncHoldings = map[executor.RunningAttempt][]cluster.Allocation{}
		for _, e := range initial {
			for ra, allocs := range e.Holdings {
				p.syncHoldings[ra] = append(p.syncHoldings[ra], allocs...)
			}
		}
		for _, e := range initial {
			p.apply(ctx, e)
		}
		p.syncHoldings = nil
	}
	close(p.ready)
	p.log.Info("control plane running", "mode", p.Mode(), "policy", p.cfg.Policy)
	tick := time.NewTicker(p.cfg.Tick)
	defer tick.Stop()
	var debounce <-chan time.Time
	p.cycle(ctx)
	for {
		select {
		case <-ctx.Done():
			return nil
		case e, ok := <-events:
			if !ok {
				if ctx.Err() != nil {
					return nil
				}
				return errors.New("control: the backend's event stream ended")
			}
			p.apply(ctx, e)
			if debounce == nil {
				debounce = time.After(p.cfg.Debounce)
			}
		case <-p.poke:
			if debounce == nil {
				debounce = time.After(p.cfg.Debounce)
			}
		case <-debounce:
			debounce = nil
			p.cycle(ctx)
		case <-tick.C:
			p.resendUnsent(ctx)
			p.requeueSilentNodes(ctx)
			p.cycle(ctx)
			p.whatif.ForecastQueue(ctx)
		}
	}
}

// wake asks the loop to plan soon; it never blocks. Something changed:
// what-if baselines taken before are not reused.
func (p *Plane) wake() {
	p.changedState()
	select {
	case p.poke <- struct{}{}:
	default:
	}
}

// recover is step 1.
func (p *Plane) recover(ctx context.Context) error {
	jobs, err := p.listJobs(ctx, cluster.StateQueued, cluster.StateRunning, cluster.StateCheckpointing)
	if err != nil {
		return fmt.Errorf("control: recover: %w", err)
	}
	if _, err := p.forecastsFor(ctx, jobs); err != nil {
		p.log.Warn("recover: forecasts failed; planning without them until they answer", "error", err)
	}
	if err := p.restoreFairness(ctx, p.cfg.Clock().UTC()); err != nil {
		return fmt.Errorf("control: recover: %w", err)
	}
	if err := p.lending.Restore(ctx); err != nil {
		return fmt.Errorf("control: recover: %w", err)
	}
	if err := p.parking.Restore(ctx); err != nil {
		return fmt.Errorf("control: recover: %w", err)
	}
	if err := p.advice.Restore(ctx); err != nil {
		return fmt.Errorf("control: recover: %w", err)
	}
	placements, err := p.cfg.Store.Placements(ctx)
	if err != nil {
		return fmt.Errorf("control: recover: %w", err)
	}
	byID := map[cluster.JobID]*cluster.Job{}
	for i := range jobs {
		byID[jobs[i].ID] = &jobs[i]
	}
	resent := 0
	for _, pl := range placements {
		j, ok := byID[pl.Job]
		if !ok {
			continue
		}
		if pl.Confirmed {
			if pl.Stopping() && j.State == cluster.StateCheckpointing {
				// The checkpoint request may not have reached the job.
				if err := p.cfg.Backend.Checkpoint(ctx, j.ID); err != nil {
					p.log.Warn("recover: resend checkpoint request failed", "job", j.ID, "error", err)
				}
			}
			continue
		}
		// Recorded as started, never confirmed: the process may have died
		// between the record and the call. The same Start again is safe.
		if err := p.sendStart(ctx, j, pl); err != nil {
			if errors.Is(err, executor.ErrNodeNotReady) {
				// It may run there: wait for the node to say (NodeSynced).
				p.mu.Lock()
				p.unsent[j.ID] = p.cfg.Clock()
				p.mu.Unlock()
				p.log.Info("recover: node not ready; waiting for it to sync", "job", j.ID, "attempt", pl.Attempt, "error", err)
				continue
			}
			p.log.Warn("recover: resend start failed; requeueing", "job", j.ID, "attempt", pl.Attempt, "error", err)
			p.startRefused(ctx, j.ID, pl.Attempt, failStartRefused+" after a restart", err)
			continue
		}
		resent++
	}
	p.log.Info("recovered", "active_jobs", len(jobs), "placements", len(placements), "starts_resent", resent)
	return nil
}

// assignment is what the backend is asked to start for a placement.
func (p *Plane) assignment(ctx context.Context, j *cluster.Job, pl store.Placement) (executor.Assignment, error) {
	run, err := p.cfg.Store.GetRun(ctx, j.ID)
	if err != nil {
		return executor.Assignment{}, err
	}
	return executor.Assignment{Job: j.Clone(), Attempt: pl.Attempt, Allocations: pl.Allocations,
		CheckpointEvery: pl.CheckpointEvery, Resume: j.Clone().LastCheckpoint, Command: run.Command, Env: run.Env,
		PowerLimitFraction: pl.PowerLimitFraction}, nil
}

// sendStart asks the backend to start a recorded placement.
func (p *Plane) sendStart(ctx context.Context, j *cluster.Job, pl store.Placement) error {
	a, err := p.assignment(ctx, j, pl)
	if err != nil {
		return err
	}
	return p.cfg.Backend.Start(ctx, a)
}

// listJobs reads every job in the given states, page by page.
func (p *Plane) listJobs(ctx context.Context, states ...cluster.JobState) ([]cluster.Job, error) {
	const page = store.DefaultLimit
	f := store.JobFilter{States: states, Limit: page}
	var all []cluster.Job
	for {
		jobs, err := p.cfg.Store.ListJobs(ctx, f)
		if err != nil {
			return nil, err
		}
		all = append(all, jobs...)
		if len(jobs) < page {
			return all, nil
		}
		f.After = jobs[len(jobs)-1].ID
	}
}

// forecastsFor returns the forecasts of jobs: those the plane remembers,
// then those the store kept (the forecast a job was first planned with),
// then, in one batch, the forecaster's for the rest, which are stored.
func (p *Plane) forecastsFor(ctx context.Context, jobs []cluster.Job) (map[cluster.JobID]executor.Forecast, error) {
	out := make(map[cluster.JobID]executor.Forecast, len(jobs))
	var unknown []cluster.JobID
	p.mu.Lock()
	for i := range jobs {
		if f, ok := p.forecasts[jobs[i].ID]; ok {
			out[jobs[i].ID] = f
		} else {
			unknown = append(unknown, jobs[i].ID)
		}
	}
	p.mu.Unlock()
	if len(unknown) == 0 {
		return out, nil
	}
	stored, err := p.cfg.Store.Forecasts(ctx, unknown)
	if err != nil {
		return out, err
	}
	var missing []*cluster.Job
	for i := range jobs {
		id := jobs[i].ID
		if _, ok := out[id]; ok {
			continue
		}
		if f, ok := stored[id]; ok {
			out[id] = executor.Forecast{Job: id, DurationP50: f.DurationP50, DurationP90: f.DurationP90,
				MemoryP90Bytes: f.MemoryP90Bytes, Source: f.Source}
		} else {
			missing = append(missing, &jobs[i])
		}
	}
	var fresh []executor.Forecast
	if len(missing) > 0 {
		if fresh, err = p.cfg.Forecaster.Forecast(ctx, missing); err != nil {
			return out, fmt.Errorf("forecasts: %w", err)
		}
		rows := make([]store.JobForecast, len(fresh))
		for i, f := range fresh {
			rows[i] = storedForecast(f)
		}
		if err := p.cfg.Store.PutForecasts(ctx, rows); err != nil {
			p.log.Warn("forecasts not stored", "jobs", len(rows), "error", err)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, f := range out {
		p.forecasts[id] = f
	}
	for _, f := range fresh {
		p.forecasts[f.Job] = f
		out[f.Job] = f
	}
	return out, nil
}

// storedForecast is a forecast as the store keeps it.
func storedForecast(f executor.Forecast) store.JobForecast {
	return store.JobForecast{Job: f.Job, DurationP50: f.DurationP50, DurationP90: f.DurationP90,
		MemoryP90Bytes: f.MemoryP90Bytes, Source: f.Source}
}

// Mode implements Service.
func (p *Plane) Mode() service.Mode {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode
}

// SetMode implements Service.
func (p *Plane) SetMode(_ context.Context, m service.Mode) error {
	if m != service.ModeAdvisor && m != service.ModeAutopilot {
		return fmt.Errorf("mode %q: want %s or %s: %w", m, service.ModeAdvisor, service.ModeAutopilot, service.ErrInvalid)
	}
	p.mu.Lock()
	old := p.mode
	p.mode = m
	p.mu.Unlock()
	if old != m {
		p.log.Info("mode changed", "from", old, "to", m)
		p.wake()
	}
	return nil
}

// notify tells the notifier about a transition recorded in the store.
func (p *Plane) notify(ctx context.Context, typ store.EventType, j cluster.Job, msg string) {
	if p.metrics != nil {
		var f executor.Forecast
		var known bool
		if typ == store.EventFinished {
			f, known = p.knownForecast(ctx, j.ID)
		}
		p.metrics.observe(typ, j, msg, f, known, p.cfg.Clock())
	}
	if p.cfg.Notifier == nil {
		return
	}
	e := service.LifecycleEvent{Type: string(typ), Time: p.cfg.Clock().UTC(), Job: j.ID, Tenant: j.Spec.Tenant, State: j.State,
		Attempt: j.Attempts, Message: msg, Labels: j.Spec.Labels}
	if typ == store.EventFinished || typ == store.EventFailed {
		code := j.Outcome.ExitCode
		e.ExitCode = &code
	}
	p.cfg.Notifier.Notify(ctx, e)
}

// resendUnsent retries the starts recovery could not send: a start the
// node confirmed or a NodeSynced settled is dropped; one the backend now
// takes is sent; one whose node is still not ready after NodeSyncTimeout
// is requeued (it never reached the node, which has not come back).
func (p *Plane) resendUnsent(ctx context.Context) {
	p.mu.Lock()
	pending := maps.Clone(p.unsent)
	p.mu.Unlock()
	for id, since := range pending {
		settled := func() {
			p.mu.Lock()
			delete(p.unsent, id)
			p.mu.Unlock()
		}
		j, err := p.cfg.Store.GetJob(ctx, id)
		if err != nil {
			p.log.Warn("resend start: read job", "job", id, "error", err)
			continue
		}
		pl, err := p.cfg.Store.GetPlacement(ctx, id)
		if errors.Is(err, store.ErrNotFound) || (err == nil && (pl.Confirmed || pl.Stopping())) {
			settled()
			continue
		}
		if err != nil {
			p.log.Warn("resend start: read placement", "job", id, "error", err)
			continue
		}
		err = p.sendStart(ctx, &j, pl)
		switch {
		case err == nil:
			settled()
		case errors.Is(err, executor.ErrNodeNotReady) && p.cfg.Clock().Sub(since) < p.cfg.NodeSyncTimeout:
			// keep waiting
		default:
			settled()
			p.log.Warn("resend start failed; requeueing", "job", id, "attempt", pl.Attempt, "error", err)
			if rerr := p.requeue(ctx, id, pl.Attempt, store.EventRequeued, "its node did not come back after a restart: "+err.Error()); rerr != nil {
				p.log.Error("requeue", "job", id, "error", rerr)
			}
		}
	}
}

// tenantsNow are the tenants in force (weights, quotas, tiers, caps).
func (p *Plane) tenantsNow() []cluster.Tenant { return *p.tenants.Load() }

// SetTenants puts tenants in force from the next cycle on (a tenants file
// read again); the caller must not change them afterwards. Jobs queued
// are kept whatever their tier: one the tenants no longer allow waits,
// saying why.
func (p *Plane) SetTenants(ts []cluster.Tenant) {
	p.tenants.Store(&ts)
	p.wake()
}
