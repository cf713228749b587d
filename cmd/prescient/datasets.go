package main

import (
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/datasets"
	"github.com/prescient-sched/prescient/internal/fsutil"
)

func newDatasetsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "datasets",
		Short: "Inspect job traces, generate synthetic ones, export feature rows",
	}
	cmd.AddCommand(newDatasetsInspectCmd(g), newDatasetsGenerateCmd(g), newDatasetsFeaturesCmd(g))
	return cmd
}

type inspectOptions struct {
	lenient   bool
	maxErrors int
	epoch     string
}

func newDatasetsInspectCmd(g *globals) *cobra.Command {
	o := inspectOptions{}
	cmd := &cobra.Command{
		Use:   "inspect FORMAT:PATH",
		Short: "Print a trace's row count, time span and distributions",
		Long: "Read a job trace and describe it. FORMAT is one of: " + traceFormatNames() + `.
PATH is a plain or gzip-compressed file. A malformed row is an error naming the
file, line and field; with --lenient bad rows are counted and skipped.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opt := datasets.ReadOptions{Lenient: o.lenient, MaxErrors: o.maxErrors}
			if o.epoch != "" {
				t, err := datasets.ParseTime(o.epoch)
				if err != nil {
					return fmt.Errorf("--epoch: %w", err)
				}
				opt.Epoch = t
			}
			res, err := datasets.ReadTrace(args[0], opt)
			if err != nil {
				return err
			}
			for _, e := range res.Errors {
				g.logger.Warn("skipped row", "component", "datasets", "err", e)
			}
			if res.Skipped > len(res.Errors) {
				g.logger.Warn("more rows skipped than shown", "component", "datasets", "skipped", res.Skipped, "shown", len(res.Errors))
			}
			for _, m := range res.Missing {
				g.logger.Warn("the file lacks a column of its format", "component", "datasets", "missing", m)
			}
			return g.print(cmd.OutOrStdout(), summaryReport{Trace: args[0], Summary: datasets.Summarize(res)})
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.lenient, "lenient", false, "skip malformed rows, counting them, instead of failing on the first")
	f.IntVar(&o.maxErrors, "max-errors", 20, "with --lenient, how many skipped rows to log")
	f.StringVar(&o.epoch, "epoch", "", "start time for traces whose times are offsets (openb); default "+datasets.DefaultOpenbEpoch().Format(time.DateOnly))
	return cmd
}

func traceFormatNames() string {
	var names []string
	for _, f := range datasets.TraceFormats() {
		names = append(names, f.Name)
	}
	return strings.Join(names, ", ")
}

// summaryReport is the output of datasets inspect.
type summaryReport struct {
	Trace string `json:"trace"`
	datasets.Summary
}

func (r summaryReport) writeTable(w io.Writer) error {
	s := r.Summary
	t := newTable(w)
	t.row("trace", r.Trace)
	t.row("jobs", s.Jobs)
	if s.Skipped > 0 {
		t.row("skipped rows", s.Skipped)
	}
	t.row("first submit", s.FirstSubmit.Format(time.RFC3339))
	t.row("last submit", s.LastSubmit.Format(time.RFC3339))
	t.row("span", fmt.Sprintf("%.1f days", s.SpanS/86400))
	t.row("GPUs per job", countsLine(s.GPUs, true))
	t.row("fractional jobs", s.FractionalJobs)
	t.row("GPU time", fmt.Sprintf("%.0f GPU-hours", s.GPUTimeS/3600))
	t.row("run time (s)", fmt.Sprintf("p50 %.0f  p90 %.0f  p99 %.0f  max %.0f  (%d jobs ran)", s.RunTimeP50S, s.RunTimeP90S, s.RunTimeP99S, s.RunTimeMaxS, s.RanJobs))
	t.row("jobs with deadline", s.WithDeadline)
	top := make([]string, len(s.TopTenants))
	for i, tc := range s.TopTenants {
		top[i] = fmt.Sprintf("%s=%d", tc.Tenant, tc.Jobs)
	}
	t.row("tenants", fmt.Sprintf("%d: %s", s.Tenants, strings.Join(top, " ")))
	t.row("tiers", countsLine(s.Tiers, false))
	t.row("states", countsLine(s.States, false))
	return t.flush()
}

// countsLine prints "k=v" pairs, numerically sorted keys when numeric.
func countsLine(m map[string]int, numeric bool) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if numeric {
			x, _ := strconv.Atoi(a)
			y, _ := strconv.Atoi(b)
			return x - y
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, m[k])
	}
	return strings.Join(parts, " ")
}

type generateOptions struct {
	cfg      datasets.GenerateConfig
	start    string
	tierMix  map[string]string
	noMemory bool
	out      string
}

func newDatasetsGenerateCmd(g *globals) *cobra.Command {
	o := generateOptions{cfg: datasets.DefaultGenerateConfig()}
	cmd := &cobra.Command{
		Use:   "generate",
		Short: "Write a synthetic job history calibrated to the Philly trace (prescient JSONL)",
		Long: `Generate a seeded synthetic workload whose arrivals by hour and weekday, GPU
counts and heavy-tailed run times follow the Philly trace, with tenants, tiers
and deadlines added. The output is our own JSONL job history (the prescient
trace format); a name ending in .gz is gzip-compressed. The same seed and
settings give the same jobs.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runGenerate(cmd, g, o) },
	}
	f := cmd.Flags()
	f.Int64Var(&o.cfg.Seed, "seed", o.cfg.Seed, "random seed")
	f.IntVar(&o.cfg.Jobs, "jobs", o.cfg.Jobs, "number of jobs")
	f.StringVar(&o.start, "start", o.cfg.Start.Format(time.DateOnly), "time of the first arrival window (YYYY-MM-DD or RFC 3339, UTC)")
	f.IntVar(&o.cfg.Tenants, "tenants", o.cfg.Tenants, "number of tenants")
	f.Float64Var(&o.cfg.DeadlineFraction, "deadline-fraction", o.cfg.DeadlineFraction, "share of jobs with a deadline, 0..1")
	f.StringToStringVar(&o.tierMix, "tier-mix", nil, "tier weights, e.g. production=0.1,standard=0.5,batch=0.25,opportunistic=0.15")
	f.BoolVar(&o.noMemory, "no-memory-labels", false, "leave peak GPU memory and energy unknown, as in public traces")
	f.StringVar(&o.out, "out", "-", "output file (- for standard output; .gz compresses)")
	return cmd
}

