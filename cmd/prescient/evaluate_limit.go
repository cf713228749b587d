package main

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"slices"
	"strconv"
	"time"

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
	var d *limitDump
	if o.dump != "" {
		if d, err = newLimitDump(o.dump); err != nil {
			return err
		}
	}
	rep, err := training.EvaluateLimits(cmd.Context(), art, res.Jobs, from, until, p, d.row)
	if err = errors.Join(err, d.close()); err != nil {
		return err
	}
	return g.print(cmd.OutOrStdout(), limitReport(rep))
}

// limitDump writes evaluate --target limit --dump: a CSV row per model and
// completed job (training.LimitRow), times in RFC 3339, durations in
// seconds, log seconds as served, an empty margin or limit where there is
// none.
type limitDump struct {
	path string
	f    *os.File
	w    *csv.Writer
}

func newLimitDump(path string) (*limitDump, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--dump: %w", err)
	}
	d := &limitDump{path: path, f: f, w: csv.NewWriter(f)}
	if err := d.w.Write([]string{"model", "job", "user", "submit", "end", "request_s", "run_s", "median_log_s", "scored", "margin_log_s", "limit_s"}); err != nil {
		f.Close()
		return nil, d.failed(err)
	}
	return d, nil
}

// row writes one row; a nil dump writes nothing (no --dump).
func (d *limitDump) row(r training.LimitRow) error {
	if d == nil {
		return nil
	}
	num := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	margin, limit := "", ""
	if !math.IsNaN(r.Margin) {
		margin = num(r.Margin)
	}
	if r.Limit > 0 {
		limit = num(r.Limit.Seconds())
	}
	return d.failed(d.w.Write([]string{r.Model, string(r.Job), r.User, r.Submit.UTC().Format(time.RFC3339), r.End.UTC().Format(time.RFC3339),
		num(r.Request.Seconds()), num(r.Run.Seconds()), num(r.Median), strconv.FormatBool(r.Scored), margin, limit}))
}

// close flushes and closes the file.
func (d *limitDump) close() error {
	if d == nil {
		return nil
	}
	d.w.Flush()
	return d.failed(errors.Join(d.w.Error(), d.f.Close()))
}

func (d *limitDump) failed(err error) error {
	if err != nil {
		return fmt.Errorf("--dump %s: %w", d.path, err)
	}
	return nil
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
