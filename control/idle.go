package control

import (
	"context"
	"fmt"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/control/live"
	"github.com/prescient-sched/prescient/control/telemetry"
	"github.com/prescient-sched/prescient/models/idle"
	"github.com/prescient-sched/prescient/service"
)

// IdleForecast implements Service: for each GPU of the fleet (or of
// q.Pool or q.Node), its chance of being idle at each step, its idle
// windows, the expected idle count of each pool and node, and the running
// jobs whose GPUs have been idle for at least the window length. It
// combines the running jobs' remaining duration forecasts (given how long
// they have run), the queued demand, and each GPU's recent utilization
// from the telemetry store through the idle model.
func (p *Plane) IdleForecast(ctx context.Context, q service.IdleQuery) (service.IdleForecast, error) {
	now := p.cfg.Clock().UTC()
	in, err := q.Input(now)
	if err != nil {
		return service.IdleForecast{}, err
	}
	var model *idle.Model
	version := 0
	if p.cfg.Idle != nil {
		model, version = p.cfg.Idle.Current()
	}
	threshold := telemetry.ThresholdOf(model)

	sc, err := p.idleScope(q)
	if err != nil {
		return service.IdleForecast{}, err
	}
	gpus, refs, pools, fleetGPUs := sc.gpus, sc.refs, sc.pools, sc.fleetGPUs

	// What holds each GPU, and for how much longer.
	holders, err := p.gpuHolders(ctx, now)
	if err != nil {
		return service.IdleForecast{}, fmt.Errorf("idle forecast: %w", err)
	}
	// Each GPU's recent utilization: by its UUID, or else (Kubernetes) by
	// the UUIDs its job's processes ran on, its job's GPUs paired with
	// them in order (which of them is which is not known, and a job's GPUs
	// are alike to the forecast).
	byProcess := p.idleJobs.UUIDsByProcess()
	uuids := make([]string, 0, len(gpus))
	for i := range gpus {
		g := &gpus[i]
		if g.UUID == "" {
			g.UUID = byProcess[refs[i]]
		}
		if g.UUID != "" {
			uuids = append(uuids, g.UUID)
		}
	}
	util, _ := p.util.Read(ctx, now, threshold, uuids)
	out := service.IdleForecast{ModelVersion: version, ThresholdPct: threshold}
	in.GPUs = make([]idle.GPUState, len(gpus))
	grids := make(map[string][]idle.Grid)
	for i, g := range gpus {
		st := idle.GPUState{Ref: refs[i], Pool: pools[i]}
		if h, ok := holders[refs[i]]; ok {
			st.Job, st.RemainingP50, st.RemainingP90 = h.job, h.p50, h.p90
		}
		if grid, ok := util[g.UUID]; ok && g.UUID != "" {
			out.TelemetryGPUs++
			st.IdleFor = grid.IdleRun()
			grids[pools[i]] = append(grids[pools[i]], grid)
		}
		in.GPUs[i] = st
	}
	// Queued demand, shared among the pools by their size; each pool's
	// utilization history.
	queued, err := p.listJobs(ctx, cluster.StateQueued)
	if err != nil {
		return service.IdleForecast{}, fmt.Errorf("idle forecast: %w", err)
	}
	for i := range queued {
		out.QueuedGPUs += float64(queued[i].Spec.MilliGPUs()) / cluster.MilliGPU
	}
	in.Pools = poolStates(pools, grids, out.QueuedGPUs, fleetGPUs)
	if err := ctx.Err(); err != nil {
		return service.IdleForecast{}, err
	}
	f, err := idle.Forecaster{Model: model}.Forecast(in)
	if err != nil {
		return service.IdleForecast{}, fmt.Errorf("idle forecast: %w", err)
	}
	out.Forecast = f
	if out.IdleJobs == nil {
		out.IdleJobs = []idle.IdleJob{}
	}
	return out, nil
}

