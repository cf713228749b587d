package whatif

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/control/live"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/executor/sim"
	"github.com/prescient-sched/prescient/service"
)

// What-if limits. An answer simulates up to its horizon or for its
// compute budget, whichever ends first; the queue forecast, which runs
// beside the plan loop rather than for a waiting client, has a larger
// budget. A 1,000-job queue on 32 GPUs reaches its 7-day horizon in about
// 110 ms; a second reaches about four hours ahead of 6,000 jobs on
// 10,000 GPUs (BenchmarkWhatIf, BenchmarkWhatIfBusyFleet).
const (
	DefaultWhatIfHorizon = 7 * 24 * time.Hour
	MaxWhatIfHorizon     = 30 * 24 * time.Hour
	MaxWhatIfJobs        = 10000
	DefaultWhatIfBudget  = time.Second
	DefaultQueueBudget   = 10 * time.Second
)

// scenario is one simulation's input.
type scenario struct {
	nodes   []cluster.Node
	queued  []cluster.Job
	running []sim.Placed
	fc      map[cluster.JobID]executor.Forecast
	policy  executor.Policy
	planner executor.Planner
	hypo    map[cluster.JobID]bool
	usage   map[string]time.Duration // tenants' decayed usage and waits now
	waits   map[string]executor.TenantWaits
	// parked are the nodes parked now (up in nodes: a job placed there
	// starts working wake later, their boot).
	parked []string
	wake   time.Duration
}

// Source is the live plane as a what-if reads it.
type Source interface {
	// Live is the plane's live state now.
	Live(ctx context.Context) (*live.State, error)
	// Version counts the changes of the plane's state: a baseline taken
	// at the same version is the same state.
	Version() uint64
	// CheckSpec checks a hypothetical job's spec as a submission's; field
	// names it in errors.
	CheckSpec(spec cluster.JobSpec, field string) (cluster.JobSpec, error)
	// Policy is the named queue policy with the plane's placement and its
	// planner.
	Policy(name string) (executor.Policy, executor.Planner, error)
}

// Parked is the parked nodes as a what-if reads them (control/parking).
type Parked interface {
	Fleet(nodes []cluster.Node) ([]cluster.Node, map[string]string)
	BootTime() time.Duration
}

// Deps are what WhatIf uses of the plane.
type Deps struct {
	Source Source
	// Policy and Planner are the plane's own.
	Policy  executor.Policy
	Planner executor.Planner
	// Parked, with parking on, are the parked nodes; nil otherwise.
	Parked     Parked
	Forecaster executor.Forecaster
	// QueueEvery is how often the queue is simulated forward (default
	// DefaultQueueForecastEvery; negative: never).
	QueueEvery time.Duration
	// Budget and QueueBudget bound the wall-clock time of each
	// simulation of an answer and of the queue forecast (defaults
	// DefaultWhatIfBudget and DefaultQueueBudget): one cut short answers
	// up to where it got.
	Budget, QueueBudget time.Duration
	Clock               func() time.Time
	Log                 *slog.Logger
}

// WhatIf answers what-if questions and forecasts the queue by simulating
// forward from the live state (executor/sim on a virtual clock). Safe
// for concurrent use.
type WhatIf struct {
	d     Deps
	queue live.Task // the queue forecast beside the loop (ForecastQueue)

	mu   sync.Mutex
	last *baseline // the last baseline taken (baselineFor)

	// ahead holds each queued job's predicted start and end from the last
	// simulation of the queue (ForecastQueue) and aheadHorizon how far it
	// got when it was cut short, under aheadMu.
	aheadMu      sync.Mutex
	ahead        map[cluster.JobID]sim.JobOutcome
	aheadHorizon time.Time
}

// New makes a WhatIf on d.
func New(d Deps) *WhatIf {
	d.QueueEvery = cmp.Or(d.QueueEvery, DefaultQueueForecastEvery)
	d.Budget, d.QueueBudget = cmp.Or(d.Budget, DefaultWhatIfBudget), cmp.Or(d.QueueBudget, DefaultQueueBudget)
	return &WhatIf{d: d}
}

// Wait waits for the queue forecast under way.
func (p *WhatIf) Wait() { p.queue.Wait() }

