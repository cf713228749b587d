package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/prescient-sched/prescient/collector"
	"github.com/prescient-sched/prescient/datasets"
	"github.com/prescient-sched/prescient/training"
)

// The idle target reads telemetry series (--series), not job traces; its
// paths through train and evaluate live here.

// idleFlags are the settings of idle training and evaluation.
type idleFlags struct {
	threshold float64
	poolSize  int
	minWindow time.Duration
	horizon   time.Duration
	holdout   float64
}

// register adds the idle flags of train (evaluate false) or evaluate; the
// model's threshold and pool size are fixed at training.
func (f *idleFlags) register(cmd *cobra.Command, evaluate bool) {
	d := training.DefaultIdleConfig()
	f.threshold, f.poolSize, f.holdout = d.Model.ThresholdPct, d.Model.PoolSize, d.TestShare
	fl := cmd.Flags()
	if !evaluate {
		fl.Float64Var(&f.threshold, "idle-threshold", d.Model.ThresholdPct, "idle target: utilization (%) below which a device is idle")
		fl.IntVar(&f.poolSize, "pool-size", d.Model.PoolSize, "idle target: devices per pool when the series are per-device utilization (genai, influx)")
		fl.Float64Var(&f.holdout, "holdout", d.TestShare, "idle target: share of the series held out and scored (0 trains on all and scores nothing)")
	} else {
		fl.DurationVar(&f.horizon, "horizon", d.Horizon, "idle target: how far ahead to score (a multiple of 5m, at most 2h)")
	}
	fl.DurationVar(&f.minWindow, "min-window", d.MinWindow, "idle target: length of the idle windows scored for precision and recall")
}

func (f idleFlags) config(g *globals, series string) (training.IdleConfig, error) {
	cfg := training.DefaultIdleConfig()
	cfg.Model.ThresholdPct, cfg.Model.PoolSize, cfg.MinWindow = f.threshold, f.poolSize, f.minWindow
	if !(f.holdout >= 0 && f.holdout < 1) {
		return cfg, fmt.Errorf("--holdout %g: want a share in [0, 1)", f.holdout)
	}
	cfg.TestShare = f.holdout
	if f.horizon != 0 {
		cfg.Horizon = f.horizon
	}
	cfg.Logger = g.logger
	cfg.SeriesFormat, _, _ = strings.Cut(series, ":")
	if err := cfg.Model.Validate(); err != nil {
		return cfg, fmt.Errorf("--idle-threshold, --pool-size: %w", err)
	}
	if cfg.MinWindow%cfg.Model.ForecastStep != 0 || cfg.MinWindow <= 0 || cfg.MinWindow > cfg.Model.Horizon {
		return cfg, fmt.Errorf("--min-window %s: want a multiple of %s up to %s", cfg.MinWindow, cfg.Model.ForecastStep, cfg.Model.Horizon)
	}
	if cfg.Horizon%cfg.Model.ForecastStep != 0 || cfg.Horizon <= 0 || cfg.Horizon > cfg.Model.Horizon {
		return cfg, fmt.Errorf("--horizon %s: want a multiple of %s up to %s", cfg.Horizon, cfg.Model.ForecastStep, cfg.Model.Horizon)
	}
	return cfg, nil
}

// readSeries reads --series: a file or folder through the datasets
// registry, or, for influx, a live InfluxDB through the collector's query
// API.
func readSeries(ctx context.Context, spec string) ([]datasets.Series, error) {
	if sel, ok := strings.CutPrefix(spec, "influx:"); ok {
		return readInfluxSeries(ctx, sel)
	}
	return datasets.ReadSeries(spec)
}

func runTrainIdle(cmd *cobra.Command, g *globals, o trainOptions) error {
	if o.series == "" {
		return fmt.Errorf("--series: missing (FORMAT:PATH, FORMAT one of %s)", idleSeriesFormats())
	}
	if o.models == "" {
		return fmt.Errorf("--models: missing (the registry directory)")
	}
	switch {
	case o.trace != "":
		return fmt.Errorf("--trace: the idle target reads --series, not a job trace")
	case o.until != "" || len(o.learners) > 0 || o.every != 0:
		return fmt.Errorf("--until, --learners and --every do not apply to --target idle (it holds out --holdout of the series)")
	}
	cfg, err := o.idle.config(g, o.series)
	if err != nil {
		return err
	}
	cfg.Model.Seed = o.seed
	series, err := readSeries(cmd.Context(), o.series)
	if err != nil {
		return err
	}
	prog := newProgress(cmd.ErrOrStderr(), g)
	cfg.Progress = prog.update
	rep, err := training.TrainIdle(cmd.Context(), cfg, series, training.Registry{Dir: o.models, Keep: o.keep})
	prog.done()
	if err != nil {
		return err
	}
	return g.print(cmd.OutOrStdout(), idleReport(rep))
}

