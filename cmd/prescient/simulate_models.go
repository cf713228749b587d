package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/predictor"
)

// errNoDurationModel is returned when the registry serves no duration model.
var errNoDurationModel = errors.New("the model registry serves no duration model")

// modelForecaster adapts the predictor's learned forecasts to the
// executor's Forecaster, and tells the predictor about every job the
// simulator finishes so that its history stays current, as it would live.
// It forecasts each job as the trace recorded it (orig): the replay's own
// additions — synthetic deadlines, which are a multiple of the true
// duration, and the checkpoint settings — must not reach the model.
type modelForecaster struct {
	p    learnedForecasts
	orig map[cluster.JobID]cluster.Job
}

// learnedForecasts is what the adapter uses of *predictor.Predictor.
type learnedForecasts interface {
	Forecast(ctx context.Context, jobs []cluster.Job) ([]predictor.Forecast, error)
	Observe(j cluster.Job)
}

var (
	_ executor.Forecaster = modelForecaster{}
	_ executor.Observer   = modelForecaster{}
)

// Forecast implements executor.Forecaster.
func (m modelForecaster) Forecast(ctx context.Context, jobs []*cluster.Job) ([]executor.Forecast, error) {
	in := make([]cluster.Job, len(jobs))
	for i, j := range jobs {
		o, ok := m.orig[j.ID]
		if !ok {
			return nil, fmt.Errorf("learned forecasts: job %s: %w", j.ID, executor.ErrUnknownJob)
		}
		in[i] = cluster.NewJob(o.ID, o.Spec, o.SubmitTime)
	}
	fc, err := m.p.Forecast(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("learned forecasts: %w", err)
	}
	out := make([]executor.Forecast, len(fc))
	for i, f := range fc {
		if f.DurationP50S == nil || f.DurationP90S == nil {
			return nil, fmt.Errorf("job %s: %w", f.JobID, errNoDurationModel)
		}
		p50 := time.Duration(*f.DurationP50S * float64(time.Second))
		p90 := max(time.Duration(*f.DurationP90S*float64(time.Second)), p50)
		out[i] = executor.Forecast{Job: f.JobID, DurationP50: p50, DurationP90: p90, Source: "model " + f.ModelVersion}
		if f.MemoryP90Bytes != nil && *f.MemoryP90Bytes > 0 {
			out[i].MemoryP90Bytes = int64(*f.MemoryP90Bytes)
		}
	}
	return out, nil
}

// Observe implements executor.Observer: the finished job, with the trace's
// spec and the replay's times.
func (m modelForecaster) Observe(j cluster.Job) {
	if o, ok := m.orig[j.ID]; ok {
		j.Spec = o.Spec
	}
	m.p.Observe(j)
}
