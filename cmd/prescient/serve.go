package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"

	"github.com/prescient-sched/prescient/api"
	"github.com/prescient-sched/prescient/api/dashboard"
	"github.com/prescient-sched/prescient/backend/agenthub"
	"github.com/prescient-sched/prescient/backend/simbackend"
	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/collector"
	"github.com/prescient-sched/prescient/control"
	"github.com/prescient-sched/prescient/control/lending"
	"github.com/prescient-sched/prescient/control/parking"
	"github.com/prescient-sched/prescient/control/telemetry"
	"github.com/prescient-sched/prescient/control/tenants"
	"github.com/prescient-sched/prescient/control/whatif"
	"github.com/prescient-sched/prescient/datasets"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/executor/lend"
	"github.com/prescient-sched/prescient/executor/park"
	"github.com/prescient-sched/prescient/executor/policies"
	"github.com/prescient-sched/prescient/internal/watchfile"
	"github.com/prescient-sched/prescient/service"
	"github.com/prescient-sched/prescient/store"
	"github.com/prescient-sched/prescient/training"
	"github.com/prescient-sched/prescient/webhook"
)

type serveOptions struct {
	listen          string
	dbPath          string
	shutdownTimeout time.Duration
	retrainEvery    time.Duration
	models          string

	mode          string
	backend       string
	fleet         string
	policy        string
	placement     string
	backfillDepth int
	whatIfBudget  time.Duration
	tick          time.Duration
	grace         time.Duration
	preemptMinRun time.Duration
	idleJobAfter  time.Duration
	powerCapPrice float64
	crossTenant   bool
	tokens        string
	tokensReload  time.Duration
	tenantsFile   string
	tenantsReload time.Duration
	metricsToken  bool
	webhooks      string
	influx        collector.InfluxOptions
	pricePerGPUH  float64
	pricePerKWh   float64
	currency      string
	agentSilent   time.Duration
	maxFailed     int
	lend          lending.Config
	park          parking.Config

	demo demoOptions
	kube kubeOptions
}

