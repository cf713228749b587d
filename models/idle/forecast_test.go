package idle

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
)

var t0 = time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)

func TestForecastCombinesJobsDemandAndIdleGPUs(t *testing.T) {
	in := DefaultInput(t0)
	in.GPUs = []GPUState{
		{Ref: cluster.GPURef{Node: "n1", Index: 0}}, // free
		{Ref: cluster.GPURef{Node: "n1", Index: 1}, Job: "short", RemainingP50: 10 * time.Minute, RemainingP90: 20 * time.Minute},
		{Ref: cluster.GPURef{Node: "n1", Index: 2}, Job: "long", RemainingP50: 10 * time.Hour, RemainingP90: 20 * time.Hour},
		{Ref: cluster.GPURef{Node: "n1", Index: 3}, Job: "idle", RemainingP50: 10 * time.Hour, RemainingP90: 20 * time.Hour, IdleFor: time.Hour},
	}
	got, err := Forecaster{}.Forecast(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.LeadsS) != 24 || got.LeadsS[23] != 7200 {
		t.Fatalf("leads %v", got.LeadsS)
	}
	p := func(i, l int) float64 { return got.GPUs[i].Probability[l] }
	if p(0, 0) != 1 || !(p(1, 0) < 0.5 && p(1, 23) > 0.9) || p(2, 23) > 0.01 {
		t.Fatalf("free %v, short %v, long %v", got.GPUs[0].Probability, got.GPUs[1].Probability, got.GPUs[2].Probability)
	}
	if len(got.GPUs[0].Windows) != 1 || !got.GPUs[0].Windows[0].End.Equal(t0.Add(2*time.Hour)) {
		t.Fatalf("free GPU's windows %+v", got.GPUs[0].Windows)
	}
	if len(got.IdleJobs) != 1 || got.IdleJobs[0].Job != "idle" || got.IdleJobs[0].IdleForS != 3600 {
		t.Fatalf("idle jobs %+v", got.IdleJobs)
	}
	if len(got.Pools) != 1 || len(got.Nodes) != 1 || math.Abs(got.Nodes[0].Expected[0]-got.Pools[0].Expected[0]) > 1e-12 {
		t.Fatalf("pools %+v nodes %+v", got.Pools, got.Nodes)
	}

	// One queued GPU takes the free one: fewer idle GPUs expected.
	in.Pools = []PoolState{{ID: "n1", QueuedGPUs: 1}}
	q, err := Forecaster{}.Forecast(in)
	if err != nil {
		t.Fatal(err)
	}
	if !(q.Pools[0].Expected[0] < got.Pools[0].Expected[0]-0.9) || q.GPUs[0].Probability[0] > 0.5 {
		t.Fatalf("with demand %v, without %v", q.Pools[0].Expected, got.Pools[0].Expected)
	}
}

func TestForecastRejectsBadInput(t *testing.T) {
	in := DefaultInput(t0)
	in.GPUs = []GPUState{{Ref: cluster.GPURef{Node: "n", Index: 0}, Job: "j", RemainingP50: time.Hour, RemainingP90: time.Minute}}
	if _, err := (Forecaster{}).Forecast(in); err == nil {
		t.Fatal("P90 below P50 accepted")
	}
	if _, err := (Forecaster{}).Forecast(DefaultInput(t0)); err != ErrNoGPUs {
		t.Fatalf("err = %v", err)
	}
}

// benchInput is a fleet of nodes of 8 GPUs, half of them running jobs,
// each node a pool with 6 hours of telemetry.
func benchInput(nodes int) Input {
	in := DefaultInput(t0)
	for n := range nodes {
		node := fmt.Sprintf("node-%05d", n)
		idle := make([]float64, 360)
		capacity := make([]float64, 360)
		times := make([]time.Time, 360)
		for i := range idle {
			times[i] = t0.Add(time.Duration(i-359) * time.Minute)
			idle[i], capacity[i] = float64((i/37+n)%9), 8
		}
		h, _ := NewPool(node, times, idle, capacity, nil, time.Minute)
		in.Pools = append(in.Pools, PoolState{ID: node, QueuedGPUs: float64(n % 3), History: h})
		for g := range 8 {
			s := GPUState{Ref: cluster.GPURef{Node: node, Index: g}}
			if g%2 == 0 {
				s.Job = cluster.JobID(fmt.Sprintf("j%d-%d", n, g/4))
				s.RemainingP50 = time.Duration(10+g*7+n%50) * time.Minute
				s.RemainingP90 = 3 * s.RemainingP50
				s.IdleFor = time.Duration(n%4) * 10 * time.Minute
			}
			in.GPUs = append(in.GPUs, s)
		}
	}
	return in
}

// BenchmarkForecast10kGPUs forecasts 10,000 GPUs (1,250 nodes of 8, each
// node a pool with telemetry) 2 hours ahead in 5-minute steps.
func BenchmarkForecast10kGPUs(b *testing.B) {
	m := fittedTestModel(b)
	in := benchInput(1250)
	f := Forecaster{Model: m}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := f.Forecast(in); err != nil {
			b.Fatal(err)
		}
	}
}

func TestRemainingIsConditionalOnTheRunSoFar(t *testing.T) {
	p50, p90 := time.Hour, 4*time.Hour
	// Not started: the forecast itself.
	r50, r90 := Remaining(p50, p90, 0)
	if d := r50 - p50; d < -time.Second || d > time.Second {
		t.Errorf("not started: remaining P50 %s, want %s", r50, p50)
	}
	if d := r90 - p90; d < -time.Second || d > time.Second {
		t.Errorf("not started: remaining P90 %s, want %s", r90, p90)
	}
	// Checked by integration: the median of D − t given D > t.
	for _, ran := range []time.Duration{10 * time.Minute, time.Hour, 3 * time.Hour, 24 * time.Hour} {
		r50, r90 := Remaining(p50, p90, ran)
		mu, sigma := math.Log(p50.Seconds()), (math.Log(p90.Seconds())-math.Log(p50.Seconds()))/z90
		surv := func(d float64) float64 { return 0.5 * math.Erfc((math.Log(d)-mu)/(sigma*math.Sqrt2)) }
		s0 := surv(ran.Seconds())
		if got := surv((ran + r50).Seconds()) / s0; math.Abs(got-0.5) > 1e-3 {
			t.Errorf("ran %s: P(D > ran + P50 | D > ran) = %g, want 0.5", ran, got)
		}
		if got := surv((ran + r90).Seconds()) / s0; math.Abs(got-0.1) > 1e-3 {
			t.Errorf("ran %s: P(D > ran + P90 | D > ran) = %g, want 0.1", ran, got)
		}
		if r90 < r50 || r50 < time.Second {
			t.Errorf("ran %s: remaining %s, %s", ran, r50, r90)
		}
	}
	// Far past the tail it stays positive and finite.
	if r50, r90 := Remaining(time.Minute, time.Minute, 1000*time.Hour); r50 < time.Second || r90 < r50 {
		t.Errorf("far past: %s, %s", r50, r90)
	}
}
