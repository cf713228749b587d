package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/datasets"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/executor/lend"
	"github.com/prescient-sched/prescient/executor/park"
	"github.com/prescient-sched/prescient/executor/policies"
	"github.com/prescient-sched/prescient/executor/sim"
	"github.com/prescient-sched/prescient/models"
	"github.com/prescient-sched/prescient/predictor"
	"github.com/prescient-sched/prescient/training"
)

type simulateOptions struct {
	trace, fleet, policy  string
	tenants               string
	models                string
	oracle                bool
	oracleNoise           float64
	estimates             string
	from, until           string
	deadlines             string
	nodeMTBF, nodeRepair  time.Duration
	checkpoint            string
	checkpointCost, grace time.Duration
	seed                  uint64
	plot                  string
	limit                 int
	tierMix               map[string]string
	experiment, placement string
	tune                  float64
	parkIdleAfter         time.Duration
	parkForecast          bool
	parkWakeLast          bool
	dataCache             string
	datasets              string
	powerModel            string
	jobTypes              string
	powerCapPrice         float64
	carbonWait            time.Duration
	speeds                string
	fastestFirst          bool
	carbon                string
	inference, lend       string
	inferenceNodes        int
	lendRecent            time.Duration
	lending               *sim.Lending  // from --inference and --lend, built once for every policy
	arrivals              park.Arrivals // the trace's before --from (loadReplay)
	before                []cluster.Job // the trace's jobs submitted before --from (loadReplay)
	fromTime              time.Time     // --from (loadReplay)
}

