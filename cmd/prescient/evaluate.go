package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/datasets"
	"github.com/prescient-sched/prescient/models"
	"github.com/prescient-sched/prescient/models/idle"
	"github.com/prescient-sched/prescient/training"
)

type evaluateOptions struct {
	target   string
	models   string
	trace    string
	from     string
	until    string
	origins  []string
	rolling  string
	learners []string
	seed     int64
	gateWins int
	series   string
	folds    int
	idle     idleFlags
	runPast  float64
	dump     string
}

func newEvaluateCmd(g *globals) *cobra.Command {
	o := evaluateOptions{}
	cmd := &cobra.Command{
		Use:   "evaluate",
		Short: "Score the serving model, its fellow learners and the baselines on a later window",
		Long: `Load the serving version of --target from the registry in --models and score
every model it holds on the jobs of --trace submitted from --from on. Jobs
before --from serve only as history; each scored job's features see only jobs
that ended before it was submitted (Philly: submit + run time, as the trace has
no start times).

With --origins DATE,DATE,...,END (or --from, --until and --rolling 10d), a
rolling-origin backtest instead, without --models: at each origin but the
last, every learner is trained on the jobs submitted before it (nothing is
published) and scored, with the model the gate selects, on the window to the
next origin, the outcomes of that window feeding the features as they arrive.
It reports each window and each model's worst figures over them ("served" is
the gate's pick of each window).

With --series FORMAT:PATH (genai-memory), evaluate instead the online refinement
of the memory footprint: at each refinement point of a series (after its first
10 minutes, then every 30 minutes), the peak of the next 2 hours from all of the
series seen so far, fitted on 70% of the series and scored on the rest against
reserving the peak so far (× 1.2). With --models too, the serving refinement of
that registry is scored as published, fitted on nothing, on the series it was
not fitted or calibrated on. With --folds K instead, a cross-validation: every
series is scored once, by a refinement fitted, calibrated and chosen on the
series of the other folds.

With --target idle, score the idle-window forecaster on --series FORMAT:PATH
(helios, genai, philly-nodes, influx) from --from on, --horizon ahead: the
series it was not trained on (and the part of a series after its training
data), against persistence and the same time the day before (or, on series
shorter than two days, the mean of the last hour).

With --target limit, recommend a time limit for every job of --trace submitted
from --from on, from each model of the duration registry in --models: the
forecast's quantile at a level calibrated online so that about --run-past
percent of completed jobs would run past it, never above the user's own limit.
Scored on the jobs that completed: the share that ran past the limit, and
limit ÷ max(run time, 60 s), beside the users' own limits ("user").`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch o.target {
			case string(idle.Target):
				return runEvaluateIdle(cmd, g, o)
			case targetLimit:
				return runEvaluateLimits(cmd, g, o)
			}
			if o.dump != "" {
				return fmt.Errorf("--dump: writes the limits of --target limit only")
			}
			t, err := models.ParseTarget(o.target)
			if err != nil {
				return fmt.Errorf("--target: %w", err)
			}
			if o.series != "" {
				if t != models.TargetMemory {
					return fmt.Errorf("--series: the online refinement forecasts memory; use --target memory")
				}
				series, err := datasets.ReadSeries(o.series)
				if err != nil {
					return err
				}
				if o.folds != 0 {
					if o.models != "" {
						return fmt.Errorf("--folds: cross-validation fits its own refinement in each fold; leave --models out")
					}
					rep, err := training.CrossValidatePeak(cmd.Context(), training.DefaultPeakConfig(), series, o.folds)
					if err != nil {
						return fmt.Errorf("--folds %d: %w", o.folds, err)
					}
					return g.print(cmd.OutOrStdout(), peakCVReport(rep))
				}
				if o.models != "" {
					return evaluatePublishedPeak(cmd, g, o.models, series)
				}
				rep, err := training.EvaluatePeak(cmd.Context(), training.DefaultPeakConfig(), series)
				if err != nil {
					return err
				}
				return g.print(cmd.OutOrStdout(), peakReport(rep))
			}
			if len(o.origins) > 0 || o.rolling != "" {
				return runBacktest(cmd, g, o, t)
			}
			if o.models == "" || o.trace == "" || o.from == "" {
				return fmt.Errorf("--models, --trace and --from are required (or --origins for a backtest)")
			}
			from, until, err := o.window()
			if err != nil {
				return err
			}
			art, err := training.Registry{Dir: o.models}.LoadCurrent(t)
			if err != nil {
				return err
			}
			res, err := datasets.ReadTrace(o.trace, datasets.ReadOptions{})
			if err != nil {
				return err
			}
			rep, err := training.Evaluate(cmd.Context(), art, res.Jobs, from, until)
			if err != nil {
				return err
			}
			return g.print(cmd.OutOrStdout(), trainReport(rep))
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.target, "target", "duration", "what to evaluate: duration, memory, idle or limit (time limits from the duration models)")
	f.Float64Var(&o.runPast, "run-past", 100*models.DefaultLimitPolicy().RunPast, "--target limit: the percentage of completed jobs the limits' calibration lets run past them")
	f.StringVar(&o.dump, "dump", "", "--target limit: write every completed job's served median, margin and recommended limit, per model, to this CSV file")
	f.StringVar(&o.models, "models", "", "model registry directory")
	f.StringVar(&o.trace, "trace", "", "job history, FORMAT:PATH ("+traceFormatNames()+")")
	f.StringVar(&o.from, "from", "", "score the jobs submitted from this date on (YYYY-MM-DD or RFC 3339)")
	f.StringVar(&o.series, "series", "", "evaluate the online memory refinement on GPU-memory series (--target memory) or the idle forecaster (--target idle), FORMAT:PATH ("+seriesFormatNames()+", influx)")
	f.StringVar(&o.until, "until", "", "score only the jobs submitted before this date (with --from; with --rolling, the end of the last window)")
	f.IntVar(&o.folds, "folds", 0, "memory --series: cross-validate the refinement over this many folds of the series, each scored by one fitted and chosen on the others")
	f.StringSliceVar(&o.origins, "origins", nil, "backtest: train at each date but the last, score to the next (e.g. 2017-10-25,2017-11-10,2017-12-01)")
	f.StringVar(&o.rolling, "rolling", "", "backtest: origins every this long (e.g. 10d, 240h) from --from to --until (default: the trace's end)")
	f.StringSliceVar(&o.learners, "learners", nil, "backtest: learners to fit (default all): "+learnerNames())
	f.Int64Var(&o.seed, "seed", 1, "backtest: random seed")
	f.IntVar(&o.gateWins, "gate-windows", training.DefaultGateWindows, "backtest: the gate's windows at each origin (as train --gate-windows)")
	o.idle.register(cmd, true)
	return cmd
}

