package control

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/collector"
	"github.com/prescient-sched/prescient/datasets/datasetstest"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/models"
	"github.com/prescient-sched/prescient/predictor"
	"github.com/prescient-sched/prescient/service"
	"github.com/prescient-sched/prescient/training"
)

// reportLatency reports the p50 and p99 of per-call durations.
func reportLatency(b *testing.B, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	slices.Sort(ds)
	q := func(p float64) float64 {
		return float64(ds[min(int(p*float64(len(ds))), len(ds)-1)].Microseconds()) / 1000
	}
	b.ReportMetric(q(0.5), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
}

// cpuTime is the CPU time (user and system, all threads) the process has
// used so far: with other work on the machine, wall time per call says
// little, CPU time per call is what a what-if costs.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkWhatIf asks what an added 8-GPU job would change with 1,000
// jobs queued (1, 2, 4 or 8 GPUs; P50 from 5 minutes to 8 hours) on four
// 8-GPU nodes, all busy, with the prescient policy: two simulations of
// ~1,000 jobs each from the live state read from the store.
//
// It runs with the planner's default backfill depth (1,000) and with 100
// (Config.BackfillDepth), which bounds the walk of each plan cycle.
func BenchmarkWhatIf(b *testing.B) {
	for _, depth := range []int{1000, 100} {
		b.Run(fmt.Sprintf("backfill_depth=%d", depth), func(b *testing.B) { benchWhatIf(b, depth) })
	}
}

func benchWhatIf(b *testing.B, depth int) {
	e := newEnv(b, fleetOf(4, 8), func(c *Config) { c.BackfillDepth = depth })
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 4 {
		e.submit(fmt.Sprintf("run%d", i), spec(8, 3*time.Hour))
	}
	e.plane.cycle(e.ctx)
	e.clock.Advance(30 * time.Minute)
	queueJobs(b, e, rng, 1000, 4, 4)
	askWhatIfs(b, e, 1005)
}

// queueJobs submits n jobs of 1 to 2^(sizes-1) GPUs, with P50 from 5
// minutes to 8 hours, of tenants t0 to t(tenants-1) and tiers 1 to 3.
func queueJobs(b *testing.B, e *env, rng *rand.Rand, n, sizes, tenants int) {
	for i := range n {
		s := spec(1<<rng.IntN(sizes), time.Duration(300+rng.Float64()*8*3600)*time.Second)
		s.Tenant = fmt.Sprintf("t%d", i%tenants)
		s.Tier = cluster.Tier(1 + rng.IntN(3))
		if _, err := e.plane.Submit(e.ctx, service.SubmitRequest{ID: cluster.JobID(fmt.Sprintf("q%04d", i)), Spec: s}); err != nil {
			b.Fatal(err)
		}
	}
}

// askWhatIfs asks what an added 8-GPU job of two hours would change, once
// per iteration, checks that the answer has every one of jobs, and
// reports the process's CPU time per answer, how far ahead the answers
// looked (horizon-min: 0 when they ran every job to its end), the jobs
// that start beyond that, and the latency.
func askWhatIfs(b *testing.B, e *env, jobs int) {
	req := service.WhatIfRequest{AddJobs: []service.SubmitRequest{{ID: "new", Spec: spec(8, 2*time.Hour)}}}
	var ds []time.Duration
	var ahead time.Duration
	beyond := 0
	b.ResetTimer()
	cpu0 := cpuTime(b)
	for b.Loop() {
		start := time.Now()
		res, err := e.plane.WhatIf(e.ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(start))
		if len(res.Jobs) != jobs {
			b.Fatalf("%d jobs in the answer, want %d", len(res.Jobs), jobs)
		}
		if res.Horizon != nil {
			ahead += res.Horizon.Sub(e.clock.Now())
		}
		beyond += res.Scenario.BeyondHorizon
	}
	b.ReportMetric(float64((cpuTime(b)-cpu0).Microseconds())/1000/float64(len(ds)), "cpu-ms/op")
	b.ReportMetric(ahead.Minutes()/float64(len(ds)), "horizon-min")
	b.ReportMetric(float64(beyond)/float64(len(ds)), "beyond")
	reportLatency(b, ds)
}

// BenchmarkPredict forecasts one job spec (what POST /v1/predict usually
// asks) with the learned ensemble trained on 3,000 Philly jobs.
func BenchmarkPredict(b *testing.B) {
	philly := datasetstest.Philly(b)[:3000]
	reg := training.Registry{Dir: b.TempDir()}
	if _, err := training.TrainAndPublish(context.Background(), training.Config{Target: models.TargetDuration,
		Learners: []string{models.EnsembleName}, Seed: 1}, philly, reg); err != nil {
		b.Fatal(err)
	}
	pred, err := predictor.New(reg, nil)
	if err != nil {
		b.Fatal(err)
	}
	e := newEnv(b, fleetOf(4, 8), func(c *Config) { c.Forecaster = predictor.Adapter{P: pred} })
	specs := []cluster.JobSpec{{Tenant: philly[0].Spec.Tenant, Tier: cluster.TierStandard, GPUs: 4, GPUMilli: cluster.MilliGPU}}
	var ds []time.Duration
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		fc, err := e.plane.Predict(e.ctx, specs)
		if err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(start))
		if len(fc) != 1 || fc[0].DurationP50S <= 0 {
			b.Fatalf("forecast %+v", fc)
		}
	}
	reportLatency(b, ds)
}