func newServeCmd(g *globals) *cobra.Command {
	o := serveOptions{}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the control plane: advisor or autopilot, the /v1 API and the dashboard",
		Long: `Run the control plane. It keeps the queue and the job history in one SQLite
file (--db), asks the forecasting models (--models) for each job's duration and
memory, plans on every event and on a tick with the queue policy (--policy) and
the placement policy (--placement), and then either records recommendations
with their reasons (--mode advisor, the default) or carries the plan out
through the backend (--mode autopilot):

  --backend agent  node agents (prescient agent) register their GPUs here and
                   run the jobs as processes; the fleet is what registered.
  --backend sim    jobs run on --fleet without processes, each for the
                   duration in its label "duration_s" (else one hour).
  --backend kubernetes  Prescient schedules the pods with schedulerName
                   "prescient" (--kubeconfig, else in cluster; --namespace);
                   the fleet is the Nodes; with --leader-elect only the
                   holder of a Lease plans and acts (see docs/kubernetes.md).

It serves the HTTP API under /v1 (bearer tokens from --tokens, a YAML file:
see docs/api.md), /metrics, /healthz, /readyz, /v1/openapi.json and the web
dashboard at /. With --retrain-every and --models it retrains the models from
the finished jobs in the store on that schedule and publishes what passes the
gate; POST /v1/models/retrain does the same at once. Restarting it, even with
kill -9, loses no accepted job and starts none twice.

--demo runs everything on this machine: four simulated nodes (two of 8 A100s,
two of 4 A40s) with
local agents that run real "prescient workload" processes, a synthetic job
stream, models trained at start on synthetic history, autopilot, and an admin
token printed for the dashboard and the API.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runServe(cmd.Context(), g, o, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.listen, "listen", "127.0.0.1:8080", "address to serve HTTP on")
	f.StringVar(&o.listen, "addr", "127.0.0.1:8080", "the same as --listen")
	_ = f.MarkHidden("addr")
	f.StringVar(&o.dbPath, "db", "prescient.db", "SQLite file holding the control plane's state (created if missing)")
	f.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 10*time.Second, "how long in-flight requests may take to finish on SIGTERM")
	f.DurationVar(&o.retrainEvery, "retrain-every", 0, "retrain the forecasting models from the job store on this schedule (e.g. 6h); 0 never")
	f.StringVar(&o.models, "models", "", "model registry directory: forecasts come from it, retraining publishes to it")
	f.StringVar(&o.mode, "mode", string(service.ModeAdvisor), "advisor (recommend, change nothing) or autopilot (act through the backend)")
	f.StringVar(&o.backend, "backend", "agent", "how autopilot reaches the fleet: agent, sim or kubernetes")
	f.StringVar(&o.fleet, "fleet", "", "the fleet for --backend sim (FORMAT:SPEC, e.g. uniform:4x8:A100-SXM4-80GB)")
	f.StringVar(&o.policy, "policy", "prescient", "queue policy: "+joinNames(policies.Names()))
	f.StringVar(&o.placement, "placement", "", "placement policy (empty: the queue policy's own)")
	f.IntVar(&o.backfillDepth, "backfill-depth", 100, "queued jobs one plan considers for backfill after the first reservation (Slurm's bf_max_job_test)")
	f.DurationVar(&o.whatIfBudget, "whatif-budget", whatif.DefaultWhatIfBudget, "compute time of each simulation of a what-if answer: on a fleet too busy to simulate to the horizon in it, the answer covers what it reached and says how far (horizon)")
	f.DurationVar(&o.tick, "tick", control.DefaultTick, "plan at least this often when nothing happens")
	f.DurationVar(&o.grace, "grace", 0, "how long a stopped job may take to exit before SIGKILL (0: the policy's)")
	f.DurationVar(&o.preemptMinRun, "preempt-min-run", 0, "how long a job runs before the prescient policy may preempt it (0: the policy's, 10m)")
	f.BoolVar(&o.crossTenant, "allow-cross-tenant-sharing", false, "let jobs of different tenants share a GPU without MIG (MPS and time-slicing isolate no memory faults); a --fleet file's allow_cross_tenant_sharing sets it too")
	f.Float64Var(&o.powerCapPrice, "power-cap-price", 0, "cap each starting job's GPU power where (GPUs × power + PRICE) × slowdown is least on the Zeus V100 curve (as simulate's); in autopilot the node agents set the limits (0: no caps)")
	f.DurationVar(&o.idleJobAfter, "idle-job-after", telemetry.DefaultIdleJobAfter, "how long every GPU of a running job must be below the idle model's utilization threshold before an \"idle\" recommendation names it (negative: never)")
	f.StringVar(&o.tenantsFile, "tenants", "", "tenants file (weights, cohorts, quotas, tiers, caps; examples/tenants.yaml), read again when it changes and on SIGHUP; replaces the fleet's or the demo's tenants")
	f.DurationVar(&o.tenantsReload, "tenants-reload", control.DefaultTenantsReload, "how often the --tenants file is read again")
	f.StringVar(&o.tokens, "tokens", "", "YAML file of bearer tokens, each with a tenant and a role (viewer, submitter, admin, agent), read again when it changes and on SIGHUP")
	f.DurationVar(&o.tokensReload, "tokens-reload", defaultTokensReload, "how often the --tokens file is read again")
	f.BoolVar(&o.metricsToken, "metrics-need-token", false, "ask for a valid token on /metrics (open by default, as Prometheus expects)")
	f.StringVar(&o.webhooks, "webhooks", "", "YAML file of webhooks that hear job lifecycle events (signed with HMAC-SHA256)")
	f.StringVar(&o.influx.URL, "influx-url", "", "InfluxDB the collectors write to; without it telemetry is read from the embedded store (--db)")
	f.StringVar(&o.influx.Token, "influx-token", "", "InfluxDB token (\"user:password\" on InfluxDB 1.8)")
	f.StringVar(&o.influx.Org, "influx-org", "prescient", "InfluxDB organization (ignored by InfluxDB 1.8)")
	f.StringVar(&o.influx.Bucket, "influx-bucket", "prescient/autogen", "InfluxDB bucket (DATABASE/RETENTION_POLICY on InfluxDB 1.8)")
	f.Float64Var(&o.pricePerGPUH, "price-gpu-hour", 2.0, "price of one GPU-hour, for the dashboard's cost per workload")
	f.Float64Var(&o.pricePerKWh, "price-kwh", 0.15, "price of one kWh, for the dashboard's cost per workload")
	f.StringVar(&o.currency, "currency", "USD", "currency of the prices")
	f.DurationVar(&o.agentSilent, "agent-silent-after", 90*time.Second, "an agent not heard from for this long is reported silent")
	f.IntVar(&o.maxFailed, "max-failed-starts", control.DefaultMaxFailedStarts, "a job whose start the backend refuses this many times fails with the refusal as its reason (preemptions and lost nodes do not count)")
	f.StringSliceVar(&o.lend.Pools, "lend-pools", nil, "inference pools (values of the nodes' prescient.io/pool label) whose idle nodes are lent to training and taken back before the forecast demand returns; needs telemetry")
	f.DurationVar(&o.lend.Every, "lend-every", lend.DefaultEvery, "how often loans are decided, on a forecast of the pools' idle GPUs in steps this long")
	f.DurationVar(&o.lend.MinLoan, "lend-min-loan", lend.DefaultMinLoan, "lend a node only while the forecast keeps it idle this long")
	f.DurationVar(&o.lend.Notice, "lend-notice", lend.DefaultNotice, "how long the jobs on a node taken back have to checkpoint and stop")
	f.Float64Var(&o.lend.Level, "lend-level", lend.DefaultLevel, "the quantile of the idle model's forecast of idle GPUs lent on")
	f.DurationVar(&o.lend.Recent, "lend-recent", lend.DefaultRecent, "lend no more than was idle throughout this last stretch (the rule itself without an idle model); 0: the idle model alone, and nothing lent until one is published (as simulate's --lend-recent 0)")
	f.IntVar(&o.lend.Headroom, "lend-headroom", lending.DefaultHeadroom, "GPUs of an inference pool kept idle beyond the forecast (at least 1: a pool whose every GPU is busy gets a node back at once)")
	f.DurationVar(&o.lend.Handover, "lend-handover", lending.DefaultHandover, "how long a lent node waits for the inference service to move off before training is placed on it")
	f.DurationVar(&o.park.IdleAfter, "park-idle-after", 0, "park (power down) a node that ran nothing this long, and wake it when work needs it (0: never); see --park-suspend-program")
	f.BoolVar(&o.park.Forecast, "park-forecast", false, "with --park-idle-after: park an empty node at once when the forecast finds it spare over --park-lookahead, and wake parked nodes ahead of the forecast demand")
	f.DurationVar(&o.park.Lookahead, "park-lookahead", park.DefaultLookahead, "how far ahead --park-forecast weighs the GPUs coming free against those asked for")
	f.StringVar(&o.park.Suspend, "park-suspend-program", "", "program run with a node's name to power it down when it parks (as Slurm's SuspendProgram); without it the webhook node_parked or GET /v1/fleet tells the power manager")
	f.StringVar(&o.park.Resume, "park-resume-program", "", "program run with a node's name to power it up when it is woken (as Slurm's ResumeProgram); without it the webhook node_waking tells the power manager")
	f.DurationVar(&o.park.WakeTimeout, "park-wake-timeout", parking.DefaultWakeTimeout, "how long a woken node may take to be ready before the wake is given up")
	addDemoFlags(f, &o.demo)
	addKubeFlags(f, &o.kube)
	return cmd
}

// validateParking checks the --park-* flags.
func (o *serveOptions) validateParking() []error {
	pk := &o.park
	if pk.IdleAfter == 0 {
		if pk.Forecast || pk.Suspend != "" || pk.Resume != "" {
			return []error{errors.New("--park-idle-after: --park-forecast and the power programs need it (how long an empty node waits when the forecast does not park it at once)")}
		}
		return nil
	}
	var errs []error
	if pk.IdleAfter < 0 {
		errs = append(errs, fmt.Errorf("--park-idle-after %s: want a positive duration, or 0 to park nothing", pk.IdleAfter))
	}
	if pk.Lookahead <= 0 || pk.WakeTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--park-lookahead %s, --park-wake-timeout %s: want positive durations", pk.Lookahead, pk.WakeTimeout))
	}
	for _, prog := range []struct{ flag, path string }{{"--park-suspend-program", pk.Suspend}, {"--park-resume-program", pk.Resume}} {
		if prog.path == "" {
			continue
		}
		if _, err := exec.LookPath(prog.path); err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w", prog.flag, prog.path, err))
		}
	}
	return errs
}

// validateLending checks the --lend-* flags when --lend-pools is given,
// with lending.Config.Validate (lend.Settings.Validate, which simulate's
// flags go through too).
func (o *serveOptions) validateLending() []error {
	if len(o.lend.Pools) == 0 {
		return nil
	}
	if err := o.lend.Validate("--lend-"); err != nil {
		return []error{err}
	}
	return nil
}

// validate checks the flags that need no I/O; errors name the flag.
func (o *serveOptions) validate() error {
	var errs []error
	if o.demo.enabled {
		o.mode, o.backend = string(service.ModeAutopilot), "agent"
	}
	if o.mode != string(service.ModeAdvisor) && o.mode != string(service.ModeAutopilot) {
		errs = append(errs, fmt.Errorf("--mode %q: want advisor or autopilot", o.mode))
	}
	switch o.backend {
	case "agent", "sim", "kubernetes":
	default:
		errs = append(errs, fmt.Errorf("--backend %q: want agent, sim or kubernetes", o.backend))
	}
	if o.backend == "sim" && o.fleet == "" {
		errs = append(errs, errors.New("--fleet: --backend sim needs the fleet it simulates (e.g. uniform:4x8:A100-SXM4-80GB)"))
	}
	if o.backend == "agent" && o.fleet != "" && !o.demo.enabled {
		errs = append(errs, errors.New("--fleet: with --backend agent the fleet is what the agents register; leave --fleet out"))
	}
	if o.backend == "kubernetes" && o.fleet != "" {
		errs = append(errs, errors.New("--fleet: with --backend kubernetes the fleet is the cluster's Nodes; leave --fleet out"))
	}
	errs = append(errs, o.kube.validate(o.backend)...)
	if o.backfillDepth < 0 {
		errs = append(errs, fmt.Errorf("--backfill-depth %d: must not be negative", o.backfillDepth))
	}
	errs = append(errs, o.validateLending()...)
	errs = append(errs, o.validateParking()...)
	if o.tick <= 0 {
		errs = append(errs, fmt.Errorf("--tick %s: want a positive duration", o.tick))
	}
	if o.tokens != "" && o.tokensReload <= 0 {
		errs = append(errs, fmt.Errorf("--tokens-reload %s: want a positive duration", o.tokensReload))
	}
	if o.tenantsFile != "" && o.tenantsReload <= 0 {
		errs = append(errs, fmt.Errorf("--tenants-reload %s: want a positive duration", o.tenantsReload))
	}
	if o.maxFailed < 1 {
		errs = append(errs, fmt.Errorf("--max-failed-starts %d: want at least 1", o.maxFailed))
	}
	if o.grace < 0 || o.shutdownTimeout < 0 || o.agentSilent < 0 || o.preemptMinRun < 0 || o.whatIfBudget < 0 {
		errs = append(errs, errors.New("--grace, --shutdown-timeout, --agent-silent-after, --preempt-min-run and --whatif-budget must not be negative"))
	}
	if o.pricePerGPUH < 0 || o.pricePerKWh < 0 {
		errs = append(errs, errors.New("--price-gpu-hour and --price-kwh must not be negative"))
	}
	if o.influx.URL != "" {
		if err := o.influx.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("--influx-url/--influx-bucket: %w", err))
		}
	}
	if !contains(policies.Names(), o.policy) {
		errs = append(errs, fmt.Errorf("--policy %q: want one of %s", o.policy, joinNames(policies.Names())))
	}
	if o.retrainEvery < 0 {
		errs = append(errs, fmt.Errorf("--retrain-every %s is negative (0 turns retraining off)", o.retrainEvery))
	}
	if o.retrainEvery > 0 && o.models == "" {
		errs = append(errs, errors.New("--retrain-every needs --models (the registry directory)"))
	}
	if err := o.demo.validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// runServe wires the control plane and serves until ctx ends.
func runServe(ctx context.Context, g *globals, o serveOptions, stdout io.Writer) error {
	log := g.logger.With("component", "serve")
	if err := o.validate(); err != nil {
		return fmt.Errorf("serve: %w", err)
	}

	// 1. The durable state; nothing is served before it is there.
	st, err := store.Open(ctx, o.dbPath, store.WithLogger(g.logger))
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	defer st.Close()

	// 2. Who may call: the tokens file, and the demo's own tokens.
	tokenFile, err := serveTokens(o, g.logger)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	var tokens api.Tokens
	if tokenFile != nil {
		tokens.List = slices.Clone(tokenFile.Current().List) // the demo's are added to a copy
	}
	fromFile := len(tokens.List)
	var demo *demoSetup
	if o.demo.enabled {
		if demo, err = newDemo(ctx, g, &o, st, &tokens); err != nil {
			return fmt.Errorf("serve: --demo: %w", err)
		}
	}
	if len(tokens.List) == 0 {
		log.Warn("no --tokens file: every /v1 request will be refused (401); the probes, /metrics and the dashboard page stay open")
	}

	// 3. The telemetry store; the models: forecasts from the registry,
	// retraining into it (peak memory of finished jobs from telemetry).
	var telemetry collector.TelemetryStore = collector.NewEmbeddedSink(st)
	if o.influx.URL != "" {
		if telemetry, err = collector.NewInfluxQuery(o.influx); err != nil {
			return fmt.Errorf("serve: --influx-url: %w", err)
		}
	}
	jobMemory, _ := telemetry.(training.JobMemoryReader) // both stores answer it
	reg := training.Registry{Dir: o.models}
	forecaster := newLiveForecaster(reg, g.logger)
	retrain := func(ctx context.Context) error {
		if o.models == "" {
			return fmt.Errorf("%w: serve was started without --models", service.ErrInvalid)
		}
		err := training.Retrain(ctx, st, jobMemory, reg, training.Config{Seed: 1, Logger: g.logger})
		forecaster.reload() // what one target published serves even when another failed
		return err
	}
	stopRetraining := startRetraining(ctx, g, o.retrainEvery, retrain)
	defer stopRetraining() // before the store closes

	// 4. The backend and where the fleet's nodes come from.
	backend, nodes, hub, err := serveBackend(o, g, st)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	var kube *kubeBackend
	if kb, ok := backend.(*kubeBackend); ok {
		kube = kb
	}
	promReg := prometheus.NewRegistry()
	promReg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	notifier, closeHooks, err := serveWebhooks(o.webhooks, g, promReg, st)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	defer closeHooks()

	// 5. The control plane itself.
	cfg := control.Config{
		Store: st, Nodes: nodes, Backend: backend, Policy: o.policy, Placement: o.placement,
		BackfillDepth: o.backfillDepth, WhatIfBudget: o.whatIfBudget, Forecaster: forecaster, PeakRefiner: forecaster, Registry: reg, Retrain: retrain,
		Telemetry: telemetry, Mode: service.Mode(o.mode), Tick: o.tick, Grace: o.grace, Logger: g.logger,
		PolicyOptions: policies.Options{PreemptMinRun: o.preemptMinRun},
		Prices:        control.Prices{PerGPUHour: o.pricePerGPUH, PerKWh: o.pricePerKWh, Currency: o.currency},
		IdleJobAfter:  o.idleJobAfter, PowerCapPrice: o.powerCapPrice, AllowCrossTenantSharing: o.crossTenant,
		MaxFailedStarts: o.maxFailed, Metrics: promReg,
	}
	if o.models != "" {
		cfg.Idle = newLiveIdle(reg, g.logger)
	}
	if len(o.lend.Pools) > 0 {
		cfg.Lending = &o.lend
	}
	if o.park.IdleAfter > 0 {
		cfg.Parking = &o.park
	}
	if sf, ok := nodes.(service.StaticFleet); ok && sf.Fleet != nil {
		cfg.Tenants = sf.Fleet.Tenants // a --fleet file's tenants
	}
	if demo != nil {
		cfg.Tenants = demo.fleet.Tenants
	}
	if o.tenantsFile != "" {
		if cfg.TenantsFile, err = tenants.Open(o.tenantsFile, g.logger); err != nil {
			return fmt.Errorf("serve: --tenants: %w", err)
		}
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
		cfg.TenantsReload, cfg.TenantsSignal = o.tenantsReload, hup
	}
	if notifier != nil {
		cfg.Notifier = notifier
	}
	if kube != nil {
		cfg.Recommendations = kube // advisor: recommendations on the pods
		cfg.Cordoner = kube        // a parked node is cordoned; one left cordoned is uncordoned
	}
	plane, err := control.New(cfg)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	planeErr := make(chan error, 1)
	if kube != nil {
		kube.SetService(plane)
		go func() { planeErr <- runPlane(ctx, g, o.kube, kube.client, plane) }()
	} else {
		go func() { planeErr <- plane.Run(ctx) }()
	}

	// 6. The HTTP API; bind first so that a taken port fails loudly.
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("serve: --listen %s: %w", o.listen, err)
	}
	apiCfg := api.Config{
		Logger: g.logger, Version: version, Service: plane, Tokens: tokens, MetricsNeedToken: o.metricsToken,
		Dashboard: dashboard.Handler(), Registry: promReg,
		Checks: []api.ReadyCheck{{Name: "store", Check: st.Ping}, {Name: "control_plane", Check: readyCheck(plane.Ready())}},
	}
	if hub != nil {
		apiCfg.Agents = hub.Handler()
	}
	apiSrv := api.New(apiCfg)
	if tokenFile != nil {
		watchTokens(ctx, tokenFile, o.tokensReload, tokens.List[fromFile:], apiSrv.SetTokens, g.logger)
	}
	srv := &http.Server{Handler: apiSrv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Info("control plane serving", "listen", ln.Addr().String(), "db", o.dbPath, "mode", o.mode, "backend", o.backend, "policy", o.policy)

	// 7. The demo's agents, collector and job stream, once the API answers.
	if demo != nil {
		if err := demo.start(ctx, "http://"+ln.Addr().String(), plane, stdout); err != nil {
			cancel()
			_ = srv.Close()
			return fmt.Errorf("serve: --demo: %w", err)
		}
		defer demo.wait()
	}

	// 8. Serve until SIGINT/SIGTERM, then let in-flight requests finish.
	var runErr error
	select {
	case err := <-errc:
		runErr = fmt.Errorf("serve: %w", err)
	case err := <-planeErr:
		planeErr <- err
		if err != nil {
			runErr = fmt.Errorf("serve: control plane: %w", err)
		}
	case <-ctx.Done():
	}
	log.Info("shutting down", "timeout", o.shutdownTimeout)
	sctx, scancel := context.WithTimeout(context.Background(), o.shutdownTimeout)
	defer scancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		runErr = errors.Join(runErr, fmt.Errorf("serve: shutdown: %w", err))
	}
	cancel()
	if err := <-planeErr; err != nil && !errors.Is(err, context.Canceled) && runErr == nil {
		runErr = fmt.Errorf("serve: control plane: %w", err)
	}
	return runErr
}

// defaultTokensReload is how often a --tokens file is read again.
const defaultTokensReload = 10 * time.Second

// serveTokens opens --tokens, if given.
func serveTokens(o serveOptions, log *slog.Logger) (*watchfile.File[api.Tokens], error) {
	if o.tokens == "" {
		return nil, nil
	}
	return openTokens(o.tokens, log)
}

// openTokens opens a tokens file (api.ParseTokens) to be read again.
func openTokens(path string, log *slog.Logger) (*watchfile.File[api.Tokens], error) {
	if log != nil {
		log = log.With("component", "tokens")
	}
	f, err := watchfile.Open(path, "tokens file", api.ParseTokens, log)
	if err != nil {
		return nil, fmt.Errorf("--tokens: %w", err)
	}
	return f, nil
}

// watchTokens reads the tokens file again every period and on SIGHUP,
// until ctx ends, and sets each new list, with the tokens given beside the
// file (the demo's), by set: a token struck from the file is refused from
// the next request on, without a restart. A file that does not read, or
// whose tokens clash with those beside it, leaves the tokens in force.
func watchTokens(ctx context.Context, f *watchfile.File[api.Tokens], every time.Duration, beside []api.Token, set func(api.Tokens), log *slog.Logger) {
	beside = slices.Clone(beside)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		f.Watch(ctx, every, hup, func(ts api.Tokens) {
			merged := api.Tokens{List: append(slices.Clone(ts.List), beside...)}
			if err := merged.Validate(); err != nil {
				log.Error("tokens file's tokens clash with the demo's; the tokens in force stay", "component", "tokens", "error", err)
				return
			}
			set(merged) // watchfile logs that the file is applied
		})
	}()
}

// serveBackend builds the backend of --backend and the source of nodes.
// hub is non-nil for the agent backend, whose routes the API mounts.
func serveBackend(o serveOptions, g *globals, st *store.Store) (executor.Backend, service.NodeSource, *agenthub.Hub, error) {
	switch o.backend {
	case "kubernetes":
		b, client, err := newKubeBackend(o.kube, g)
		if err != nil {
			return nil, nil, nil, err
		}
		kb := &kubeBackend{Backend: b, client: client}
		return kb, kb, nil, nil
	case "sim":
		fleet, err := datasets.ReadFleet(o.fleet)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("--fleet: %w", err)
		}
		b, err := simbackend.New(simbackend.Config{Duration: labelledDuration, Logger: g.logger})
		if err != nil {
			return nil, nil, nil, err
		}
		return b, service.StaticFleet{Fleet: fleet}, nil, nil
	default:
		hub := agenthub.NewHub(agenthub.HubOptions{SilentAfter: o.agentSilent, Logger: g.logger, BoundNode: tokenNode,
			Placement: placedNodes(st, g.logger)})
		return hub, hubNodes{hub}, hub, nil
	}
}

// tokenNode is the node an agent token is bound to (the tokens file's
// node), read from the principal the API's auth put on the request.
func tokenNode(r *http.Request) (string, bool) {
	p, ok := api.PrincipalFrom(r.Context())
	return p.Node, ok && p.Node != ""
}

// placedNodes says where the store places an attempt, for the hub to
// refuse an agent's word on another node's ranks after a restart: the
// nodes in order of first appearance among its allocations, as the hub
// ranks them. A store that cannot answer places nothing (and says so).
func placedNodes(st *store.Store, log *slog.Logger) func(job string, attempt int) ([]string, bool) {
	return func(job string, attempt int) ([]string, bool) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		pl, err := st.GetPlacement(ctx, cluster.JobID(job))
		if err != nil {
			if !errors.Is(err, store.ErrNotFound) {
				log.Error("agent hub: reading a placement", "job", job, "attempt", attempt, "error", err)
			}
			return nil, false
		}
		if pl.Attempt != attempt {
			return nil, false
		}
		var nodes []string
		for _, a := range pl.Allocations {
			if !slices.Contains(nodes, a.GPU.Node) {
				nodes = append(nodes, a.GPU.Node)
			}
		}
		return nodes, true
	}
}

// labelledDuration is how long a job runs on the simulated backend: its
// label duration_s, else one hour.
func labelledDuration(j *cluster.Job) time.Duration {
	if d, ok := durationLabel(j.Spec.Labels); ok {
		return d
	}
	return time.Hour
}

// hubNodes is the fleet the agents registered.
type hubNodes struct{ hub *agenthub.Hub }

// Nodes implements service.NodeSource. A node whose agent is not
// connected is drained: it keeps what runs there and takes nothing new
// until its agent is back.
func (h hubNodes) Nodes() []cluster.Node {
	st := h.hub.Nodes()
	out := make([]cluster.Node, len(st))
	for i, s := range st {
		out[i] = s.Node
		if !s.Connected && out[i].State == cluster.NodeReady {
			out[i].State = cluster.NodeDrained
		}
	}
	return out
}

// Connected reports whether the node's agent is connected, for the fleet
// view.
func (h hubNodes) Connected(node string) bool {
	for _, s := range h.hub.Nodes() {
		if s.Node.Name == node {
			return s.Connected
		}
	}
	return false
}

// webhookStore is the outbox of the webhooks and the recorder of the job
// events whose deliveries it writes with them (*store.Store).
type webhookStore interface {
	webhook.Outbox
	webhook.EventRecorder
}

// serveWebhooks starts the webhooks of --webhooks, with their outbox in the
// store, which writes each job event's deliveries in the transaction that
// records the event: events not delivered when serve stops, or is killed,
// are sent by the next run. close delivers what is queued (bounded) and
// stops them; it must run before the store closes.
func serveWebhooks(path string, g *globals, reg prometheus.Registerer, outbox webhookStore) (*webhook.Notifier, func(), error) {
	if path == "" {
		return nil, func() {}, nil
	}
	cfg, err := webhook.LoadConfig(path)
	if err != nil {
		return nil, nil, fmt.Errorf("--webhooks: %w", err)
	}
	n, err := webhook.New(cfg, webhook.Options{Logger: g.logger, Registerer: reg, Outbox: outbox, Recorder: outbox})
	if err != nil {
		return nil, nil, fmt.Errorf("--webhooks: %w", err)
	}
	return n, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = n.Close(ctx)
	}, nil
}

// readyCheck is ready once ch is closed.
func readyCheck(ch <-chan struct{}) func(context.Context) error {
	return func(context.Context) error {
		select {
		case <-ch:
			return nil
		default:
			return errors.New("recovering the queue from the store")
		}
	}
}

// startRetraining runs retrain on the schedule every (none when 0);
// the returned function stops it and waits for a run in progress.
func startRetraining(ctx context.Context, g *globals, every time.Duration, retrain func(context.Context) error) (wait func()) {
	if every == 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = training.Every(ctx, every, g.logger, retrain)
	}()
	return func() { cancel(); <-done }
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func joinNames(names []string) string { return strings.Join(names, ", ") }