// window parses --from and, when given, --until, which must come after it.
func (o evaluateOptions) window() (from, until time.Time, err error) {
	if from, err = datasets.ParseTime(o.from); err != nil {
		return from, until, fmt.Errorf("--from: %w", err)
	}
	if o.until == "" {
		return from, until, nil
	}
	if until, err = datasets.ParseTime(o.until); err != nil {
		return from, until, fmt.Errorf("--until: %w", err)
	}
	if !until.After(from) {
		return from, until, fmt.Errorf("--until %s: want a time after --from %s", o.until, o.from)
	}
	return from, until, nil
}

// evaluatePublishedPeak is evaluate --target memory --series with
// --models: the serving peak refinement, not refitted, on the series it
// was not fitted on.
func evaluatePublishedPeak(cmd *cobra.Command, g *globals, dir string, series []datasets.Series) error {
	reg := training.Registry{Dir: dir}
	v, err := reg.Current(models.TargetPeak)
	if err != nil {
		return fmt.Errorf("--models %s: no peak refinement is published (train --target memory --series publishes one): %w", dir, err)
	}
	art, err := reg.LoadPeak(v)
	if err != nil {
		return fmt.Errorf("--models: %w", err)
	}
	rep, err := training.EvaluatePublishedPeak(art, series)
	if err != nil {
		return err
	}
	return g.print(cmd.OutOrStdout(), peakReport(rep))
}

