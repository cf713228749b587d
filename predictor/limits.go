package predictor

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/models"
)

// ServedLimits recommends time limits under a models.LimitPolicy and
// calibrates them on the errors of the forecasts it served: each job's
// median is the first one it was recommended with, and when the job
// completes, its run against that median joins the calibration, as
// evaluate --target limit replays it. A forecast made after the job ended
// would know the jobs that ended meanwhile, and so err less than the
// advice did and make the limits too tight. LimitEstimates (replays) and
// prescient slurm's live advisor both use it. It is safe for concurrent
// use.
type ServedLimits struct {
	mu  sync.Mutex
	cal *models.LimitCalibration
	p50 map[cluster.JobID]servedMedian // by job, until it ends
}

// servedMedian is the median a job was first served (log seconds), and
// when the job was submitted.
type servedMedian struct {
	median float64
	submit time.Time
}

// maxServed bounds the jobs ServedLimits remembers: at it, the earlier
// submitted half is forgotten. Those are mostly jobs whose end it was
// never told, such as a Slurm array's pending entry, whose tasks end
// under their own IDs.
const maxServed = 200_000

// NewServedLimits starts p's calibration with no outcomes.
func NewServedLimits(p models.LimitPolicy) (*ServedLimits, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &ServedLimits{cal: models.NewLimitCalibration(p), p50: map[cluster.JobID]servedMedian{}}, nil
}

// Recommend is j's limit from its forecast median (log seconds): zero
// when there is neither a calibrated margin nor a limit of the user's.
// The first median given for j is the one it is calibrated with.
func (s *ServedLimits) Recommend(j *cluster.Job, median float64) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.p50[j.ID]; !ok {
		if len(s.p50) >= maxServed {
			s.forgetOlderHalf()
		}
		s.p50[j.ID] = servedMedian{median, j.SubmitTime}
	}
	return s.cal.Recommend(models.LimitUser(j), median, j.Spec.TimeLimit)
}

// forgetOlderHalf forgets the jobs submitted before the median submit
// time of those remembered (and, where many share it, any others down to
// half).
func (s *ServedLimits) forgetOlderHalf() {
	times := make([]time.Time, 0, len(s.p50))
	for _, f := range s.p50 {
		times = append(times, f.submit)
	}
	slices.SortFunc(times, time.Time.Compare)
	cut := times[len(times)/2]
	maps.DeleteFunc(s.p50, func(_ cluster.JobID, f servedMedian) bool { return f.submit.Before(cut) })
	for id := range s.p50 {
		if len(s.p50) <= len(times)/2 {
			break
		}
		delete(s.p50, id)
	}
}

// Served reports whether a job was recommended a limit and has not been
// heard to end.
func (s *ServedLimits) Served(id cluster.JobID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.p50[id]
	return ok
}

// Observe hears a job that ended and forgets its median. A completed one
// that was served joins the calibration with the median it was served.
func (s *ServedLimits) Observe(j *cluster.Job) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.p50[j.ID]
	delete(s.p50, j.ID)
	if ok && models.CompletedRun(j) {
		s.cal.Observe(models.LimitUser(j), j.Spec.TimeLimit, f.median, j.Outcome.RunTime)
	}
}

// ObserveAt calibrates with a completed job that was never served (its
// Observe would not), at the median the caller forecasts for it.
func (s *ServedLimits) ObserveAt(j *cluster.Job, median float64) {
	if !models.CompletedRun(j) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cal.Observe(models.LimitUser(j), j.Spec.TimeLimit, median, j.Outcome.RunTime)
}

// LimitEstimates plans with the time limits ServedLimits recommends: each
// job's estimate, P50 and P90 alike, is the limit read from the inner
// forecaster's P50, never above the job's own limit. It hears each job
// that ends (Observe). It is safe for concurrent use.
type LimitEstimates struct {
	inner interface {
		executor.Forecaster
		executor.Observer
	}
	limits *ServedLimits
}

var (
	_ executor.Forecaster = (*LimitEstimates)(nil)
	_ executor.Observer   = (*LimitEstimates)(nil)
)

// NewLimitEstimates wraps a learned forecaster (Adapter) in policy p.
func NewLimitEstimates(inner Adapter, p models.LimitPolicy) (*LimitEstimates, error) {
	limits, err := NewServedLimits(p)
	if err != nil {
		return nil, err
	}
	return &LimitEstimates{inner: inner, limits: limits}, nil
}

// WarmUp starts the calibration as a service running since before until
// would have it: each completed job among jobs that ended before until,
// in the order they ended, calibrates at its median in medians (log
// seconds, as served before it ran; training.ServedBefore).
func (l *LimitEstimates) WarmUp(jobs []cluster.Job, medians []float64, until time.Time) {
	order := make([]int, 0, len(jobs))
	for i := range jobs {
		if models.CompletedRun(&jobs[i]) && models.EndTime(&jobs[i]).Before(until) {
			order = append(order, i)
		}
	}
	slices.SortStableFunc(order, func(a, b int) int { return models.EndTime(&jobs[a]).Compare(models.EndTime(&jobs[b])) })
	for _, i := range order {
		l.limits.ObserveAt(&jobs[i], medians[i])
	}
}

// Forecast implements executor.Forecaster.
func (l *LimitEstimates) Forecast(ctx context.Context, jobs []*cluster.Job) ([]executor.Forecast, error) {
	fc, err := l.inner.Forecast(ctx, jobs)
	if err != nil {
		return nil, err
	}
	for i, j := range jobs {
		est := l.limits.Recommend(j, models.Log(fc[i].DurationP50.Seconds()))
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
	l.limits.Observe(&j)
}
