package predictor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
)

// ErrNoDurationModel is returned by Adapter when the predictor serves no
// duration model.
var ErrNoDurationModel = errors.New("the model registry serves no duration model")

// Learned is what Adapter uses of *Predictor.
type Learned interface {
	Forecast(ctx context.Context, jobs []cluster.Job) ([]Forecast, error)
	Observe(j cluster.Job)
}

// Adapter is the one bridge from the predictor's learned forecasts to
// executor.Forecaster and executor.Observer: the live control plane and
// the replay both plan on it.
//
// Without Trace each job is forecast as it is (the live plane's jobs, as
// submitted). With Trace each job is forecast, and observed when it
// ends, as the trace recorded it: a replay's own additions (synthetic
// deadlines, which are a multiple of the true duration, and checkpoint
// settings) must not reach the model; a job the trace lacks is
// executor.ErrUnknownJob.
type Adapter struct {
	P     Learned
	Trace map[cluster.JobID]cluster.Job
}

var (
	_ executor.Forecaster = Adapter{}
	_ executor.Observer   = Adapter{}
)

// Forecast implements executor.Forecaster. A forecast without a duration
// is ErrNoDurationModel.
func (a Adapter) Forecast(ctx context.Context, jobs []*cluster.Job) ([]executor.Forecast, error) {
	in := make([]cluster.Job, len(jobs))
	for i, j := range jobs {
		in[i] = *j
		if a.Trace == nil {
			continue
		}
		o, ok := a.Trace[j.ID]
		if !ok {
			return nil, fmt.Errorf("learned forecasts: job %s: %w", j.ID, executor.ErrUnknownJob)
		}
		in[i] = cluster.NewJob(o.ID, o.Spec, o.SubmitTime)
	}
	fc, err := a.P.Forecast(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("learned forecasts: %w", err)
	}
	out := make([]executor.Forecast, len(fc))
	for i, f := range fc {
		if f.DurationP50S == nil || f.DurationP90S == nil {
			return nil, fmt.Errorf("job %s: %w", f.JobID, ErrNoDurationModel)
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

// Observe implements executor.Observer: the job that ended, with the
// trace's spec when there is a Trace, so that the serving models'
// histories stay current.
func (a Adapter) Observe(j cluster.Job) {
	if o, ok := a.Trace[j.ID]; ok {
		j.Spec = o.Spec
	}
	a.P.Observe(j)
}
