package controltest

import (
	"context"
	"fmt"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/models/idle"
	"github.com/prescient-sched/prescient/service"
)

// SetGPUIdleFor says how long one GPU has been below the idle threshold,
// for IdleForecast's idle jobs.
func (f *Fake) SetGPUIdleFor(ref cluster.GPURef, d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.idleFor == nil {
		f.idleFor = map[cluster.GPURef]time.Duration{}
	}
	f.idleFor[ref] = d
}

// IdleForecast implements service.Service with the running jobs' forecasts
// and the queue alone (no idle model, no telemetry history): each node is
// a pool.
func (f *Fake) IdleForecast(_ context.Context, q service.IdleQuery) (service.IdleForecast, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.failure("IdleForecast"); err != nil {
		return service.IdleForecast{}, err
	}
	now := f.clock()
	in, err := q.Input(now)
	if err != nil {
		return service.IdleForecast{}, err
	}
	out := service.IdleForecast{ThresholdPct: idle.DefaultConfig().ThresholdPct}
	holder := map[cluster.GPURef]*entry{}
	for _, e := range f.jobs {
		switch {
		case e.job.State == cluster.StateQueued:
			out.QueuedGPUs += float64(e.job.Spec.MilliGPUs()) / cluster.MilliGPU
		case e.job.State.Active():
			for _, ref := range e.placement {
				holder[ref] = e
			}
		}
	}
	total := 0
	for _, n := range f.nodes {
		total += len(n.GPUs)
	}
	for _, n := range f.nodes {
		if q.Node != "" && n.Name != q.Node || q.Pool != "" && n.Name != q.Pool {
			continue
		}
		in.Pools = append(in.Pools, idle.PoolState{ID: n.Name, QueuedGPUs: out.QueuedGPUs * float64(len(n.GPUs)) / float64(max(total, 1))})
		for _, g := range n.GPUs {
			ref := cluster.GPURef{Node: n.Name, Index: g.Index}
			st := idle.GPUState{Ref: ref, Pool: n.Name, IdleFor: f.idleFor[ref]}
			if e := holder[ref]; e != nil {
				ran := now.Sub(e.runs[len(e.runs)-1].from)
				st.Job = e.job.ID
				st.RemainingP50, st.RemainingP90 = idle.Remaining(time.Duration(e.forecast.DurationP50S*float64(time.Second)),
					time.Duration(e.forecast.DurationP90S*float64(time.Second)), ran)
			}
			in.GPUs = append(in.GPUs, st)
		}
	}
	if len(in.GPUs) == 0 {
		return service.IdleForecast{}, fmt.Errorf("controltest: no GPUs to forecast: %w", service.ErrNotFound)
	}
	fc, err := idle.Forecaster{}.Forecast(in)
	if err != nil {
		return service.IdleForecast{}, fmt.Errorf("controltest: %w: %w", err, service.ErrInvalid)
	}
	out.Forecast = fc
	if out.IdleJobs == nil {
		out.IdleJobs = []service.IdleJob{}
	}
	return out, nil
}
