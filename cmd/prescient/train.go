package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/prescient-sched/prescient/collector"
	"github.com/prescient-sched/prescient/datasets"
	"github.com/prescient-sched/prescient/executor/sim"
	"github.com/prescient-sched/prescient/models"
	"github.com/prescient-sched/prescient/models/idle"
	"github.com/prescient-sched/prescient/store"
	"github.com/prescient-sched/prescient/training"
)

type trainOptions struct {
	target   string
	trace    string
	until    string
	models   string
	learners []string
	keep     int
	seed     int64
	gateWins int
	every    time.Duration
	series   string    // --target idle or memory: telemetry series, FORMAT:PATH
	idle     idleFlags // --target idle
	// --target memory: telemetry to fill in the trace's missing peaks from
	telemetryDB string
	influx      collector.InfluxOptions
	from, out   string // --target power
}

func newTrainCmd(g *globals) *cobra.Command {
	o := trainOptions{}
	cmd := &cobra.Command{
		Use:   "train",
		Short: "Fit the forecasting models, evaluate them on a later window and publish the best",
		Long: `Fit every learner (golearn forest, gorgonia MLP) and the history baselines on the
jobs of --trace submitted before --until, hold out the latest 15% of them as an
unseen window, select the model with the best gate metric on that window
(mae_log for duration, the pinball loss at P90 for memory) and publish it to the
registry in --models only when it is not worse than the serving version on the
same window. With --every, retrain on that schedule until interrupted.

--target memory learns from the jobs' peak GPU memory; with --telemetry-db or
--influx-url, finished jobs of the trace without one get it from the fleet's
telemetry first (the most their processes held on one GPU, as the collector
recorded it), read again at every run.

--target memory with --series FORMAT:PATH (genai-memory) fits the online
refinement of a running job's peak GPU memory instead (as evaluate --series
scores it) and publishes the learner that reserves least among those whose
P90 covers 90% of the scored peaks to the registry's peak target, which the
control plane uses to re-forecast running jobs' memory.

--target idle fits the idle-window forecaster on telemetry series (--series
FORMAT:PATH, a file or a folder of files) instead: a quarter of the series
is held out and scored (with a single series, its last quarter of time).

--target power measures each GPU model's draw in the fleet's telemetry
(--telemetry-db or --influx-url) between --from and --until: the median idle
draw and the mean working draw as fractions of the power limit, written to
--out for simulate --power-model.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runTrain(cmd, g, o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.target, "target", "duration", "what to forecast: duration, memory (with --series: the online peak refinement), idle, or power (each GPU model's draw from telemetry, to --out)")
	f.StringVar(&o.from, "from", "", "--target power: the telemetry window's start (YYYY-MM-DD or RFC 3339; default a week before --until)")
	f.StringVar(&o.out, "out", "", "--target power: write the measured power model (JSON, for simulate --power-model) to this file")
	f.StringVar(&o.series, "series", "", "--target idle: telemetry series, FORMAT:PATH ("+idleSeriesFormats()+"); PATH a file or a folder")
	o.idle.register(cmd, false)
	f.StringVar(&o.trace, "trace", "", "job history, FORMAT:PATH ("+traceFormatNames()+")")
	f.StringVar(&o.until, "until", "", "train only on jobs submitted before this date (YYYY-MM-DD or RFC 3339)")
	f.StringVar(&o.models, "models", "", "model registry directory")
	f.StringSliceVar(&o.learners, "learners", nil, "learners to fit (default all): "+learnerNames())
	f.IntVar(&o.keep, "keep", training.DefaultKeep, "versions to keep in the registry")
	f.Int64Var(&o.seed, "seed", 1, "random seed")
	f.IntVar(&o.gateWins, "gate-windows", training.DefaultGateWindows, "select the model on this many windows of the latest jobs, each the holdout's size (1: the holdout alone; each more costs every learner a fit)")
	f.DurationVar(&o.every, "every", 0, "retrain on this schedule (e.g. 6h) until interrupted; 0 trains once")
	f.StringVar(&o.telemetryDB, "telemetry-db", "", "--target memory: fill the peak GPU memory of finished jobs without one from the telemetry in this SQLite file (the embedded store, --db of collect/serve)")
	f.StringVar(&o.influx.URL, "influx-url", "", "--target memory: fill missing peaks from the telemetry in this InfluxDB instead")
	f.StringVar(&o.influx.Token, "influx-token", "", "InfluxDB token (\"user:password\" on InfluxDB 1.8)")
	f.StringVar(&o.influx.Org, "influx-org", "prescient", "InfluxDB organization (ignored by InfluxDB 1.8)")
	f.StringVar(&o.influx.Bucket, "influx-bucket", "prescient/autogen", "InfluxDB bucket (DATABASE/RETENTION_POLICY on InfluxDB 1.8)")
	return cmd
}

func learnerNames() string {
	var names []string
	for _, l := range models.Learners() {
		names = append(names, l.Name)
	}
	return strings.Join(names, ", ")
}

func runTrain(cmd *cobra.Command, g *globals, o trainOptions) error {
	if o.target == string(idle.Target) {
		return runTrainIdle(cmd, g, o)
	}
	if o.target == targetPower {
		return runTrainPower(cmd, g, o)
	}
	if o.series != "" {
		if o.target != string(models.TargetMemory) {
			return fmt.Errorf("--series: only --target memory (the online peak refinement) and --target idle read series")
		}
		return runTrainPeak(cmd, g, o)
	}
	cfg, reg, err := o.config(g)
	if err != nil {
		return err
	}
	mem, closeMem, err := o.jobMemory(cmd.Context(), g)
	if err != nil {
		return err
	}
	defer closeMem()
	once := func(ctx context.Context) error {
		res, err := datasets.ReadTrace(o.trace, datasets.ReadOptions{})
		if err != nil {
			return err
		}
		if mem != nil {
			start := time.Now()
			fill, err := training.FillPeakMemory(ctx, mem, res.Jobs)
			if err != nil {
				return err
			}
			g.logger.Info("peak GPU memory from telemetry", "component", "train", "jobs", len(res.Jobs), "without_peak", fill.Candidates,
				"filled", fill.Filled, "queries", fill.Queries, "took", time.Since(start).Round(time.Millisecond))
		}
		prog := newProgress(cmd.ErrOrStderr(), g)
		cfg.Progress = prog.update
		rep, err := training.TrainAndPublish(ctx, cfg, res.Jobs, reg)
		prog.done()
		if err != nil {
			return err
		}
		return g.print(cmd.OutOrStdout(), trainReport(rep))
	}
	if o.every < 0 {
		return fmt.Errorf("--every %s is negative (0 trains once)", o.every)
	}
	if o.every == 0 {
		return once(cmd.Context())
	}
	return training.Every(cmd.Context(), o.every, g.logger, once)
}

func (o trainOptions) config(g *globals) (training.Config, training.Registry, error) {
	t, err := models.ParseTarget(o.target)
	if err != nil {
		return training.Config{}, training.Registry{}, fmt.Errorf("--target: %w", err)
	}
	if o.trace == "" {
		return training.Config{}, training.Registry{}, fmt.Errorf("--trace: missing (FORMAT:PATH)")
	}
	if o.models == "" {
		return training.Config{}, training.Registry{}, fmt.Errorf("--models: missing (the registry directory)")
	}
	if o.keep < 1 {
		return training.Config{}, training.Registry{}, fmt.Errorf("--keep: %d is below 1", o.keep)
	}
	cfg := training.Config{Target: t, Learners: o.learners, Seed: o.seed, GateWindows: o.gateWins, Logger: g.logger}
	if o.until != "" {
		if cfg.Until, err = datasets.ParseTime(o.until); err != nil {
			return training.Config{}, training.Registry{}, fmt.Errorf("--until: %w", err)
		}
	}
	for _, l := range o.learners {
		if _, err := models.LookupLearner(l); err != nil {
			return training.Config{}, training.Registry{}, fmt.Errorf("--learners: %w", err)
		}
	}
	return cfg, training.Registry{Dir: o.models, Keep: o.keep}, nil
}

// trainReport prints a training or evaluation report.
type trainReport training.Report

func (r trainReport) writeTable(w io.Writer) error {
	t := newTable(w)
	t.row("target", r.Target)
	t.row("model version", r.ModelVersion)
	t.row("training rows", r.Rows)
	t.row("evaluated", fmt.Sprintf("%d jobs from %s to %s", r.EvaluatedRows, r.EvaluatedFrom.Format(time.RFC3339), r.EvaluatedUntil.Format(time.RFC3339)))
	t.row("selected", r.Selected)
	if r.Gate != "" {
		t.row("gate", r.Gate)
	}
	if err := t.flush(); err != nil {
		return err
	}
	u := models.Target(r.Target).Unit()
	t = newTable(w)
	t.row("", "model", "kind", "mae_"+u, "median_ae_"+u, "mae_log", "spearman", "p90_coverage", "fit_s")
	for _, kind := range []struct {
		name string
		m    map[string]map[string]float64
	}{{"learned", r.Models}, {"baseline", r.Baselines}} {
		names := make([]string, 0, len(kind.m))
		for n := range kind.m {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			m := kind.m[n]
			fit := "-"
			if v, ok := m["fit_s"]; ok {
				fit = fmt.Sprintf("%.2f", v)
			}
			t.row("", n, kind.name, fmt.Sprintf("%.4g", m["mae_"+u]), fmt.Sprintf("%.4g", m["median_ae_"+u]),
				fmt.Sprintf("%.3f", m["mae_log"]), fmt.Sprintf("%.3f", m["spearman"]), fmt.Sprintf("%.3f", m["p90_coverage"]), fit)
		}
	}
	return t.flush()
}

// jobMemory opens the telemetry --target memory fills missing peaks from:
// InfluxDB (--influx-url) or the embedded store (--telemetry-db); nil
// without either.
func (o trainOptions) jobMemory(ctx context.Context, g *globals) (training.JobMemoryReader, func(), error) {
	nothing := func() {}
	if o.telemetryDB == "" && o.influx.URL == "" {
		return nil, nothing, nil
	}
	switch {
	case o.target != string(models.TargetMemory) && o.target != targetPower:
		return nil, nothing, fmt.Errorf("--telemetry-db/--influx-url: only --target memory and --target power read telemetry")
	case o.telemetryDB != "" && o.influx.URL != "":
		return nil, nothing, fmt.Errorf("--telemetry-db and --influx-url: give one")
	case o.influx.URL != "":
		if err := o.influx.Validate(); err != nil {
			return nil, nothing, fmt.Errorf("--influx-url/--influx-bucket: %w", err)
		}
		q, err := collector.NewInfluxQuery(o.influx)
		if err != nil {
			return nil, nothing, fmt.Errorf("--influx-url: %w", err)
		}
		return q, q.Close, nil
	}
	if _, err := os.Stat(o.telemetryDB); err != nil {
		return nil, nothing, fmt.Errorf("--telemetry-db: %w", err)
	}
	st, err := store.Open(ctx, o.telemetryDB, store.WithLogger(g.logger))
	if err != nil {
		return nil, nothing, fmt.Errorf("--telemetry-db: %w", err)
	}
	return collector.NewEmbeddedSink(st), func() { st.Close() }, nil
}

// runTrainPeak fits and publishes the online peak refinement (--target
// memory --series).
func runTrainPeak(cmd *cobra.Command, g *globals, o trainOptions) error {
	if o.models == "" {
		return fmt.Errorf("--models: missing (the registry directory)")
	}
	if o.keep < 1 {
		return fmt.Errorf("--keep: %d is below 1", o.keep)
	}
	cfg := training.DefaultPeakConfig()
	cfg.Learners, cfg.Seed = o.learners, o.seed
	for _, l := range o.learners {
		if _, err := models.LookupLearner(l); err != nil {
			return fmt.Errorf("--learners: %w", err)
		}
	}
	series, err := datasets.ReadSeries(o.series)
	if err != nil {
		return fmt.Errorf("--series: %w", err)
	}
	rep, err := training.TrainPeak(cmd.Context(), cfg, series, training.Registry{Dir: o.models, Keep: o.keep})
	if err != nil {
		return err
	}
	return g.print(cmd.OutOrStdout(), peakReport(rep))
}

// targetPower is train's --target for the measured power model.
const targetPower = "power"

// runTrainPower measures the fleet's power model from its telemetry and
// writes it to --out.
func runTrainPower(cmd *cobra.Command, g *globals, o trainOptions) error {
	if o.out == "" {
		return fmt.Errorf("--out: missing (the file the power model is written to)")
	}
	if o.telemetryDB == "" && o.influx.URL == "" {
		return fmt.Errorf("--target power: give the telemetry with --telemetry-db FILE or --influx-url URL")
	}
	until := time.Now().UTC()
	if o.until != "" {
		t, err := datasets.ParseTime(o.until)
		if err != nil {
			return fmt.Errorf("--until: %w", err)
		}
		until = t
	}
	from := until.Add(-7 * 24 * time.Hour)
	if o.from != "" {
		t, err := datasets.ParseTime(o.from)
		if err != nil {
			return fmt.Errorf("--from: %w", err)
		}
		from = t
	}
	mem, closeMem, err := o.jobMemory(cmd.Context(), g)
	if err != nil {
		return err
	}
	defer closeMem()
	ts, ok := mem.(collector.TelemetryStore)
	if !ok {
		return fmt.Errorf("--target power: the telemetry store does not answer series queries")
	}
	fit, err := training.FitPower(cmd.Context(), ts, from, until, idle.DefaultConfig().ThresholdPct)
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(fit, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(o.out, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	return g.print(cmd.OutOrStdout(), powerReport{fit})
}

// powerReport prints a measured power model.
type powerReport struct{ *sim.PowerFile }

func (r powerReport) writeTable(w io.Writer) error {
	t := newTable(w)
	t.row("window", r.From.Format(time.RFC3339)+" to "+r.Until.Format(time.RFC3339))
	for _, m := range r.Models {
		t.row(m.Model, fmt.Sprintf("%d GPUs, limit %.0f W: idle %.3f (%.0f W) over %d minutes, working %.3f (%.0f W) over %d",
			m.GPUs, m.LimitW, m.IdleFraction, m.IdleFraction*m.LimitW, m.IdleMinutes, m.LoadFraction, m.LoadFraction*m.LimitW, m.BusyMinutes))
	}
	return t.flush()
}
