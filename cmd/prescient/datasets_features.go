package main

import (
	"bufio"
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/datasets"
	"github.com/prescient-sched/prescient/models"
	"github.com/prescient-sched/prescient/training"
)

type featuresOptions struct {
	trace, target, out string
}

func newDatasetsFeaturesCmd(g *globals) *cobra.Command {
	o := featuresOptions{}
	cmd := &cobra.Command{
		Use:   "features",
		Short: "Write the learners' causal feature rows of a trace as CSV, for other tools to fit on",
		Long: `Write, for every job of --trace with a known --target, the feature row the
learners see (models.FeatureConfig, the one pipeline of training and serving:
a job's row sees only the jobs that ended before it was submitted) as CSV:
id, submit_time (RFC 3339), label_log (the natural log of the target), then one
column per feature, in submit order. One export serves every time window: a
window's rows are those submitted in it, and its training rows those before.
scripts/crosscheck-gbt.py fits scikit-learn's and XGBoost's boosted trees on it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runFeatures(cmd, g, o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.trace, "trace", "", "job history, FORMAT:PATH ("+traceFormatNames()+")")
	f.StringVar(&o.target, "target", "duration", "the label: duration or memory")
	f.StringVar(&o.out, "out", "-", "output file (- for standard output)")
	return cmd
}

func runFeatures(cmd *cobra.Command, g *globals, o featuresOptions) error {
	if o.trace == "" {
		return fmt.Errorf("--trace is required")
	}
	t, err := models.ParseTarget(o.target)
	if err != nil || t == models.TargetPeak {
		return fmt.Errorf("--target %q: want duration or memory", o.target)
	}
	res, err := datasets.ReadTrace(o.trace, datasets.ReadOptions{})
	if err != nil {
		return err
	}
	labelled, rows, labels := training.Rows(t, res.Jobs)
	if len(labelled) == 0 {
		return fmt.Errorf("--trace %s: no job with a known %s", o.trace, t)
	}
	names := models.DefaultFeatureConfigFor(t, res.Jobs).FeatureNames()
	w := cmd.OutOrStdout()
	if o.out != "-" {
		f, err := os.Create(o.out)
		if err != nil {
			return fmt.Errorf("--out: %w", err)
		}
		defer f.Close()
		w = f
	}
	if err := writeFeatures(w, names, labelled, labels, rows); err != nil {
		return fmt.Errorf("--out %s: %w", o.out, err)
	}
	g.logger.Info("wrote feature rows", "component", "datasets", "rows", len(rows), "features", len(names), "path", o.out)
	return nil
}

// writeFeatures writes the rows as CSV with their job's ID, submit time and
// log label first.
func writeFeatures(w io.Writer, names []string, jobs []cluster.Job, labels []float64, rows [][]float64) error {
	bw := bufio.NewWriter(w)
	cw := csv.NewWriter(bw)
	if err := cw.Write(append([]string{"id", "submit_time", "label_log"}, names...)); err != nil {
		return err
	}
	rec := make([]string, 3+len(names))
	for i, r := range rows {
		rec[0], rec[1] = string(jobs[i].ID), jobs[i].SubmitTime.UTC().Format(time.RFC3339)
		rec[2] = strconv.FormatFloat(labels[i], 'g', -1, 64)
		for k, v := range r {
			rec[3+k] = strconv.FormatFloat(v, 'g', -1, 64)
		}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return err
	}
	return bw.Flush()
}
