package executor

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"time"

	"github.com/prescient-sched/prescient/cluster"
)

// z90 is the standard normal's 90th percentile.
const z90 = 1.2815515655446004

// Oracle forecasts true durations, optionally with log-normal noise: with
// noise σ the P50 is the truth times exp(σ·z) for a standard normal z drawn
// per job (from the seed and the job's ID, so the same job always gets the
// same forecast), and the P90 is the P50 times exp(1.2816·σ). With σ = 0
// both are the truth.
type Oracle struct {
	truth map[cluster.JobID]time.Duration
	sigma float64
	seed  uint64
}

var _ Forecaster = (*Oracle)(nil)

// ErrUnknownJob is returned (wrapped) when a forecaster knows nothing of a
// job.
var ErrUnknownJob = fmt.Errorf("unknown job")

// NewOracle returns an oracle over the true durations.
func NewOracle(truth map[cluster.JobID]time.Duration, sigma float64, seed uint64) (*Oracle, error) {
	if sigma < 0 || math.IsNaN(sigma) || math.IsInf(sigma, 0) {
		return nil, fmt.Errorf("oracle: noise %g must be a finite, non-negative number", sigma)
	}
	return &Oracle{truth: truth, sigma: sigma, seed: seed}, nil
}

// Forecast implements Forecaster.
func (o *Oracle) Forecast(_ context.Context, jobs []*cluster.Job) ([]Forecast, error) {
	out := make([]Forecast, len(jobs))
	for i, j := range jobs {
		d, ok := o.truth[j.ID]
		if !ok {
			return nil, fmt.Errorf("oracle: job %s: %w", j.ID, ErrUnknownJob)
		}
		out[i] = o.forecast(j.ID, d)
	}
	return out, nil
}

func (o *Oracle) forecast(id cluster.JobID, d time.Duration) Forecast {
	if o.sigma == 0 {
		return Forecast{Job: id, DurationP50: d, DurationP90: d, Source: "oracle"}
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(id))
	z := rand.New(rand.NewPCG(o.seed, h.Sum64())).NormFloat64()
	p50 := time.Duration(float64(d) * math.Exp(o.sigma*z))
	p90 := time.Duration(float64(p50) * math.Exp(o.sigma*z90))
	return Forecast{Job: id, DurationP50: p50, DurationP90: p90, Source: fmt.Sprintf("oracle+noise(%g)", o.sigma)}
}

// Slack is the time a queued or running job can still wait before its
// deadline can no longer be met by its P90: deadline − now − remaining P90.
// It is meaningless for a job without a deadline.
func Slack(v *JobView, now time.Time) time.Duration {
	return v.Job.Spec.Deadline.Sub(now) - v.RemainingP90()
}

// Urgent reports whether a job has a deadline and at most window of slack:
// now is UrgentFrom or later.
func Urgent(v *JobView, now time.Time, window time.Duration) bool {
	return v.Job.Spec.HasDeadline() && !now.Before(UrgentFrom(v, window))
}

// LatestStart is the latest time a job can start and still meet its
// deadline by its P90: deadline − remaining P90. It is meaningless for a
// job without a deadline.
func LatestStart(v *JobView) time.Time {
	return v.Job.Spec.Deadline.Add(-v.RemainingP90())
}

// UrgentFrom is when a job with a deadline turns urgent, window before its
// LatestStart.
func UrgentFrom(v *JobView, window time.Duration) time.Time {
	return LatestStart(v).Add(-window)
}
