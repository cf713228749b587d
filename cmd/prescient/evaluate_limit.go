package main

import (
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/spf13/cobra"

	"github.com/prescient-sched/prescient/datasets"
	"github.com/prescient-sched/prescient/models"
	"github.com/prescient-sched/prescient/training"
)

// targetLimit is evaluate --target limit: time-limit recommendations from
// the duration registry.
const targetLimit = "limit"

// runEvaluateLimits is evaluate --target limit: the serving duration
// artifact of --models recommends a limit for each job of --trace
// submitted from --from on (until --until), scored on those that
// completed against the users' own limits.
func runEvaluateLimits(cmd *cobra.Command, g *globals, o evaluateOptions) error {
	switch {
	case o.models == "" || o.trace == "" || o.from == "":
		return fmt.Errorf("--target limit: --models (a duration registry), --trace and --from are required")
	case len(o.origins) > 0 || o.rolling != "" || o.series != "":
		return fmt.Errorf("--target limit: scores a published duration model on --trace; --origins, --rolling and --series do not apply")
	}
	from, until, err := o.window()
	if err != nil {
		return err
	}
	p := models.DefaultLimitPolicy()
	p.RunPast = o.runPast / 100
	if err := p.Validate(); err != nil {
		return fmt.Errorf("--run-past %g: %w", o.runPast, err)
	}
	art, err := training.Registry{Dir: o.models}.LoadCurrent(models.TargetDuration)
	if err != nil {
		return err
	}
	res, err := datasets.ReadTrace(o.trace, datasets.ReadOptions{})
	if err != nil {
		return err
	}
	rep, err := training.EvaluateLimits(cmd.Context(), art, res.Jobs, from, until, p)
	if err != nil {
		return err
	}
	return g.print(cmd.OutOrStdout(), limitReport(rep))
}

// limitReport prints a limit evaluation: a row per recommender.
type limitReport training.LimitReport

func (r limitReport) writeTable(w io.Writer) error {
	t := newTable(w)
	t.row("recommender", "kind", "ran_past_limit_pct", "limit_over_run_median", "limit_over_run_p90", "lowered_pct", "jobs")
	for _, kind := range []struct {
		name string
		m    map[string]training.LimitMetrics
	}{{"learned", r.Models}, {"baseline", r.Baselines}} {
		for _, n := range slices.Sorted(maps.Keys(kind.m)) {
			m, k := kind.m[n], kind.name
			if n == r.Selected {
				k += " (served)"
			}
			t.row(n, k, fmt.Sprintf("%.2f", m.RanPastLimitPct), fmt.Sprintf("%.2f", m.LimitOverRunMedian),
				fmt.Sprintf("%.2f", m.LimitOverRunP90), fmt.Sprintf("%.1f", m.LoweredPct), fmt.Sprint(m.Jobs))
		}
	}
	return t.flush()
}
