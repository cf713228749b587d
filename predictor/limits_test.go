package predictor_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/datasets"
	"github.com/prescient-sched/prescient/internal/testenv"
	"github.com/prescient-sched/prescient/models"
	"github.com/prescient-sched/prescient/predictor"
	"github.com/prescient-sched/prescient/training"
)

// A job's error is taken against the median it was first served, not a
// later one: the advice made that error.
func TestServedLimitsCalibrateOnTheServedMedian(t *testing.T) {
	p := models.LimitPolicy{RunPast: 0.5, Window: 10, MinAll: 1, MinUser: 1, MinUserLimit: 1, Unit: time.Minute}
	s, err := predictor.NewServedLimits(p)
	if err != nil {
		t.Fatal(err)
	}
	job := func(id string) *cluster.Job {
		j := cluster.NewJob(cluster.JobID(id), cluster.JobSpec{User: "u", GPUs: 1, TimeLimit: 4 * time.Hour}, time.Unix(0, 0))
		return &j
	}
	a := job("a")
	if l := s.Recommend(a, models.Log(600)); l != 4*time.Hour {
		t.Fatalf("before any outcome: %s, want the user's 4h", l)
	}
	s.Recommend(a, models.Log(6000)) // a later forecast: not what the advice served first
	if !s.Served("a") || s.Served("b") {
		t.Fatal("Served: want a and not b")
	}
	a.State, a.Outcome.RunTime = cluster.StateSucceeded, 20*time.Minute
	s.Observe(a) // its error: twice its first median
	if s.Served("a") {
		t.Error("a is still remembered after it ended")
	}
	if l := s.Recommend(job("b"), models.Log(600)); l != 20*time.Minute {
		t.Errorf("b, forecast 10 min: %s, want 20m (a ran twice the median it was served)", l)
	}
	c := job("c") // never served: the caller's median
	c.State, c.Outcome.RunTime = cluster.StateSucceeded, 30*time.Minute
	s.ObserveAt(c, models.Log(600))
	if l := s.Recommend(job("d"), models.Log(600)); l != 30*time.Minute {
		t.Errorf("d, forecast 10 min, after errors ×2 and ×3: %s, want 30m", l)
	}
}

// Planning with recommended limits: the user's own limit until the
// calibration has heard enough jobs end, then the forecast median (1 h)
// plus the user's errors, rounded up to a minute.
func TestLimitEstimates(t *testing.T) {
	p := models.LimitPolicy{RunPast: 0.05, Window: 100, MinAll: 20, MinUser: 20, MinUserLimit: 10, Unit: time.Minute}
	f := &fakeLearned{}
	le, err := predictor.NewLimitEstimates(predictor.Adapter{P: f}, p)
	if err != nil {
		t.Fatal(err)
	}
	job := func(i int) *cluster.Job {
		j := cluster.NewJob(cluster.JobID(fmt.Sprint(i)), cluster.JobSpec{User: "u", GPUs: 1, GPUMilli: cluster.MilliGPU, TimeLimit: 10 * time.Hour}, time.Unix(int64(i), 0))
		return &j
	}
	estimate := func(j *cluster.Job) time.Duration {
		t.Helper()
		fc, err := le.Forecast(context.Background(), []*cluster.Job{j})
		if err != nil {
			t.Fatal(err)
		}
		if fc[0].DurationP50 != fc[0].DurationP90 {
			t.Fatalf("P50 %s, P90 %s: want one estimate", fc[0].DurationP50, fc[0].DurationP90)
		}
		return fc[0].DurationP50
	}
	if got := estimate(job(0)); got != 10*time.Hour {
		t.Fatalf("uncalibrated: %s, want the user's 10h", got)
	}
	for i := 1; i <= 25; i++ {
		j := job(i)
		estimate(j)
		j.State, j.Outcome.RunTime = cluster.StateSucceeded, time.Hour+time.Duration(i)*time.Minute
		le.Observe(*j)
	}
	if len(f.observed) != 25 {
		t.Fatalf("the learned model heard %d jobs end, want 25", len(f.observed))
	}
	if got := estimate(job(99)); got != time.Hour+25*time.Minute {
		t.Fatalf("calibrated: %s, want 1h25m (the median plus the largest error of 25)", got)
	}
	// A job that never got a forecast teaches the calibration nothing.
	stray := job(100)
	stray.State, stray.Outcome.RunTime = cluster.StateSucceeded, 9*time.Hour
	le.Observe(*stray)
	if got := estimate(job(101)); got != time.Hour+25*time.Minute {
		t.Fatalf("after a stray job: %s", got)
	}
}

