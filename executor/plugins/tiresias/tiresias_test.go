package tiresias

import (
	"math"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
)

func TestPromotionNeedsAnEarlierRunAndAWaitOfKnobTimesIt(t *testing.T) {
	ord, err := New(DefaultArgs())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2017, 11, 10, 12, 0, 0, 0, time.UTC)
	job := cluster.NewJob("j", cluster.JobSpec{GPUs: 1}, now.Add(-10*time.Hour))
	v := &executor.JobView{Job: &job, AttainedGPU: 5 * time.Hour, QueuedSince: now.Add(-80 * time.Minute)}
	ctx := &executor.OrderContext{Now: now}
	if got := ord.Key(v, ctx)[0]; got != 1 {
		t.Errorf("never-stopped job in queue %v, want 1 (no promotion without a last run)", got)
	}
	v.LastRun = 10 * time.Minute // 8 × 10m = 80m: promoted now
	if got := ord.Key(v, ctx)[0]; got != 0 {
		t.Errorf("job that waited 8× its last run in queue %v, want 0", got)
	}
	v.LastRun = 11 * time.Minute
	if got := ord.Key(v, ctx)[0]; got != 1 {
		t.Errorf("job that waited less than 8× its last run in queue %v, want 1", got)
	}
	if got, want := ord.NextChange(v, false, now), v.QueuedSince.Add(88*time.Minute); !got.Equal(want) {
		t.Errorf("wakes at %s, want %s", got, want)
	}
	job.State = cluster.StateRunning // a running job is in the queue its attained service says
	v.LastRun = 10 * time.Minute
	if got := ord.Key(v, ctx)[0]; got != 1 {
		t.Errorf("running job in queue %v, want 1", got)
	}
}

func TestOrderIsStaticOnlyWithoutPromotion(t *testing.T) {
	with, _ := New(DefaultArgs())
	without, _ := New(Args{Thresholds: []time.Duration{time.Hour}})
	if with.StaticKeys() || !without.StaticKeys() {
		t.Errorf("static: %v with promotion, %v without; want false, true", with.StaticKeys(), without.StaticKeys())
	}
	for _, k := range []float64{-1, math.NaN(), math.Inf(1)} {
		if _, err := New(Args{Thresholds: []time.Duration{time.Hour}, PromoteKnob: k}); err == nil {
			t.Errorf("knob %v accepted", k)
		}
	}
}
