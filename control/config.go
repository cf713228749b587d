package control

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/collector"
	"github.com/prescient-sched/prescient/control/lending"
	"github.com/prescient-sched/prescient/control/parking"
	"github.com/prescient-sched/prescient/control/telemetry"
	"github.com/prescient-sched/prescient/control/tenants"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/executor/policies"
	"github.com/prescient-sched/prescient/service"
	"github.com/prescient-sched/prescient/store"
	"github.com/prescient-sched/prescient/training"
)

// RetrainFunc runs one retraining (training.Retrain over the job store,
// with the serve command's learners); the Plane runs it in the background.
type RetrainFunc func(ctx context.Context) error

// Prices turn usage into cost for the dashboard.
type Prices struct {
	PerGPUHour float64
	PerKWh     float64
	Currency   string
}

// Config is what a Plane is built from.
type Config struct {
	Store   *store.Store
	Nodes   service.NodeSource
	Tenants []cluster.Tenant
	// TenantsFile, when set, holds the tenants instead of Tenants: it is
	// read again every TenantsReload (default DefaultTenantsReload) and on
	// each TenantsSignal (SIGHUP), and what it says applies from the next
	// cycle on.
	TenantsFile   *tenants.File
	TenantsReload time.Duration
	TenantsSignal <-chan os.Signal
	Backend       executor.Backend
	// Policy names the queue policy (executor/policies); Placement the
	// placement policy ("" keeps the policy's own).
	Policy    string
	Placement string
	// PolicyOptions are the policy's checkpoint and grace settings.
	PolicyOptions policies.Options
	// AllowCrossTenantSharing lets jobs of different tenants share a GPU
	// without MIG (the fleet file's allow_cross_tenant_sharing, which a
	// StaticFleet's Fleet sets too); otherwise only one tenant's jobs share
	// a GPU's time.
	AllowCrossTenantSharing bool
	// PowerCapPrice, when positive, caps each starting job's GPU power
	// where (GPUs × power + price) × slowdown is least on the Zeus V100
	// curve (executor.CostCapper); autopilot asks the node to set the
	// limit (Assignment.PowerLimitFraction). Zero: no caps.
	PowerCapPrice float64
	// BackfillDepth bounds how many queued jobs one plan considers for
	// backfill after the first reservation (Slurm's bf_max_job_test); 0
	// keeps the planner's default (executor.DefaultLimits). The live plan
	// and what-if use the same planner, so it bounds what-if's cost too.
	BackfillDepth int
	// Forecaster answers duration (and memory) forecasts: the predictor's
	// adapter in production. Predict and what-if use it too.
	Forecaster executor.Forecaster
	// Registry and Retrain serve the models endpoints; a zero Registry
	// (no Dir) answers that there are no models.
	Registry training.Registry
	Retrain  RetrainFunc
	// Telemetry is read for the fleet's utilization and power: the
	// embedded store (collector.NewEmbeddedSink) or InfluxDB
	// (collector.NewInfluxQuery); nil for none.
	Telemetry collector.TelemetryStore
	// Idle answers idle-window forecasts (IdleForecast) from the published
	// idle model: predictor.Idle in production; nil forecasts from the
	// running jobs and the queue alone.
	Idle telemetry.IdleForecaster
	// Lending lends the idle nodes of inference pools to training
	// (control/lending); nil lends nothing. It needs Telemetry.
	Lending *lending.Config
	// Parking powers down the nodes that run nothing and wakes them when
	// work needs them (control/parking); nil parks nothing.
	Parking *parking.Config
	// Cordoner keeps the nodes Parking parks out of other schedulers'
	// reach where they share the fleet (the Kubernetes backend cordons
	// them); nil where the plane alone places work (the node agents).
	Cordoner service.Cordoner
	// IdleJobAfter is how long every GPU of a running job must have been
	// below the idle threshold, by Telemetry, before the plane records an
	// "idle" recommendation about it (default telemetry.DefaultIdleJobAfter;
	// negative: never).
	IdleJobAfter time.Duration
	// PeakRefiner re-forecasts running jobs' peak GPU memory from their
	// memory series, which Telemetry must answer (collector.JobMemoryStore,
	// as both stores do); the planner then places shares beside them by the
	// refined P90. nil keeps each job's forecast from submission.
	PeakRefiner telemetry.PeakRefiner
	// RefineEvery is how often running jobs' memory is re-forecast
	// (default telemetry.DefaultRefineEvery).
	RefineEvery time.Duration
	// QueueForecastEvery is how often the queue is simulated forward to
	// predict each queued job's start and end (default
	// whatif.DefaultQueueForecastEvery; negative: never).
	QueueForecastEvery time.Duration
	// WhatIfBudget bounds the wall-clock time of each simulation of a
	// what-if answer (default whatif.DefaultWhatIfBudget): on a fleet too
	// busy to simulate to the horizon in it, the answer covers what it
	// reached and says so.
	WhatIfBudget time.Duration
	// Metrics, when set, gets the plane's metrics of its jobs: waits,
	// lifecycle events, failures by reason, forecast error and P90
	// coverage (see jobMetrics). One plane per registry.
	Metrics *prometheus.Registry
	// Notifier hears every job lifecycle event; nil for none. Notify must
	// not block.
	Notifier service.Notifier
	// Recommendations hears each recommendation the advisor records (the
	// Kubernetes backend writes it on the pods); nil for none. Recommended
	// must not block.
	Recommendations service.RecommendationSink
	Mode            service.Mode
	// Tick is how often the plane plans when nothing happens (default
	// DefaultTick); Debounce how long it waits after an event before it
	// plans, so that a burst plans once (default DefaultDebounce).
	Tick     time.Duration
	Debounce time.Duration
	// Grace is how long a stopped job may take to exit before SIGKILL
	// (default the policy's grace).
	Grace  time.Duration
	Clock  func() time.Time
	Logger *slog.Logger
	Prices Prices
	// UsageHalfLife is the half-life of tenants' usage for fair share
	// (default 24h).
	UsageHalfLife time.Duration
	// WaitHalfLife is the half-life of tenants' waits for wait fairness
	// (default executor.DefaultWaitHalfLife).
	WaitHalfLife time.Duration
	// NodeSyncTimeout is how long a start recorded before a restart waits
	// for its node to come back before the job is requeued (default
	// DefaultNodeSyncTimeout).
	NodeSyncTimeout time.Duration
	// NodeLostAfter is how long a node may stay silent (NodeSilent, no
	// NodeSynced since) before its jobs are requeued (default
	// DefaultNodeLostAfter).
	NodeLostAfter time.Duration
	// MaxFailedStarts is how many starts of one job the backend may refuse
	// before the job fails with the last refusal as its reason (default
	// DefaultMaxFailedStarts). Preemptions and lost nodes do not count.
	MaxFailedStarts int
}

