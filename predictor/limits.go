package predictor

import (
	"context"
	"sync"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/models"
)

// LimitEstimates plans with the time limits a models.LimitPolicy would
// recommend: each job's estimate, P50 and P90 alike, is the limit read
// from the inner forecaster's P50 and the calibration's margin for the
// job's user and request, never above the job's own limit. The
// calibration hears each job that ends (Observe), with the P50 it was
// forecast at, as evaluate --target limit replays it. It is safe for
// concurrent use.
type LimitEstimates struct {
	inner interface {
		executor.Forecaster
		executor.Observer
	}
	mu  sync.Mutex
	cal *models.LimitCalibration
	p50 map[cluster.JobID]float64 // log seconds, by job, until it ends
}

var (
	_ executor.Forecaster = (*LimitEstimates)(nil)
	_ executor.Observer   = (*LimitEstimates)(nil)
)

// NewLimitEstimates wraps a learned forecaster (Adapter) in policy p.
func NewLimitEstimates(inner Adapter, p models.LimitPolicy) (*LimitEstimates, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &LimitEstimates{inner: inner, cal: models.NewLimitCalibration(p), p50: map[cluster.JobID]float64{}}, nil
}

// Forecast implements executor.Forecaster.
func (l *LimitEstimates) Forecast(ctx context.Context, jobs []*cluster.Job) ([]executor.Forecast, error) {
	fc, err := l.inner.Forecast(ctx, jobs)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, j := range jobs {
		median := models.Log(fc[i].DurationP50.Seconds())
		l.p50[j.ID] = median
		est := l.cal.Recommend(models.LimitUser(j), median, j.Spec.TimeLimit)
		if est <= 0 { // no limit to fall back on: the forecast as it is
			continue
		}
		fc[i].DurationP50, fc[i].DurationP90 = est, est
		fc[i].Source += " as a recommended limit"
	}
	return fc, nil
}

// Observe implements executor.Observer.
func (l *LimitEstimates) Observe(j cluster.Job) {
	l.inner.Observe(j)
	l.mu.Lock()
	defer l.mu.Unlock()
	median, ok := l.p50[j.ID]
	delete(l.p50, j.ID)
	if ok && models.CompletedRun(&j) {
		l.cal.Observe(models.LimitUser(&j), j.Spec.TimeLimit, median, j.Outcome.RunTime)
	}
}
