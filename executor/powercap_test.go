package executor

import (
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
)

func TestCostCapperCapsWideJobsAndKeepsDeadlines(t *testing.T) {
	c, err := NewCostCapper(10, ZeusV100Caps)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	job := func(deadline time.Time) *JobView {
		return &JobView{Job: &cluster.Job{Spec: cluster.JobSpec{Deadline: deadline}},
			Forecast: Forecast{DurationP50: time.Hour, DurationP90: time.Hour}}
	}
	if pc, why := c.Cap(job(time.Time{}), 1, now); !pc.Uncapped() || why != "" {
		t.Errorf("one-GPU job at price 10 capped: %+v %q", pc, why)
	}
	wide, why := c.Cap(job(time.Time{}), 8, now)
	if wide.Uncapped() || why == "" {
		t.Fatalf("8-GPU job at price 10 not capped")
	}
	// (8 × Power + 10) × Slowdown is least there, and below uncapped's 18.
	for _, pc := range ZeusV100Caps {
		if (8*pc.Power+10)*pc.Slowdown < (8*wide.Power+10)*wide.Slowdown {
			t.Errorf("cap %.1f costs less than the chosen %.1f", pc.Fraction, wide.Fraction)
		}
	}
	// A deadline 1h01m away leaves room for no slowdown above 1.0167.
	tight, _ := c.Cap(job(now.Add(61*time.Minute)), 8, now)
	if !(tight.Uncapped() || tight.Slowdown*3600 <= 61*60) {
		t.Errorf("deadline job capped to %+v, past its deadline", tight)
	}
	for _, bad := range []struct {
		price float64
		curve []PowerCap
	}{{-1, ZeusV100Caps}, {1, nil}, {1, []PowerCap{{Fraction: 0.5, Slowdown: 0.9, Power: 0.5}}}} {
		if _, err := NewCostCapper(bad.price, bad.curve); err == nil {
			t.Errorf("NewCostCapper(%g, %v) accepted", bad.price, bad.curve)
		}
	}
}