func runGenerate(cmd *cobra.Command, g *globals, o generateOptions) error {
	cfg := o.cfg
	start, err := datasets.ParseTime(o.start)
	if err != nil {
		return fmt.Errorf("--start: %w", err)
	}
	cfg.Start = start
	cfg.LabelMemory = !o.noMemory
	if len(o.tierMix) > 0 {
		if cfg.TierMix, err = parseTierMix(o.tierMix); err != nil {
			return err
		}
	}
	jobs, err := datasets.Generate(cfg)
	if err != nil {
		return err
	}
	if o.out == "-" {
		return datasets.WriteJSONL(cmd.OutOrStdout(), jobs)
	}
	if err := writeJSONLFile(o.out, jobs); err != nil {
		return err
	}
	g.logger.Info("wrote synthetic history", "component", "datasets", "jobs", len(jobs), "path", o.out)
	return nil
}

func parseTierMix(m map[string]string) (map[cluster.Tier]float64, error) {
	mix := make(map[cluster.Tier]float64, len(m))
	for k, v := range m {
		tier, err := cluster.ParseTier(k)
		if err != nil {
			return nil, fmt.Errorf("--tier-mix: %w", err)
		}
		w, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return nil, fmt.Errorf("--tier-mix: %s=%q: not a number", k, v)
		}
		mix[tier] = w
	}
	return mix, nil
}

// writeJSONLFile writes jobs to path atomically, so that a failed run
// leaves no half-written history behind; a name ending in .gz is compressed.
func writeJSONLFile(path string, jobs []cluster.Job) error {
	err := fsutil.WriteAtomic(path, 0o644, func(w io.Writer) error {
		if !strings.HasSuffix(path, ".gz") {
			return datasets.WriteJSONL(w, jobs)
		}
		zw := gzip.NewWriter(w)
		return errors.Join(datasets.WriteJSONL(zw, jobs), zw.Close())
	})
	if err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	return nil
}