// runBacktest is evaluate --origins or --rolling.
func runBacktest(cmd *cobra.Command, g *globals, o evaluateOptions, t models.Target) error {
	switch {
	case o.trace == "":
		return fmt.Errorf("--trace is required for a backtest")
	case o.models != "":
		return fmt.Errorf("--models: a backtest trains its own models at each origin (and publishes none); leave --models out")
	case len(o.origins) > 0 && o.rolling != "":
		return fmt.Errorf("--origins and --rolling: give one")
	case len(o.origins) > 0 && (o.from != "" || o.until != ""):
		return fmt.Errorf("--origins: the first origin and the last date are the span; leave --from and --until out")
	}
	res, err := datasets.ReadTrace(o.trace, datasets.ReadOptions{})
	if err != nil {
		return err
	}
	var origins []time.Time
	for i, s := range o.origins {
		at, err := datasets.ParseTime(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("--origins: date %d: %w", i+1, err)
		}
		origins = append(origins, at)
	}
	if o.rolling != "" {
		step, err := parseDays(o.rolling)
		if err != nil {
			return fmt.Errorf("--rolling: %w", err)
		}
		if o.from == "" {
			return fmt.Errorf("--rolling needs --from, the first origin")
		}
		from, err := datasets.ParseTime(o.from)
		if err != nil {
			return fmt.Errorf("--from: %w", err)
		}
		until := traceEnd(res.Jobs)
		if o.until != "" {
			if until, err = datasets.ParseTime(o.until); err != nil {
				return fmt.Errorf("--until: %w", err)
			}
		}
		if origins, err = training.RollingOrigins(from, until, step); err != nil {
			return fmt.Errorf("--rolling: %w", err)
		}
	}
	cfg := training.Config{Target: t, Learners: o.learners, Seed: o.seed, GateWindows: o.gateWins, Logger: g.logger}
	prog := newProgress(cmd.ErrOrStderr(), g)
	cfg.Progress = prog.update
	rep, err := training.Backtest(cmd.Context(), cfg, res.Jobs, origins, func(w, n int) { prog.update("windows", w, n) })
	prog.done()
	if err != nil {
		return fmt.Errorf("--origins: %w", err)
	}
	return g.print(cmd.OutOrStdout(), backtestReport(rep))
}

// parseDays is a duration that may be given in days ("10d").
func parseDays(s string) (time.Duration, error) {
	if d, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseFloat(d, 64)
		if err != nil || !(n > 0 && n <= 3650) { // NaN fails too
			return 0, fmt.Errorf("%q: want a positive number of days (e.g. 10d) or a Go duration (240h)", s)
		}
		return time.Duration(n * 24 * float64(time.Hour)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%q: want a positive number of days (e.g. 10d) or a Go duration (240h)", s)
	}
	return d, nil
}

// traceEnd is just after the last submission of jobs.
func traceEnd(jobs []cluster.Job) time.Time {
	var end time.Time
	for i := range jobs {
		if jobs[i].SubmitTime.After(end) {
			end = jobs[i].SubmitTime
		}
	}
	return end.Add(time.Nanosecond)
}

// backtestReport prints a backtest: one row per window and model, then
// each model's worst.
type backtestReport training.BacktestReport