func runEvaluateIdle(cmd *cobra.Command, g *globals, o evaluateOptions) error {
	if o.models == "" || o.series == "" || o.from == "" {
		return fmt.Errorf("--models, --series and --from are required for --target idle")
	}
	if o.trace != "" {
		return fmt.Errorf("--trace: the idle target reads --series, not a job trace")
	}
	from, err := datasets.ParseTime(o.from)
	if err != nil {
		return fmt.Errorf("--from: %w", err)
	}
	cfg, err := o.idle.config(g, o.series)
	if err != nil {
		return err
	}
	art, err := training.Registry{Dir: o.models}.LoadCurrentIdle()
	if err != nil {
		return err
	}
	series, err := readSeries(cmd.Context(), o.series)
	if err != nil {
		return err
	}
	rep, err := training.EvaluateIdle(cmd.Context(), cfg, art, series, from)
	if err != nil {
		return err
	}
	return g.print(cmd.OutOrStdout(), idleReport(rep))
}

func idleSeriesFormats() string { return "helios, genai, philly-nodes, influx" }

// idleReport prints an idle evaluation.
type idleReport training.IdleReport

func (r idleReport) writeTable(w io.Writer) error {
	t := newTable(w)
	if r.ModelVersion > 0 {
		t.row("model version", r.ModelVersion)
	}
	if r.Published != nil {
		t.row("published", *r.Published)
	}
	if r.Gate != "" {
		t.row("gate", r.Gate)
	}
	names := r.ScoredSeries
	if len(names) > 6 {
		names = append(names[:6:6], "...")
	}
	t.row("series", fmt.Sprintf("%d read, %d scored: %s", r.Series, len(r.ScoredSeries), strings.Join(names, " ")))
	if r.TrainingRows > 0 {
		t.row("training rows / fit", fmt.Sprintf("%d / %.1f s", r.TrainingRows, r.FitS))
	}
	if r.Origins == 0 {
		t.row("evaluated", "nothing (--holdout 0)")
		return t.flush()
	}
	t.row("pools / origins", fmt.Sprintf("%d / %d", r.Pools, r.Origins))
	t.row("evaluated", fmt.Sprintf("%s to %s", r.EvaluatedFrom.Format(time.RFC3339), r.EvaluatedUntil.Format(time.RFC3339)))
	if err := t.flush(); err != nil {
		return err
	}
	t = newTable(w)
	base := "mae_seasonal"
	if len(r.Horizons) > 0 && r.Horizons[0].MAEMovingAverage != nil {
		base = "mae_moving_average"
	}
	t.row("", "horizon_s", "mae", "mae_persistence", base)
	for _, h := range r.Horizons {
		b := h.MAESeasonal
		if b == nil {
			b = h.MAEMovingAverage
		}
		t.row("", fmt.Sprintf("%.0f", h.HorizonS), fmt.Sprintf("%.3f", h.MAE), fmt.Sprintf("%.3f", h.MAEPersistence), fmt.Sprintf("%.3f", *b))
	}
	if err := t.flush(); err != nil {
		return err
	}
	t = newTable(w)
	wi := r.Windows
	t.row("windows", fmt.Sprintf("%.0f s", wi.MinLengthS), "precision", "recall")
	t.row("", "model (units idle throughout)", fmt.Sprintf("%.3f", wi.Precision), fmt.Sprintf("%.3f", wi.Recall))
	t.row("", "persistence", fmt.Sprintf("%.3f", wi.PrecisionPersistence), fmt.Sprintf("%.3f", wi.RecallPersistence))
	if wi.UnitPrecision != nil {
		t.row("", "model (each device)", fmt.Sprintf("%.3f", *wi.UnitPrecision), fmt.Sprintf("%.3f", *wi.UnitRecall))
		t.row("", "persistence (each device)", fmt.Sprintf("%.3f", *wi.UnitPrecisionPersisted), fmt.Sprintf("%.3f", *wi.UnitRecallPersisted))
	}
	return t.flush()
}

// readInfluxSeries reads --series influx:SELECTOR (see
// collector.ParseSeriesSelector). PRESCIENT_INFLUX_TOKEN gives the token
// when the selector's URL carries no user.
func readInfluxSeries(ctx context.Context, selector string) ([]datasets.Series, error) {
	sel, err := collector.ParseSeriesSelector(selector)
	if err != nil {
		return nil, fmt.Errorf("--series: %w", err)
	}
	if sel.Influx.Token == "" {
		sel.Influx.Token = os.Getenv("PRESCIENT_INFLUX_TOKEN")
	}
	q, err := collector.NewInfluxQuery(sel.Influx)
	if err != nil {
		return nil, fmt.Errorf("--series: %w", err)
	}
	defer q.Close()
	series, err := collector.ReadSeries(ctx, q, sel.Query)
	if err != nil {
		return nil, fmt.Errorf("--series: %w", err)
	}
	if len(series) == 0 {
		return nil, fmt.Errorf("--series: influx %s: no %s samples from %s to %s", sel.Influx.URL, sel.Query.Field,
			sel.Query.Start.Format(time.RFC3339), sel.Query.End.Format(time.RFC3339))
	}
	return series, nil
}
