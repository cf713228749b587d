package control

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/predictor"
)

// ErrNoDurationModel is returned when the predictor serves no duration
// model.
var ErrNoDurationModel = errors.New("the model registry serves no duration model")

// LearnedForecasts is what PredictorForecaster uses of *predictor.Predictor.
type LearnedForecasts interface {
	Forecast(ctx context.Context, jobs []cluster.Job) ([]predictor.Forecast, error)
}

// PredictorForecaster adapts the predictor's learned forecasts to
// executor.Forecaster for the live control plane: each job is forecast
// as submitted.
type PredictorForecaster struct{ P LearnedForecasts }

var _ executor.Forecaster = PredictorForecaster{}

// Forecast implements executor.Forecaster.
func (f PredictorForecaster) Forecast(ctx context.Context, jobs []*cluster.Job) ([]executor.Forecast, error) {
	in := make([]cluster.Job, len(jobs))
	for i, j := range jobs {
		in[i] = *j
	}
	fc, err := f.P.Forecast(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("learned forecasts: %w", err)
	}
	out := make([]executor.Forecast, len(fc))
	for i, pf := range fc {
		if pf.DurationP50S == nil || pf.DurationP90S == nil {
			return nil, fmt.Errorf("job %s: %w", pf.JobID, ErrNoDurationModel)
		}
		p50 := time.Duration(*pf.DurationP50S * float64(time.Second))
		p90 := max(time.Duration(*pf.DurationP90S*float64(time.Second)), p50)
		out[i] = executor.Forecast{Job: pf.JobID, DurationP50: p50, DurationP90: p90, Source: "model " + pf.ModelVersion}
		if pf.MemoryP90Bytes != nil && *pf.MemoryP90Bytes > 0 {
			out[i].MemoryP90Bytes = int64(*pf.MemoryP90Bytes)
		}
	}
	return out, nil
}
