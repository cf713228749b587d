package executor

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/prescient-sched/prescient/cluster"
)

// UserEstimates forecasts each job's run time as its time limit, P50 and
// P90 alike: what a backfilling scheduler without forecasts plans with
// (Slurm's backfill, EASY). A job without a limit gets Default, as a Slurm
// job gets its partition's limit; with no Default it is an error.
type UserEstimates struct {
	Default time.Duration
}

var _ Forecaster = UserEstimates{}

// Forecast implements Forecaster.
func (u UserEstimates) Forecast(_ context.Context, jobs []*cluster.Job) ([]Forecast, error) {
	out := make([]Forecast, len(jobs))
	for i, j := range jobs {
		l := cmp.Or(j.Spec.TimeLimit, u.Default)
		if l <= 0 {
			return nil, fmt.Errorf("user estimates: job %s has no time limit", j.ID)
		}
		out[i] = Forecast{Job: j.ID, DurationP50: l, DurationP90: l, Source: "user-limit"}
	}
	return out, nil
}

// raiseSteps are how far past a forecast a job that has outlived it is
// expected to run, in turn: the ladder Tsafrir, Etsion and Feitelson used
// to raise failed predictions ("Backfilling using system-generated
// predictions rather than user runtime estimates", 2007).
var raiseSteps = []time.Duration{
	time.Minute, 5 * time.Minute, 15 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour, 5 * time.Hour,
	10 * time.Hour, 20 * time.Hour, 50 * time.Hour, 100 * time.Hour,
}

// Remaining is the time a job still needs by a forecast of est in all:
// est - done, at least one second. A job with a time limit that has done
// est already is expected to run to est plus the first of raiseSteps that
// puts the end ahead of it, never past its limit; a job without one, one
// more second. The planner and the Slurm advisor both use it for running
// jobs.
func Remaining(est, done, limit time.Duration) time.Duration {
	if est > done || limit <= 0 {
		return max(est-done, time.Second)
	}
	for _, s := range raiseSteps {
		if est+s > done {
			return max(min(est+s, limit)-done, time.Second)
		}
	}
	return max(limit-done, time.Second)
}