// Answer is Service.WhatIf: it simulates forward from the live state on a
// virtual clock starting now, once as things are (the baseline) and once
// with the request's changes, and answers each job's predicted start and
// end in both. Durations are the jobs' P50 forecasts less the work they
// have done; running jobs keep their GPUs and progress; jobs on removed
// nodes go back to the queue with the work since their last checkpoint
// lost. Each simulation stops at the request's horizon or when its
// compute budget (Deps.Budget) is spent; the answer covers both up to
// the earlier of where they got and says so.
func (p *WhatIf) Answer(ctx context.Context, req service.WhatIfRequest) (service.WhatIfResult, error) {
	began := time.Now()
	horizon, err := checkHorizon(req.Horizon)
	if err != nil {
		return service.WhatIfResult{}, err
	}
	b, err := p.baselineFor(ctx, horizon, p.d.Budget)
	if err != nil {
		return service.WhatIfResult{}, fmt.Errorf("what-if: %w", err)
	}
	defer p.release(b)
	lv := b.lv
	scen, err := p.changed(ctx, lv, b.scen, req)
	if err != nil {
		return service.WhatIfResult{}, err
	}
	tenants := lv.Snap.Tenants
	if req.Tenants != nil {
		tenants = req.Tenants
	}
	scenRun, scenErr := simulate(ctx, lv.Now, lv.Now.Add(horizon), p.d.Budget, scen, tenants)
	select {
	case <-b.done:
	case <-ctx.Done():
		return service.WhatIfResult{}, fmt.Errorf("what-if: %w", context.Cause(ctx))
	}
	if err := errors.Join(b.err, scenErr); err != nil {
		return service.WhatIfResult{}, fmt.Errorf("what-if: %w", err)
	}
	res := compare(lv.Now, scen, b.run, scenRun)
	res.Policy = scen.policy.Name
	res.WallS = time.Since(began).Seconds()
	return res, nil
}

// reuse is how long a baseline serves the what-if requests that
// arrive after it while nothing changed in the plane: concurrent requests
// simulate "as things are" once, from one live state, and each compares
// its own scenario with it from that same state (so the deltas hold no
// shift of the clock).
const reuse = time.Second

// baseline is a live state and its baseline simulation; done is closed
// once out and err are set. users counts the requests holding it (under
// whatIfMu): when the last lets go before the simulation is done, it is
// cancelled.
type baseline struct {
	version uint64
	taken   time.Time
	horizon time.Duration
	budget  time.Duration
	lv      *live.State
	scen    *scenario
	run     *simRun
	err     error
	done    chan struct{}
	users   int
	cancel  context.CancelFunc
}

// baselineFor returns the baseline of a what-if: the one taken less
// than reuse ago at the same state version, horizon and budget, or a new
// one whose simulation it starts (a request waits on done for its
// outcomes). The simulation outlives the request that started it while
// others hold the baseline; each holder calls release.
func (p *WhatIf) baselineFor(ctx context.Context, horizon, budget time.Duration) (*baseline, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	version := p.d.Source.Version()
	now := p.d.Clock()
	if b := p.last; b != nil && b.version == version && b.horizon == horizon && b.budget == budget && !now.Before(b.taken) &&
		now.Sub(b.taken) < reuse && (b.users > 0 || isDone(b.done) && b.err == nil) {
		b.users++
		return b, nil
	}
	lv, err := p.d.Source.Live(ctx)
	if err != nil {
		return nil, err
	}
	b := &baseline{version: version, taken: now, horizon: horizon, budget: budget, lv: lv, scen: p.baseScenario(lv), done: make(chan struct{}), users: 1}
	simCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), baselineTimeout)
	b.cancel = cancel
	go func() {
		defer cancel()
		defer close(b.done)
		b.run, b.err = simulate(simCtx, lv.Now, lv.Now.Add(horizon), budget, b.scen, lv.Snap.Tenants)
	}()
	p.last = b
	return b, nil
}

// release lets go of a baseline; the last holder of one whose
// simulation is still running cancels it, and it is not reused.
func (p *WhatIf) release(b *baseline) {
	p.mu.Lock()
	defer p.mu.Unlock()
	b.users--
	if b.users == 0 && !isDone(b.done) {
		b.cancel()
		if p.last == b {
			p.last = nil
		}
	}
}

func isDone(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// baselineTimeout bounds a baseline simulation.
const baselineTimeout = 5 * time.Minute