// At 200,000 remembered jobs, ServedLimits forgets the earlier submitted
// half: jobs it was never told ended do not pile up.
func TestServedLimitsForgetOldJobsItNeverHeardEnd(t *testing.T) {
	s, err := predictor.NewServedLimits(models.DefaultLimitPolicy())
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(0, 0)
	for i := range 200_000 {
		j := cluster.NewJob(cluster.JobID(fmt.Sprint("old-", i)), cluster.JobSpec{User: "u", GPUs: 1}, t0.Add(time.Duration(i)*time.Second))
		s.Recommend(&j, models.Log(60))
	}
	if !s.Served("old-0") {
		t.Fatal("forgot a job before the bound")
	}
	late := cluster.NewJob("late", cluster.JobSpec{User: "u", GPUs: 1}, t0.Add(300_000*time.Second))
	s.Recommend(&late, models.Log(60))
	if s.Served("old-0") || s.Served("old-99999") || !s.Served("old-100000") || !s.Served("old-199999") || !s.Served("late") {
		t.Error("want the first 100,000 forgotten, the later ones kept")
	}
}

// A warmed-up calibration recommends from the first job of the window:
// the completed jobs that ended before it count, in the order they ended;
// one still running then, or one that failed, does not.
func TestLimitEstimatesWarmUp(t *testing.T) {
	p := models.LimitPolicy{RunPast: 0.05, Window: 100, MinAll: 20, MinUser: 20, MinUserLimit: 10, Unit: time.Minute}
	le, err := predictor.NewLimitEstimates(predictor.Adapter{P: &fakeLearned{}}, p)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Unix(0, 0)
	from := start.Add(48 * time.Hour)
	var jobs []cluster.Job
	var medians []float64
	add := func(i int, run time.Duration, st cluster.JobState) {
		j := cluster.NewJob(cluster.JobID(fmt.Sprint(i)), cluster.JobSpec{User: "u", GPUs: 1, TimeLimit: 10 * time.Hour}, start.Add(time.Duration(i)*time.Minute))
		j.State, j.Outcome.RunTime = st, run
		jobs, medians = append(jobs, j), append(medians, models.Log(3600))
	}
	for i := 1; i <= 25; i++ {
		add(i, time.Hour+time.Duration(i)*time.Minute, cluster.StateSucceeded)
	}
	add(26, 3*time.Hour, cluster.StateFailed)     // not completed
	add(27, 48*time.Hour, cluster.StateSucceeded) // ends after from
	le.WarmUp(jobs, medians, from)
	j := cluster.NewJob("window-0", cluster.JobSpec{User: "u", GPUs: 1, TimeLimit: 10 * time.Hour}, from)
	fc, err := le.Forecast(context.Background(), []*cluster.Job{&j})
	if err != nil {
		t.Fatal(err)
	}
	if got := fc[0].DurationP50; got != time.Hour+25*time.Minute {
		t.Errorf("the window's first job: %s, want 1h25m (the median 1h plus the largest of the 25 errors)", got)
	}
}

// BenchmarkLimitAdvice10k recommends limits for 10,000 pending jobs: the
// ensemble trained on all of KTH SP2 but its last 12,000 jobs, its
// calibration warm from 2,000 of them, asked for the last 10,000 as if
// they were pending now (the "advice for 10,000 pending jobs").
func BenchmarkLimitAdvice10k(b *testing.B) {
	res, err := datasets.ReadTrace("swf:"+testenv.Dataset(b, "swf", "KTH-SP2-1996-2.1-cln.swf.gz"), datasets.ReadOptions{})
	if err != nil {
		b.Fatal(err)
	}
	n := len(res.Jobs)
	history, warm, pending := res.Jobs[:n-12000], res.Jobs[n-12000:n-10000], res.Jobs[n-10000:]
	reg := training.Registry{Dir: b.TempDir()}
	publish(b, reg, models.TargetDuration, history, models.EnsembleName)
	p, err := predictor.New(reg, nil)
	if err != nil {
		b.Fatal(err)
	}
	le, err := predictor.NewLimitEstimates(predictor.Adapter{P: p}, models.DefaultLimitPolicy())
	if err != nil {
		b.Fatal(err)
	}
	for i := range warm {
		j := cluster.NewJob(warm[i].ID, warm[i].Spec, warm[i].SubmitTime)
		if _, err := le.Forecast(context.Background(), []*cluster.Job{&j}); err != nil {
			b.Fatal(err)
		}
		le.Observe(warm[i])
	}
	now := pending[len(pending)-1].SubmitTime
	ptrs := make([]*cluster.Job, len(pending))
	for i := range pending {
		j := cluster.NewJob(pending[i].ID, pending[i].Spec, now)
		ptrs[i] = &j
	}
	lowered := 0
	for b.Loop() {
		fc, err := le.Forecast(context.Background(), ptrs)
		if err != nil {
			b.Fatal(err)
		}
		lowered = 0
		for i, f := range fc {
			if f.DurationP50 < ptrs[i].Spec.TimeLimit {
				lowered++
			}
		}
	}
	b.ReportMetric(float64(lowered), "lowered/op")
}
