package models

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
)

// With Limits, rows carry the time limit and the user's jobs with the same
// limit are the comparable ones once there are enough.
func TestFeaturesWithLimits(t *testing.T) {
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	job := func(i int, user string, limit, run time.Duration) cluster.Job {
		j := cluster.NewJob(cluster.JobID(fmt.Sprint(i)), cluster.JobSpec{Tenant: "g", User: user, GPUs: 1, GPUMilli: cluster.MilliGPU, TimeLimit: limit}, t0.Add(time.Duration(i)*time.Hour))
		j.State, j.Outcome.RunTime = cluster.StateSucceeded, run
		return j
	}
	var jobs []cluster.Job
	for i := range 6 {
		jobs = append(jobs, job(i, "u", time.Hour, 100*time.Second), job(100+i, "u", 10*time.Hour, 5000*time.Second))
	}
	c := DefaultFeatureConfigFor(TargetDuration, jobs)
	if !c.Limits || DefaultFeatureConfigFor(TargetDuration, jobs[:0]).Limits {
		t.Fatal("Limits should follow whether jobs carry limits")
	}
	names := c.FeatureNames()
	if len(names) != c.NumFeatures() || len(names) != DefaultFeatureConfig(TargetDuration).NumFeatures()+2+2*len(groupStats) {
		t.Fatalf("%d names, NumFeatures %d", len(names), c.NumFeatures())
	}
	col := func(name string) int {
		i := slices.Index(names, name)
		if i < 0 {
			t.Fatalf("no column %s", name)
		}
		return i
	}
	q := job(500, "u", time.Hour, 0)
	q.SubmitTime = t0.Add(1000 * time.Hour)
	row := c.Rows(jobs, []cluster.Job{q})[0]
	if got, want := row[col(FeatureComparableQ50)], math.Log(100); math.Abs(got-want) > 1e-9 {
		t.Errorf("comparable_q50 %g, want log(100) = %g: the user's jobs with a 1 h limit", got, want)
	}
	if got, want := row[col("time_limit_log")], math.Log(3600); math.Abs(got-want) > 1e-9 {
		t.Errorf("time_limit_log %g, want %g", got, want)
	}
	if row[col("user_limit_count_log")] != math.Log1p(6) || row[col("limit_count_log")] != math.Log1p(6) {
		t.Errorf("user_limit and limit groups: %g, %g outcomes (log1p)", row[col("user_limit_count_log")], row[col("limit_count_log")])
	}
}