func newSimulateCmd(g *globals) *cobra.Command {
	o := simulateOptions{}
	cmd := &cobra.Command{
		Use:   "simulate --trace FORMAT:PATH --fleet FORMAT:SPEC --policy NAME[,NAME...]",
		Short: "Replay a job trace on a fleet through the planner and report the schedule's figures",
		Long: `Replay a trace on a virtual clock through the same planner the control plane runs,
once per policy, and report job completion times, waits, utilization, deadlines,
preemptions, lost work, energy and fairness.

Policies: ` + policyList() + `

sjf-oracle and srtf-oracle always see true durations. easy-backfill and prescient
need forecasts: --models DIR (the learned P50/P90 of the model registry that
"prescient train" publishes; the predictor also learns from each job the replay
finishes) or --oracle (true durations, with --oracle-noise σ for log-normal
noise). On traces with users' time limits (swf), --estimates user plans with the
limits themselves, as Slurm's backfill does, and --estimates learned with the
limits Prescient would recommend from the --models forecasts (evaluate --target
limit, its calibration warmed up on the jobs before --from), never above the user's. Either way a job with a limit
that outlives its estimate is expected to run a step longer (1 min, 5, 15, 30,
1 h, 2, 5, ... up to its limit), and no job is stopped before its limit: the
trace's run times are replayed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runSimulate(cmd.Context(), g, &o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.trace, "trace", "", "job trace, FORMAT:PATH ("+traceFormatNames()+")")
	f.StringVar(&o.fleet, "fleet", "", "fleet, FORMAT:SPEC, e.g. uniform:50x8:V100")
	f.StringVar(&o.tenants, "tenants", "", "tenants file (weights, cohorts, quotas, tiers; examples/tenants.yaml): replaces the fleet's tenants, to try a change before serve applies it")
	f.StringVar(&o.policy, "policy", "fifo", "queue policy, or several separated by commas")
	f.StringVar(&o.models, "models", "", "model registry directory: learned duration forecasts")
	f.BoolVar(&o.oracle, "oracle", false, "forecast true durations")
	f.Float64Var(&o.oracleNoise, "oracle-noise", 0, "with --oracle, log-normal noise σ on the forecasts")
	f.StringVar(&o.estimates, "estimates", "", "run-time estimates for the policies that use forecasts, on traces with time limits: user (each job's limit) or learned (the limit recommended from --models, as evaluate --target limit scores it)")
	f.StringVar(&o.from, "from", "", "replay only jobs submitted from this date (YYYY-MM-DD or RFC 3339)")
	f.StringVar(&o.until, "until", "", "replay only jobs submitted before this date; the replay still runs until every job has finished")
	f.StringVar(&o.deadlines, "deadlines", "", "FRACTION:SLACK: give FRACTION of jobs the deadline submit + SLACK × true duration")
	f.StringVar(&o.jobTypes, "job-types", "", "gavel: label every job with one of Gavel's 26 job types, drawn uniformly with --seed, so that --speeds gavel runs it at its type's speed on each GPU model")
	f.StringVar(&o.datasets, "datasets", "", "N:SIZE: give every job one of N datasets of SIZE (e.g. 200:500GB), drawn by Zipf popularity, for --data-cache")
	f.DurationVar(&o.nodeMTBF, "node-mtbf", 0, "mean time between failures of one node (0: none)")
	f.DurationVar(&o.nodeRepair, "node-repair", time.Hour, "time a failed node stays down")
	f.StringVar(&o.checkpoint, "checkpoint", "", "periodic checkpoints: none, young-daly, young-daly:MAXLOSS (interval at most MAXLOSS) or fixed:DURATION (default: the policy's own)")
	f.DurationVar(&o.checkpointCost, "checkpoint-cost", 60*time.Second, "time one checkpoint takes")
	f.DurationVar(&o.grace, "grace", policies.DefaultGrace, "time a preempted job has to checkpoint before it is stopped")
	f.Uint64Var(&o.seed, "seed", 1, "seed for deadlines, failures and oracle noise")
	f.StringVar(&o.plot, "plot", "", "write JCT CDFs and queue length over time to this SVG file")
	f.StringToStringVar(&o.tierMix, "tier-mix", nil, "give jobs seeded tiers by weight, e.g. production=0.1,standard=0.5,batch=0.25,opportunistic=0.15")
	f.IntVar(&o.limit, "limit", 0, "replay only the first N jobs (after --from; 0: all)")
	f.StringVar(&o.inference, "inference", "", "FORMAT:PATH: an inference pool beside the fleet, one replica per device of a utilization series (genai, influx), busy at 5% or more; its nodes run training only while --lend lends them")
	f.IntVar(&o.inferenceNodes, "inference-nodes", 0, "with --inference: how many 8-GPU inference nodes to add (0: enough for the replicas)")
	f.StringVar(&o.lend, "lend", "none", "with --inference: none, oracle, recent:DURATION (what was idle that long) or model:DIR[@LEVEL] (the idle model's LEVEL quantile, default 0.1): lend idle inference nodes to training for at least 30m and take them back before the forecast demand returns (a directory with an @ needs the @LEVEL)")
	f.DurationVar(&o.lendRecent, "lend-recent", lend.DefaultRecent, "with --lend model:DIR: lend no more than was idle throughout this last stretch as well (0: the model alone, as serve's --lend-recent 0)")
	addPlacementFlags(f, &o)
	return cmd
}

func policyList() string {
	var b strings.Builder
	for _, n := range policies.Names() {
		fmt.Fprintf(&b, "\n  %-14s %s", n, policies.Doc(n))
	}
	return b.String()
}

func (o *simulateOptions) validate() error {
	var errs []error
	if o.trace == "" {
		errs = append(errs, errors.New("--trace is required"))
	}
	if o.fleet == "" {
		errs = append(errs, errors.New("--fleet is required"))
	}
	if o.models != "" && o.oracle {
		errs = append(errs, errors.New("--models and --oracle: give one"))
	}
	if o.oracleNoise != 0 && !o.oracle {
		errs = append(errs, errors.New("--oracle-noise needs --oracle"))
	}
	switch o.estimates {
	case "":
	case estimatesUser:
		if o.models != "" || o.oracle {
			errs = append(errs, errors.New("--estimates user plans with the users' limits; leave --models and --oracle out"))
		}
	case estimatesLearned:
		if o.models == "" {
			errs = append(errs, errors.New("--estimates learned needs --models DIR"))
		}
	default:
		errs = append(errs, fmt.Errorf("--estimates %q: want user or learned", o.estimates))
	}
	if o.limit < 0 {
		errs = append(errs, fmt.Errorf("--limit: %d is negative", o.limit))
	}
	if o.inferenceNodes < 0 {
		errs = append(errs, fmt.Errorf("--inference-nodes: %d is negative", o.inferenceNodes))
	}
	if o.inference == "" && (o.lend != "none" || o.inferenceNodes != 0) {
		errs = append(errs, errors.New("--lend and --inference-nodes need --inference"))
	}
	if spec, err := parseLendSpec(o.lend); err != nil {
		errs = append(errs, fmt.Errorf("--lend: %w", err))
	} else if err := o.lendSettings(spec).Validate("--lend-"); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, o.validatePlacement()...)
	for _, p := range strings.Split(o.policy, ",") {
		if _, err := policies.New(p, policies.Options{Checkpoint: o.checkpoint, Grace: o.grace}); err != nil {
			errs = append(errs, fmt.Errorf("--policy: %w", err))
		} else if policies.UsesForecasts(p) && !o.oracle && o.models == "" && o.estimates != estimatesUser {
			errs = append(errs, fmt.Errorf("--policy %s uses forecasts: give --models DIR, --oracle or --estimates user", p))
		}
	}
	return errors.Join(errs...)
}

// priorArrivals are the arrivals of the jobs submitted in the six hours
// (six time constants) before from: forecast parking's arrival rate at the
// start of a replay from the middle of a trace, as a control plane running
// before then would have counted it.
func priorArrivals(before []cluster.Job, from time.Time) park.Arrivals {
	var a park.Arrivals
	for _, j := range before {
		if from.Sub(j.SubmitTime) <= 6*park.ArrivalTau {
			a.Add(from, j.SubmitTime, float64(j.Spec.MilliGPUs())/cluster.MilliGPU)
		}
	}
	return a
}

// loadReplay reads the trace and fleet and applies --from, --limit and
// --deadlines; it warns of a replay that cannot say much (warnReplay).
func (o *simulateOptions) loadReplay(log *slog.Logger) ([]cluster.Job, map[cluster.JobID]cluster.Job, *cluster.Fleet, error) {
	fleet, err := datasets.ReadFleet(o.fleet)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("--fleet: %w", err)
	}
	if o.tenants != "" {
		if fleet.Tenants, err = readTenantsFile(o.tenants); err != nil {
			return nil, nil, nil, fmt.Errorf("--tenants: %w", err)
		}
	}
	res, err := datasets.ReadTrace(o.trace, datasets.ReadOptions{})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("--trace: %w", err)
	}
	if res.Untimed {
		return nil, nil, nil, fmt.Errorf("--trace %s: the list has no times or outcomes (%s): only --experiment fill can use it",
			o.trace, strings.Join(res.Missing, "; "))
	}
	jobs := res.Jobs
	var from time.Time
	if o.from != "" {
		if from, err = datasets.ParseTime(o.from); err != nil {
			return nil, nil, nil, fmt.Errorf("--from: %w", err)
		}
		var before []cluster.Job
		before, jobs = datasets.SplitByTime(jobs, from)
		o.arrivals = priorArrivals(before, from)
		o.before, o.fromTime = before, from
	}
	if o.until != "" {
		until, err := datasets.ParseTime(o.until)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("--until: %w", err)
		}
		if !from.IsZero() && !until.After(from) {
			return nil, nil, nil, fmt.Errorf("--until %s: want a time after --from %s", o.until, o.from)
		}
		jobs, _ = datasets.SplitByTime(jobs, until)
	}
	if o.limit > 0 && len(jobs) > o.limit {
		jobs = jobs[:o.limit]
	}
	o.warnReplay(log, res.Jobs, jobs, fleet)
	orig := make(map[cluster.JobID]cluster.Job, len(jobs))
	for _, j := range jobs {
		orig[j.ID] = j.Clone()
	}
	if len(o.tierMix) > 0 {
		mix, err := parseTierMix(o.tierMix)
		if err != nil {
			return nil, nil, nil, err
		}
		if err := sim.AssignTiers(jobs, mix, o.seed); err != nil {
			return nil, nil, nil, fmt.Errorf("--tier-mix: %w", err)
		}
	}
	if o.deadlines != "" {
		d, err := sim.ParseDeadlineSpec(o.deadlines)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("--deadlines: %w", err)
		}
		sim.AssignDeadlines(jobs, d, o.seed)
	}
	if o.jobTypes != "" {
		if o.jobTypes != speedsGavel {
			return nil, nil, nil, fmt.Errorf("--job-types %q: want %s", o.jobTypes, speedsGavel)
		}
		sim.AssignJobTypes(jobs, executor.JobTypes(), o.seed)
	}
	if o.datasets != "" {
		d, err := sim.ParseDatasetSpec(o.datasets)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("--datasets: %w", err)
		}
		sim.AssignDatasets(jobs, d, o.seed)
	}
	return jobs, orig, fleet, nil
}

// warnReplay warns of a replay that cannot say much: a window with no job
// (a --from after the trace's end), and jobs the fleet can never run
// (they wait to the end, never finishing).
func (o *simulateOptions) warnReplay(log *slog.Logger, all, jobs []cluster.Job, fleet *cluster.Fleet) {
	if len(jobs) == 0 {
		last := time.Time{}
		for _, j := range all {
			if j.SubmitTime.After(last) {
				last = j.SubmitTime
			}
		}
		log.Warn("the replay holds no job: the trace's last submission is before --from", "component", "simulate",
			"trace", o.trace, "from", o.from, "last_submit", last)
	}
	never, first := 0, ""
	gpus := cluster.CountGPUs(fleet.Nodes)
	for _, j := range jobs {
		if err := gpus.Fits(j.Spec); err != nil {
			if never++; first == "" {
				first = fmt.Sprintf("%s: %v", j.ID, err)
			}
		}
	}
	if never > 0 {
		log.Warn("jobs the fleet can never run: they wait to the end and never finish", "component", "simulate",
			"jobs", never, "of", len(jobs), "first", first, "fleet", o.fleet)
	}
}

func runSimulate(ctx context.Context, g *globals, o *simulateOptions, stdout, stderr io.Writer) error {
	if o.experiment == experimentFill {
		return runFill(ctx, g, o, stdout, stderr)
	}
	if err := o.validate(); err != nil {
		return err
	}
	jobs, orig, fleet, err := o.loadReplay(g.logger)
	if err != nil {
		return err
	}
	if o.lending, err = o.inferenceLending(fleet); err != nil {
		return err
	}
	truth := replayTruth{durations: make(map[cluster.JobID]time.Duration, len(jobs)), orig: orig}
	for _, j := range jobs {
		truth.durations[j.ID] = j.Outcome.RunTime
	}
	if o.estimates == estimatesLearned && !o.fromTime.IsZero() {
		if truth.warm, truth.warmMedians, err = o.limitWarmup(); err != nil {
			return err
		}
	}
	var runs []*sim.Result
	for _, name := range strings.Split(o.policy, ",") {
		r, err := o.replay(ctx, g, name, jobs, fleet, truth, stderr)
		if err != nil {
			return err
		}
		runs = append(runs, r)
	}
	if o.plot != "" {
		if err := writePlot(o.plot, runs); err != nil {
			return fmt.Errorf("--plot: %w", err)
		}
	}
	return g.print(stdout, newSimulateReport(runs))
}

// speedsGavel is --speeds' one value: executor.GavelSpeeds.
const speedsGavel = "gavel"

// limitWarmup is what --estimates learned's calibration starts with: the
// labelled jobs before --from and the medians the registry's model serves
// them (training.ServedBefore), as evaluate --target limit starts.
func (o *simulateOptions) limitWarmup() ([]cluster.Job, []float64, error) {
	art, err := training.Registry{Dir: o.models}.LoadCurrent(models.TargetDuration)
	if err != nil {
		return nil, nil, fmt.Errorf("--models: %w", err)
	}
	jobs, med, err := training.ServedBefore(art, o.before, o.fromTime)
	if err != nil {
		return nil, nil, fmt.Errorf("--estimates learned: %w", err)
	}
	return jobs, med, nil
}

// replayTruth is what the forecasters may know: the true durations (for the
// oracle), the jobs as the trace recorded them (for learned models), and
// with --estimates learned, the jobs before --from with their served
// medians, which the limit calibration warms up on.
type replayTruth struct {
	durations   map[cluster.JobID]time.Duration
	orig        map[cluster.JobID]cluster.Job
	warm        []cluster.Job
	warmMedians []float64
}

func (o *simulateOptions) replay(ctx context.Context, g *globals, name string, jobs []cluster.Job, fleet *cluster.Fleet,
	truth replayTruth, stderr io.Writer) (*sim.Result, error) {
	pol, err := policies.New(name, policies.Options{Checkpoint: o.checkpoint, Grace: o.grace})
	if err != nil {
		return nil, err
	}
	if err := o.applyPlacement(&pol, fleet); err != nil {
		return nil, err
	}
	if o.fastestFirst {
		pol.Placer = &executor.FastestFirst{Inner: pol.Placer}
	}
	if o.carbonWait > 0 {
		if pol.Hold, err = carbonHold(o.carbonWait); err != nil {
			return nil, fmt.Errorf("--carbon-wait: %w", err)
		}
	}
	if o.powerCapPrice > 0 {
		if pol.PowerCap, err = executor.NewCostCapper(o.powerCapPrice, executor.ZeusV100Caps); err != nil {
			return nil, fmt.Errorf("--power-cap-price: %w", err)
		}
	}
	if o.speeds == speedsGavel {
		pol.Speed = executor.JobSpeed // the planner expects a placed job to run at its GPUs' speed
	}
	forecaster, err := o.forecaster(g, &pol, truth)
	if err != nil {
		return nil, err
	}
	planner, err := executor.New(pol, executor.WithLogger(g.logger))
	if err != nil {
		return nil, err
	}
	cfg := sim.Config{
		Fleet: fleet, Jobs: jobs, Planner: planner, Forecaster: forecaster, Preemptive: pol.Preemptor != nil, Order: pol.Order,
		NodeMTBF: o.nodeMTBF, NodeRepair: o.nodeRepair, CheckpointCost: o.checkpointCost, Seed: o.seed, Logger: g.logger,
		ParkIdleAfter: o.parkIdleAfter, ParkForecast: o.parkForecast, Arrivals: o.arrivals, WakeLast: o.parkWakeLast, Lending: o.lending,
	}
	if o.powerModel != "" {
		pf, err := sim.ReadPowerFile(o.powerModel)
		if err != nil {
			return nil, fmt.Errorf("--power-model: %w", err)
		}
		cfg.Power = pf.Power()
	}
	if o.dataCache != "" {
		if cfg.DataCacheBytes, err = cluster.ParseBytes(o.dataCache); err != nil {
			return nil, fmt.Errorf("--data-cache: %w", err)
		}
	}
	if o.speeds == speedsGavel {
		cfg.Speed = executor.JobSpeed
	}
	if cfg.Carbon, err = o.carbonSeries(); err != nil {
		return nil, err
	}
	bar := newProgress(stderr, g)
	cfg.Progress = func(done, total int) { bar.update(name, done, total) }
	r, err := sim.Run(ctx, cfg)
	bar.done()
	if err != nil {
		return nil, fmt.Errorf("simulate %s: %w", name, err)
	}
	r.Policy = name
	g.logger.Info("replay done", "component", "simulate", "policy", name, "jobs", r.Jobs, "finished", r.Finished,
		"withdrawn", r.Withdrawn, "sim_wall_s", r.SimWallS, "plan_cycles", r.PlanCycles)
	return r, nil
}

// The values of --estimates.
const (
	estimatesUser    = "user"
	estimatesLearned = "learned"
)

// forecaster picks a policy's forecasts: the exact oracle for the -oracle
// policies (and for those that read none), else learned models (a fresh
// predictor per run, since it learns from the jobs the run finishes) or the
// noised oracle.
func (o *simulateOptions) forecaster(g *globals, pol *executor.Policy, truth replayTruth) (executor.Forecaster, error) {
	switch {
	case pol.NeedsOracle || !policies.UsesForecasts(pol.Name):
		return executor.NewOracle(truth.durations, 0, o.seed)
	case o.estimates == estimatesUser:
		// A job without a limit would get its partition's, unknown here:
		// the longest limit of the trace stands in.
		var longest time.Duration
		for _, j := range truth.orig {
			longest = max(longest, j.Spec.TimeLimit)
		}
		return executor.UserEstimates{Default: longest}, nil
	case o.models != "":
		p, err := predictor.New(training.Registry{Dir: o.models}, g.logger)
		if err != nil {
			return nil, fmt.Errorf("--models: %w", err)
		}
		if o.estimates == estimatesLearned {
			le, err := predictor.NewLimitEstimates(predictor.Adapter{P: p, Trace: truth.orig}, models.DefaultLimitPolicy())
			if err != nil {
				return nil, err
			}
			le.WarmUp(truth.warm, truth.warmMedians, o.fromTime)
			return le, nil
		}
		return predictor.Adapter{P: p, Trace: truth.orig}, nil
	}
	return executor.NewOracle(truth.durations, o.oracleNoise, o.seed)
}

// simulateReport is one run's metrics, or {"runs": [...]} for several.
type simulateReport struct {
	runs []sim.Metrics
}

func newSimulateReport(rs []*sim.Result) simulateReport {
	out := simulateReport{}
	for _, r := range rs {
		out.runs = append(out.runs, r.Metrics)
	}
	return out
}

// MarshalJSON writes one object per run, or {"runs": [...]}.
func (r simulateReport) MarshalJSON() ([]byte, error) {
	if len(r.runs) == 1 {
		return json.Marshal(r.runs[0])
	}
	return json.Marshal(struct {
		Runs []sim.Metrics `json:"runs"`
	}{r.runs})
}

func (r simulateReport) writeTable(w io.Writer) error {
	t := newTable(w)
	t.row("POLICY", "JOBS", "FINISHED", "AVG JCT", "P99 JCT", "AVG WAIT", "BOUNDED SLOWDOWN", "GPU ALLOC", "DEADLINES MET", "PREEMPTIONS", "LOST GPU-H", "ENERGY KWH", "JAIN", "WORST TENANT", "WALL")
	for _, m := range r.runs {
		t.row(m.Policy, m.Jobs, m.Finished, hours(m.AvgJCTS), hours(m.P99JCTS), hours(m.AvgWaitS),
			fmt.Sprintf("%.2f", m.AvgBoundedSlowdown), fmt.Sprintf("%.1f%%", m.GPUAllocPct), deadlineCell(m), m.Preemptions, fmt.Sprintf("%.1f", m.LostGPUS/3600),
			fmt.Sprintf("%.0f", m.EnergyKWh), fmt.Sprintf("%.3f", m.JainFairness), fmt.Sprintf("%.2fx", m.WorstTenantWaitRatio),
			fmt.Sprintf("%.1fs", m.SimWallS))
	}
	if err := t.flush(); err != nil {
		return err
	}
	if r.runs[0].Lending == nil { // no --inference
		return nil
	}
	fmt.Fprintln(w)
	t = newTable(w)
	t.row("POLICY", "LENT GPU-H", "INFERENCE BUSY GPU-H", "INFERENCE SHORT GPU-H", "LOANS", "TAKEN BACK", "JOBS PREEMPTED")
	for _, m := range r.runs {
		l := m.Lending
		t.row(m.Policy, fmt.Sprintf("%.0f", l.LentGPUS/3600), fmt.Sprintf("%.0f", l.InferenceBusyGPUS/3600),
			fmt.Sprintf("%.1f", l.InferenceShortGPUS/3600), l.Loans, l.Reclaims, l.ReclaimPreemptions)
	}
	return t.flush()
}

func hours(s float64) string { return fmt.Sprintf("%.2fh", s/3600) }

func deadlineCell(m sim.Metrics) string {
	if m.DeadlineFeasible == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%% of %d", m.DeadlineMetPct, m.DeadlineFeasible)
}