// Defaults of Config.
const (
	DefaultTick     = 10 * time.Second
	DefaultDebounce = 200 * time.Millisecond
	// DefaultNodeSyncTimeout exceeds the agents' longest reconnect backoff
	// (10 s) and silence bound (90 s).
	DefaultNodeSyncTimeout = 2 * time.Minute
	// DefaultNodeLostAfter gives a node that went silent (its agent has
	// not been heard for the hub's silence bound, 90 s by default) five more
	// minutes to come back before its jobs run elsewhere.
	DefaultNodeLostAfter = 5 * time.Minute
	// DefaultMaxFailedStarts lets a passing refusal (a node that just
	// failed) pass, and stops a job the backend can never start within a
	// few cycles.
	DefaultMaxFailedStarts = 5
)

// Validate checks the configuration; the errors name the field.
func (c *Config) Validate() error {
	var errs []error
	if c.Store == nil {
		errs = append(errs, errors.New("control: config: Store is required"))
	}
	if c.Nodes == nil {
		errs = append(errs, errors.New("control: config: Nodes is required"))
	}
	if c.Backend == nil {
		errs = append(errs, errors.New("control: config: Backend is required"))
	}
	if c.Forecaster == nil {
		errs = append(errs, errors.New("control: config: Forecaster is required"))
	}
	if c.Mode != service.ModeAdvisor && c.Mode != service.ModeAutopilot {
		errs = append(errs, fmt.Errorf("control: config: mode %q: want %s or %s", c.Mode, service.ModeAdvisor, service.ModeAutopilot))
	}
	if !(c.PowerCapPrice >= 0) || math.IsInf(c.PowerCapPrice, 0) {
		errs = append(errs, fmt.Errorf("control: config: power cap price %g: want a finite number ≥ 0", c.PowerCapPrice))
	}
	if c.BackfillDepth < 0 {
		errs = append(errs, fmt.Errorf("control: config: backfill depth %d is negative", c.BackfillDepth))
	}
	if c.RefineEvery < 0 {
		errs = append(errs, fmt.Errorf("control: config: RefineEvery %s must not be negative", c.RefineEvery))
	}
	if c.MaxFailedStarts < 0 {
		errs = append(errs, fmt.Errorf("control: config: MaxFailedStarts %d is negative", c.MaxFailedStarts))
	}
	if c.Tick < 0 || c.Debounce < 0 || c.Grace < 0 || c.UsageHalfLife < 0 || c.WaitHalfLife < 0 || c.NodeSyncTimeout < 0 || c.NodeLostAfter < 0 || c.WhatIfBudget < 0 {
		errs = append(errs, errors.New("control: config: Tick, Debounce, Grace, UsageHalfLife, WaitHalfLife, NodeSyncTimeout, NodeLostAfter and WhatIfBudget must not be negative"))
	}
	if c.Lending != nil {
		if err := c.Lending.WithDefaults().Validate("control: config: lending: "); err != nil {
			errs = append(errs, err)
		}
		if c.Telemetry == nil {
			errs = append(errs, errors.New("control: config: lending: needs Telemetry, the inference pools' demand"))
		}
	}
	if c.Parking != nil {
		if err := c.Parking.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if c.Prices.PerGPUHour < 0 || c.Prices.PerKWh < 0 {
		errs = append(errs, errors.New("control: config: prices must not be negative"))
	}
	return errors.Join(errs...)
}

// DefaultTenantsReload is how often a tenants file is read again.
const DefaultTenantsReload = 10 * time.Second
