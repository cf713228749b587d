package datasets

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/prescient-sched/prescient/cluster"
)

// SplitByTime splits jobs by submit time: before holds the jobs submitted
// before at, after those submitted at or after it. Each keeps the order of
// jobs; jobs itself is not changed.
func SplitByTime(jobs []cluster.Job, at time.Time) (before, after []cluster.Job) {
	for _, j := range jobs {
		if j.SubmitTime.Before(at) {
			before = append(before, j)
		} else {
			after = append(after, j)
		}
	}
	return before, after
}

// SplitFraction splits jobs in time for training and evaluation: train holds
// the earliest trainFraction of them (0 < trainFraction < 1), test the rest,
// both sorted by submit time. at is the submit time of the first test job;
// every training job was submitted before it, so that no job submitted at
// the same instant lands on both sides (train may then hold a little less
// than the fraction). jobs itself is not changed.
func SplitFraction(jobs []cluster.Job, trainFraction float64) (train, test []cluster.Job, at time.Time, err error) {
	if math.IsNaN(trainFraction) || trainFraction <= 0 || trainFraction >= 1 {
		return nil, nil, time.Time{}, fmt.Errorf("split: train fraction %g is outside (0, 1)", trainFraction)
	}
	if len(jobs) == 0 {
		return nil, nil, time.Time{}, errors.New("split: no jobs")
	}
	sorted := slices.Clone(jobs)
	sortJobs(sorted)
	k := min(int(trainFraction*float64(len(sorted))), len(sorted)-1)
	at = sorted[k].SubmitTime
	for k > 0 && !sorted[k-1].SubmitTime.Before(at) {
		k--
	}
	return sorted[:k:k], sorted[k:], at, nil
}