// poolStates is each pool's state for the forecaster, in the order the
// pools first appear: its share of the queued GPUs by its size among the
// fleet's, and its GPUs' utilization history.
func poolStates(pools []string, grids map[string][]idle.Grid, queued float64, fleetGPUs int) []idle.PoolState {
	size := map[string]int{}
	var order []string
	for _, pool := range pools {
		if size[pool] == 0 {
			order = append(order, pool)
		}
		size[pool]++
	}
	out := make([]idle.PoolState, 0, len(order))
	for _, pool := range order {
		ps := idle.PoolState{ID: pool, QueuedGPUs: queued * float64(size[pool]) / float64(fleetGPUs)}
		if g := grids[pool]; len(g) > 0 {
			ps.History = idle.PoolFromGrids(pool, g)
		}
		out = append(out, ps)
	}
	return out
}

// idleScope is the GPUs an idle forecast covers, with their refs and
// pools, and the GPUs of the fleet up (the queue's demand is shared among
// all of them).
type idleScope struct {
	gpus      []cluster.GPU
	refs      []cluster.GPURef
	pools     []string
	fleetGPUs int
}

// idleScope is the scope of q: the fleet's GPUs up, or q.Pool's or
// q.Node's; ErrNotFound when there are none.
func (p *Plane) idleScope(q service.IdleQuery) (idleScope, error) {
	var sc idleScope
	nodes := p.cfg.Nodes.Nodes()
	for i := range nodes {
		n := &nodes[i]
		pool := n.Labels[cluster.PoolLabel]
		if pool == "" {
			pool = n.Name
		}
		if n.State == cluster.NodeFailed {
			continue
		}
		sc.fleetGPUs += len(n.GPUs)
		if q.Pool != "" && pool != q.Pool || q.Node != "" && n.Name != q.Node {
			continue
		}
		for _, g := range n.GPUs {
			sc.gpus = append(sc.gpus, g)
			sc.refs = append(sc.refs, cluster.GPURef{Node: n.Name, Index: g.Index})
			sc.pools = append(sc.pools, pool)
		}
	}
	if len(sc.gpus) > 0 {
		return sc, nil
	}
	what := "the fleet has no GPUs"
	switch {
	case q.Node != "":
		what = fmt.Sprintf("node %q has no GPUs up or is not in the fleet", q.Node)
	case q.Pool != "":
		what = fmt.Sprintf("pool %q has no GPUs up (nodes are pooled by their %s label, or each node is a pool)", q.Pool, cluster.PoolLabel)
	}
	return sc, fmt.Errorf("%s: %w", what, service.ErrNotFound)
}

// holder is the job that holds a GPU longest (of the jobs sharing it),
// with its remaining P50 and P90.
type holder struct {
	job      cluster.JobID
	p50, p90 time.Duration
}

// gpuHolders maps each allocated GPU to the job holding it longest by the
// remaining P90 (idle.Remaining: given how long the attempt has run).
func (p *Plane) gpuHolders(ctx context.Context, now time.Time) (map[cluster.GPURef]holder, error) {
	active, err := p.listJobs(ctx, cluster.StateRunning, cluster.StateCheckpointing)
	if err != nil {
		return nil, err
	}
	pls, err := p.cfg.Store.Placements(ctx)
	if err != nil {
		return nil, err
	}
	allocs := make(map[cluster.JobID][]cluster.Allocation, len(pls))
	for _, pl := range pls {
		allocs[pl.Job] = pl.Allocations
	}
	fcs, err := p.forecastsFor(ctx, active)
	if err != nil {
		p.log.Warn("idle forecast: forecasts missing; those jobs count on a default", "error", err)
	}
	out := map[cluster.GPURef]holder{}
	for i := range active {
		j := &active[i]
		f, ok := fcs[j.ID]
		if !ok {
			f.DurationP50, f.DurationP90 = defaultForecast, 2*defaultForecast
		}
		ran := live.SavedProgress(j)
		if !j.StartTime.IsZero() && now.After(j.StartTime) {
			ran += now.Sub(j.StartTime)
		}
		h := holder{job: j.ID}
		h.p50, h.p90 = idle.Remaining(f.DurationP50, f.DurationP90, ran)
		for _, a := range allocs[j.ID] {
			if cur, ok := out[a.GPU]; !ok || h.p90 > cur.p90 {
				out[a.GPU] = h
			}
		}
	}
	return out, nil
}
