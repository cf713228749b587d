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
serving models of the registry in --models. Writes one JSON object per job:
job_id, duration_p50_s, duration_p90_s, memory_p50_bytes, memory_p90_bytes
(null without a memory model), model_version and top_features. Each job's
submit time is when it is forecast for: its history features see the jobs that
the served model's history knew to have ended by then.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.models == "" || o.jobs == "" {
				return fmt.Errorf("--models and --jobs are required")
			}
			res, err := datasets.ReadTrace("prescient:"+o.jobs, datasets.ReadOptions{})
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
			return writeForecasts(cmd.OutOrStdout(), fc)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.models, "models", "", "model registry directory")
	f.StringVar(&o.jobs, "jobs", "", "job specs, Prescient JSONL")
	return cmd
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
