package control

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/collector"
	"github.com/prescient-sched/prescient/service"
)

// AgentStatus is implemented by node sources that know whether a node's
// agent is connected (the agent backend's hub).
type AgentStatus interface {
	Connected(node string) bool
}

// telemetryFresh is how old a sample may be to show as the GPU's now.
const telemetryFresh = 5 * time.Minute

// Fleet implements Service.
func (p *Plane) Fleet(ctx context.Context) (service.FleetState, error) {
	now := p.cfg.Clock().UTC()
	nodes, parked := p.parking.Fleet(p.cfg.Nodes.Nodes())
	pls, err := p.cfg.Store.Placements(ctx)
	if err != nil {
		return service.FleetState{}, fmt.Errorf("fleet: %w", err)
	}
	type held struct {
		milli int
		jobs  []cluster.JobID
	}
	byGPU := map[cluster.GPURef]*held{}
	for _, pl := range pls {
		for _, a := range pl.Allocations {
			h := byGPU[a.GPU]
			if h == nil {
				h = &held{}
				byGPU[a.GPU] = h
			}
			h.milli += a.Milli
			h.jobs = append(h.jobs, pl.Job)
		}
	}
	latest := p.latestTelemetry(ctx, now)
	fs := service.FleetState{Time: now, Mode: p.Mode()}
	agents, _ := p.cfg.Nodes.(AgentStatus)
	for i := range nodes {
		n := &nodes[i]
		ns := service.NodeState{Name: n.Name, State: cmp.Or(parked[n.Name], nodeState(n.State)), Loan: p.lending.Loan(n)}
		if agents != nil {
			ns.Agent = agents.Connected(n.Name)
		}
		for _, g := range n.GPUs {
			gs := service.GPUState{Index: g.Index, Model: g.Model, MemoryBytes: g.MemoryBytes}
			if h := byGPU[cluster.GPURef{Node: n.Name, Index: g.Index}]; h != nil {
				gs.AllocatedMilli, gs.Jobs = h.milli, h.jobs
				fs.GPUsBusy += float64(h.milli) / cluster.MilliGPU
			}
			if t, ok := latest[g.UUID]; ok && g.UUID != "" {
				gs.UtilizationPct, gs.MemoryUsedBytes, gs.PowerW = t.util, t.mem, t.power
			}
			ns.GPUs = append(ns.GPUs, gs)
		}
		fs.GPUs += len(n.GPUs)
		fs.Nodes = append(fs.Nodes, ns)
	}
	if fs.Queued, err = p.count(ctx, cluster.StateQueued); err != nil {
		return service.FleetState{}, fmt.Errorf("fleet: %w", err)
	}
	if fs.Running, err = p.count(ctx, cluster.StateRunning, cluster.StateCheckpointing); err != nil {
		return service.FleetState{}, fmt.Errorf("fleet: %w", err)
	}
	return fs, nil
}

func nodeState(s cluster.NodeState) string {
	switch s {
	case cluster.NodeDrained:
		return "draining"
	case cluster.NodeFailed:
		return "down"
	}
	return "ready"
}

func (p *Plane) count(ctx context.Context, states ...cluster.JobState) (int, error) {
	jobs, err := p.listJobs(ctx, states...)
	return len(jobs), err
}

// gpuNow is a GPU's latest telemetry.
type gpuNow struct {
	util, power *float64
	mem         *int64
}

// latestTelemetry reads each GPU's latest utilization, memory and power of
// the last telemetryFresh, by GPU UUID. Telemetry that cannot be read is
// logged and left out: the fleet's allocations still answer.
func (p *Plane) latestTelemetry(ctx context.Context, now time.Time) map[string]gpuNow {
	out := map[string]gpuNow{}
	if p.cfg.Telemetry == nil {
		return out
	}
	for _, field := range []string{"util_gpu_pct", "mem_used_bytes", "power_w"} {
		series, err := p.cfg.Telemetry.Query(ctx, collector.SeriesQuery{Field: field,
			Start: now.Add(-telemetryFresh), End: now.Add(time.Second), Step: telemetryFresh + time.Second, Agg: "last"})
		if err != nil {
			p.log.Warn("fleet: telemetry not read", "field", field, "error", err)
			continue
		}
		for _, s := range series {
			if len(s.Points) == 0 {
				continue
			}
			v := s.Points[len(s.Points)-1].Value
			g := out[s.GPU]
			switch field {
			case "util_gpu_pct":
				g.util = &v
			case "power_w":
				g.power = &v
			default:
				m := int64(v)
				g.mem = &m
			}
			out[s.GPU] = g
		}
	}
	return out
}

// MaxPredictSpecs bounds one Predict call.
const MaxPredictSpecs = 10000

// Predict implements Service: forecasts for job specs that are not
// submitted.
func (p *Plane) Predict(ctx context.Context, specs []cluster.JobSpec) ([]service.Forecast, error) {
	if len(specs) == 0 {
		return nil, fmt.Errorf("no specs: %w", service.ErrInvalid)
	}
	if len(specs) > MaxPredictSpecs {
		return nil, fmt.Errorf("%d specs, at most %d: %w", len(specs), MaxPredictSpecs, service.ErrInvalid)
	}
	now := p.cfg.Clock().UTC()
	jobs := make([]cluster.Job, len(specs))
	ptrs := make([]*cluster.Job, len(specs))
	for i, s := range specs {
		s, err := p.checkSpec(s, fmt.Sprintf("specs[%d]", i))
		if err != nil {
			return nil, err
		}
		jobs[i] = cluster.NewJob(cluster.JobID(fmt.Sprintf("spec-%d", i)), s, now)
		ptrs[i] = &jobs[i]
	}
	fc, err := p.cfg.Forecaster.Forecast(ctx, ptrs)
	if err != nil {
		return nil, fmt.Errorf("predict: %w", err)
	}
	out := make([]service.Forecast, len(fc))
	for i, f := range fc {
		out[i] = service.Forecast{DurationP50S: apiSeconds(f.DurationP50), DurationP90S: apiSeconds(f.DurationP90),
			MemoryP90Bytes: f.MemoryP90Bytes, Source: f.Source}
	}
	return out, nil
}

// Recommendations implements Service.
func (p *Plane) Recommendations(ctx context.Context, since time.Time, limit int) ([]service.Recommendation, error) {
	if limit < 0 {
		return nil, fmt.Errorf("limit %d is negative: %w", limit, service.ErrInvalid)
	}
	recs, err := p.cfg.Store.ListRecommendations(ctx, since, limit)
	if err != nil {
		return nil, fmt.Errorf("recommendations: %w", err)
	}
	out := make([]service.Recommendation, len(recs))
	for i, r := range recs {
		out[i] = service.Recommendation{ID: r.ID, Time: r.Time, Job: r.JobID, Kind: r.Kind, Reason: r.Reason, Status: string(r.Status)}
		if len(r.Details) > 0 {
			if err := json.Unmarshal(r.Details, &out[i].Details); err != nil {
				return nil, fmt.Errorf("recommendation %d: details: %w", r.ID, err)
			}
		}
	}
	return out, nil
}