func (r backtestReport) writeTable(w io.Writer) error {
	t := newTable(w)
	t.row("window", "jobs", "train_rows", "model", "kind", "mae_log", "spearman", "p90_coverage")
	row := func(win, jobs, rows, name, kind string, m map[string]float64) {
		t.row(win, jobs, rows, name, kind, fmt.Sprintf("%.3f", m["mae_log"]), fmt.Sprintf("%.3f", m["spearman"]), fmt.Sprintf("%.3f", m["p90_coverage"]))
	}
	for _, win := range r.Windows {
		span := win.Origin.Format(time.DateOnly) + " → " + win.Until.Format(time.DateOnly)
		for _, kind := range []struct {
			name string
			m    map[string]map[string]float64
		}{{"learned", win.Models}, {"baseline", win.Baselines}} {
			for _, n := range slices.Sorted(maps.Keys(kind.m)) {
				k := kind.name
				if n == win.Selected {
					k += " (served)"
				}
				row(span, fmt.Sprint(win.Jobs), fmt.Sprint(win.TrainRows), n, k, kind.m[n])
			}
		}
	}
	for _, n := range slices.Sorted(maps.Keys(r.Worst)) {
		row("worst of all", "-", "-", n, "-", r.Worst[n])
	}
	return t.flush()
}

func seriesFormatNames() string {
	var names []string
	for _, f := range datasets.SeriesFormats() {
		names = append(names, f.Name)
	}
	return strings.Join(names, ", ")
}

// peakCVReport prints the refinement's cross-validation: each fold, then
// the figures pooled over every fold.
type peakCVReport training.PeakCVReport

func (r peakCVReport) writeTable(w io.Writer) error {
	t := newTable(w)
	t.row("fold", "series", "windows", "selected", "p90_coverage", "mean_reservation_vs_peak_x1_2", "mae_log")
	for _, f := range r.Folds {
		m := f.Models[f.Selected]
		t.row(f.Fold, f.Series, f.Windows, f.Selected, fmt.Sprintf("%.3f", m["p90_coverage"]), fmt.Sprintf("%.3f", m["mean_reservation_vs_peak_x1_2"]), fmt.Sprintf("%.3f", m["mae_log"]))
	}
	for _, n := range slices.Sorted(maps.Keys(r.Pooled)) {
		m := r.Pooled[n]
		t.row("pooled", "", fmt.Sprintf("%.0f", m["windows"]), n, fmt.Sprintf("%.3f", m["p90_coverage"]), fmt.Sprintf("%.3f", m["mean_reservation_vs_peak_x1_2"]), fmt.Sprintf("%.3f", m["mae_log"]))
	}
	return t.flush()
}

// peakReport prints the online refinement's evaluation.
type peakReport training.PeakReport

func (r peakReport) writeTable(w io.Writer) error {
	t := newTable(w)
	t.row("series", r.Series)
	t.row("windows", fmt.Sprintf("%d fitted, %d scored (unseen series)", r.FitExamples, r.ScoredSamples))
	t.row("watch / horizon", fmt.Sprintf("%.0f s / %.0f s", r.ObserveS, r.HorizonS))
	switch {
	case r.Published != nil:
		t.row("published", fmt.Sprintf("%s as peak version %d", r.Selected, r.ModelVersion))
	case r.Selected != "":
		t.row("scored", fmt.Sprintf("peak version %d (%s) as published, on the series it was not fitted on", r.ModelVersion, r.Selected))
	}
	if err := t.flush(); err != nil {
		return err
	}
	t = newTable(w)
	t.row("", "forecast", "kind", "p90_coverage", "mean_reservation_vs_peak_x1_2", "mae_log")
	for _, kind := range []struct {
		name string
		m    map[string]map[string]float64
	}{{"learned", r.Models}, {"baseline", r.Baselines}} {
		for _, n := range slices.Sorted(maps.Keys(kind.m)) {
			m := kind.m[n]
			t.row("", n, kind.name, fmt.Sprintf("%.3f", m["p90_coverage"]), fmt.Sprintf("%.3f", m["mean_reservation_vs_peak_x1_2"]), fmt.Sprintf("%.3f", m["mae_log"]))
		}
	}
	return t.flush()
}
