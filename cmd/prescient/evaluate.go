package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/prescient-sched/prescient/datasets"
	"github.com/prescient-sched/prescient/models"
	"github.com/prescient-sched/prescient/models/idle"
	"github.com/prescient-sched/prescient/training"
)

type evaluateOptions struct {
	target string
	models string
	trace  string
	from   string
	series string
	idle   idleFlags
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

With --series FORMAT:PATH (genai-memory), evaluate instead the online refinement
of the memory footprint: at each refinement point of a series (after its first
10 minutes, then every 30 minutes), the peak of the next 2 hours from all of the
series seen so far, fitted on 70% of the series and scored on the rest against
reserving the peak so far (× 1.2).

With --target idle, score the idle-window forecaster on --series FORMAT:PATH
(helios, genai, philly-nodes, influx) from --from on, --horizon ahead: the
series it was not trained on (and the part of a series after its training
data), against persistence and the same time the day before (or, on series
shorter than two days, the mean of the last hour).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.target == string(idle.Target) {
				return runEvaluateIdle(cmd, g, o)
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
				rep, err := training.EvaluatePeak(cmd.Context(), training.DefaultPeakConfig(), series)
				if err != nil {
					return err
				}
				return g.print(cmd.OutOrStdout(), peakReport(rep))
			}
			if o.models == "" || o.trace == "" || o.from == "" {
				return fmt.Errorf("--models, --trace and --from are required")
			}
			from, err := datasets.ParseTime(o.from)
			if err != nil {
				return fmt.Errorf("--from: %w", err)
			}
			art, err := training.Registry{Dir: o.models}.LoadCurrent(t)
			if err != nil {
				return err
			}
			res, err := datasets.ReadTrace(o.trace, datasets.ReadOptions{})
			if err != nil {
				return err
			}
			rep, err := training.Evaluate(cmd.Context(), art, res.Jobs, from)
			if err != nil {
				return err
			}
			return g.print(cmd.OutOrStdout(), trainReport(rep))
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.target, "target", "duration", "what to evaluate: duration, memory or idle")
	f.StringVar(&o.models, "models", "", "model registry directory")
	f.StringVar(&o.trace, "trace", "", "job history, FORMAT:PATH ("+traceFormatNames()+")")
	f.StringVar(&o.from, "from", "", "score the jobs submitted from this date on (YYYY-MM-DD or RFC 3339)")
	f.StringVar(&o.series, "series", "", "evaluate the online memory refinement on GPU-memory series (--target memory) or the idle forecaster (--target idle), FORMAT:PATH ("+seriesFormatNames()+", influx)")
	o.idle.register(cmd, true)
	return cmd
}

func seriesFormatNames() string {
	var names []string
	for _, f := range datasets.SeriesFormats() {
		names = append(names, f.Name)
	}
	return strings.Join(names, ", ")
}

// peakReport prints the online refinement's evaluation.
type peakReport training.PeakReport

func (r peakReport) writeTable(w io.Writer) error {
	t := newTable(w)
	t.row("series", r.Series)
	t.row("windows", fmt.Sprintf("%d fitted, %d scored (unseen series)", r.FitExamples, r.ScoredSamples))
	t.row("watch / horizon", fmt.Sprintf("%.0f s / %.0f s", r.ObserveS, r.HorizonS))
	if r.Published != nil {
		t.row("published", fmt.Sprintf("%s as peak version %d", r.Selected, r.ModelVersion))
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
