package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/prescient-sched/prescient/datasets"
	"github.com/prescient-sched/prescient/predictor"
	"github.com/prescient-sched/prescient/training"
)

type predictOptions struct {
	models string
	jobs   string
}

func newPredictCmd(g *globals) *cobra.Command {
	o := predictOptions{}
	cmd := &cobra.Command{
		Use:   "predict",
		Short: "Forecast duration and peak GPU memory of job specs",
		Long: `Forecast each job of --jobs (Prescient JSONL job specs, plain or gzip) with the
serving models of the registry in --models: a table, or with -o json one JSON
object per job and line: job_id, duration_p50_s, duration_p90_s,
memory_p50_bytes, memory_p90_bytes (null without a memory model),
model_version and top_features. A spec needs an id and its resources; a state
is queued unless given, the submit time now. The submit time is when a job is
forecast for: its history features see the jobs that the served model's
history knew to have ended by then.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.models == "" || o.jobs == "" {
				return fmt.Errorf("--models and --jobs are required")
			}
			res, err := datasets.ReadTrace("prescient:"+o.jobs, datasets.ReadOptions{Specs: true})
			if err != nil {
				return err
			}
			p, err := predictor.New(training.Registry{Dir: o.models}, g.logger)
			if err != nil {
				return err
			}
			fc, err := p.Forecast(cmd.Context(), res.Jobs)
			if err != nil {
				return err
			}
			if g.output == "json" {
				return writeForecasts(cmd.OutOrStdout(), fc)
			}
			return forecastTable(cmd.OutOrStdout(), fc)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.models, "models", "", "model registry directory")
	f.StringVar(&o.jobs, "jobs", "", "job specs, Prescient JSONL")
	return cmd
}

// forecastTable writes one row per forecast, durations to the second and
// memory in GiB; "-" where a model did not answer.
func forecastTable(w io.Writer, fc []predictor.Forecast) error {
	t := newTable(w)
	t.row("JOB", "DURATION_P50", "DURATION_P90", "MEMORY_P50", "MEMORY_P90", "MODELS", "TOP_FEATURE")
	dur := func(s *float64) string {
		if s == nil {
			return "-"
		}
		return seconds(*s)
	}
	gib := func(b *float64) string {
		if b == nil {
			return "-"
		}
		return fmt.Sprintf("%.1f GiB", *b/(1<<30))
	}
	for _, f := range fc {
		top := "-"
		if len(f.TopFeatures) > 0 {
			d := f.TopFeatures[0]
			top = fmt.Sprintf("%s %s=%.4g", d.Target, d.Feature, d.Value)
		}
		t.row(f.JobID, dur(f.DurationP50S), dur(f.DurationP90S), gib(f.MemoryP50Bytes), gib(f.MemoryP90Bytes), orDash(f.ModelVersion), top)
	}
	return t.flush()
}

func writeForecasts(w io.Writer, fc []predictor.Forecast) error {
	enc := json.NewEncoder(w)
	for _, f := range fc {
		if err := enc.Encode(f); err != nil {
			return err
		}
	}
	return nil
}