// BenchmarkPlanCycle is one cycle of the live loop (read the state from
// the store, plan, record what changed) with 1,000 jobs queued on four
// busy 8-GPU nodes, in advisor mode so that the state stays the same.
func BenchmarkPlanCycle(b *testing.B) {
	e := newEnv(b, fleetOf(4, 8), nil)
	for i := range 4 {
		e.submit(fmt.Sprintf("run%d", i), spec(8, 3*time.Hour))
	}
	e.plane.cycle(e.ctx)
	if err := e.plane.SetMode(e.ctx, service.ModeAdvisor); err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 1000 {
		s := spec(1<<rng.IntN(4), time.Duration(300+rng.Float64()*8*3600)*time.Second)
		s.Tenant = fmt.Sprintf("t%d", i%4)
		if _, err := e.plane.Submit(e.ctx, service.SubmitRequest{ID: cluster.JobID(fmt.Sprintf("q%04d", i)), Spec: s}); err != nil {
			b.Fatal(err)
		}
	}
	e.plane.cycle(e.ctx)
	var ds []time.Duration
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		e.plane.cycle(e.ctx)
		ds = append(ds, time.Since(start))
	}
	reportLatency(b, ds)
}

// syntheticUtil answers utilization queries with a made-up series for
// every GPU it was given: a GPU is busy (80%) or idle (0%) in alternating
// runs of a length its index sets. It stands in for a telemetry store in
// the idle benchmark, whose cost is the plane's, not the store's.
type syntheticUtil struct{ uuids []string }

func (s syntheticUtil) Query(_ context.Context, q collector.SeriesQuery) ([]collector.Series, error) {
	out := make([]collector.Series, len(s.uuids))
	for i, u := range s.uuids {
		run := int64(5 + i%50)
		sr := collector.Series{GPU: u, Node: u}
		for t := q.Start; t.Before(q.End); t = t.Add(q.Step) {
			v := 0.0
			if (t.Unix()/60/run)%2 == 0 {
				v = 80
			}
			sr.Points = append(sr.Points, collector.Point{Time: t, Value: v})
		}
		out[i] = sr
	}
	return out, nil
}

// BenchmarkIdleForecast10kGPUs is GET /v1/forecasts/idle's work on 1,250
// nodes of 8 GPUs, 1,000 8-GPU jobs running and 500 queued, with every
// GPU's utilization of the last 4 hours already read (each call reads the
// minute that passed since the last): the jobs' remaining times, each
// GPU's idle run, each node's idle-count history, the forecast for 2 hours
// in 5-minute steps. No idle model is served (its cost is
// models/idle.BenchmarkForecast10kGPUs's).
func BenchmarkIdleForecast10kGPUs(b *testing.B) {
	fleet := fleetOf(1250, 8)
	var uuids []string
	for n := range fleet.Nodes {
		for g := range fleet.Nodes[n].GPUs {
			u := fmt.Sprintf("GPU-%d-%d", n, g)
			fleet.Nodes[n].GPUs[g].UUID = u
			uuids = append(uuids, u)
		}
	}
	e := newEnv(b, fleet, func(c *Config) { c.Telemetry = syntheticUtil{uuids: uuids}; c.IdleJobAfter = -1 })
	for i := range 1000 {
		e.submit(fmt.Sprintf("run%04d", i), spec(8, time.Duration(1+i%10)*time.Hour))
	}
	e.plane.cycle(e.ctx)
	for _, call := range e.backend.of("start") {
		e.event(executor.JobEvent{Type: executor.JobStarted, Job: call.job, Attempt: call.attempt, Node: call.a.Allocations[0].GPU.Node})
	}
	for i := range 500 {
		e.submit(fmt.Sprintf("q%04d", i), spec(8, time.Hour))
	}
	e.clock.Advance(30 * time.Minute)
	if _, err := e.plane.IdleForecast(e.ctx, service.IdleQuery{}); err != nil { // the first read: 4 hours
		b.Fatal(err)
	}
	var ds []time.Duration
	for b.Loop() {
		e.clock.Advance(time.Minute)
		start := time.Now()
		f, err := e.plane.IdleForecast(e.ctx, service.IdleQuery{})
		if err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(start))
		if f.TelemetryGPUs != 10000 || len(f.GPUs) != 10000 {
			b.Fatalf("%d GPUs, %d with telemetry", len(f.GPUs), f.TelemetryGPUs)
		}
	}
	reportLatency(b, ds)
}

// BenchmarkWhatIfBusyFleet is the what-if of a busy fleet: an added 8-GPU
// job with 1,000 jobs running (750 of 8 GPUs, 250 of 16 on two nodes) on
// 1,250 8-GPU nodes (10,000 GPUs, all busy) and 5,000 queued (1 to 16
// GPUs; P50 from 5 minutes to 8 hours), with the default compute budget
// (whatif.DefaultWhatIfBudget; "unbounded": none). It reports how far
// ahead the answer looked (horizon-min) and how many jobs start beyond
// that. Target: p99 under 200 ms.
func BenchmarkWhatIfBusyFleet(b *testing.B) {
	for _, budget := range []time.Duration{0, time.Hour} {
		name := "budget=default"
		if budget > 0 {
			name = "unbounded"
		}
		b.Run(name, func(b *testing.B) { benchWhatIfBusyFleet(b, budget) })
	}
}

func benchWhatIfBusyFleet(b *testing.B, budget time.Duration) {
	e := newEnv(b, fleetOf(1250, 8), func(c *Config) { c.WhatIfBudget = budget })
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 1000 {
		g := 8
		if i%4 == 3 {
			g = 16
		}
		s := spec(g, time.Duration(3600+rng.Float64()*11*3600)*time.Second)
		s.Tenant = fmt.Sprintf("t%d", i%8)
		e.submit(fmt.Sprintf("run%04d", i), s)
	}
	e.plane.cycle(e.ctx)
	e.clock.Advance(30 * time.Minute)
	queueJobs(b, e, rng, 5000, 5, 8)
	askWhatIfs(b, e, 6001)
}
