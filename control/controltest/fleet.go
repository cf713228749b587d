package controltest

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/service"
)

// Fleet is the nodes with what running jobs hold and the GPUs' telemetry.
func (f *Fake) Fleet(context.Context) (service.FleetState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.failure("Fleet"); err != nil {
		return service.FleetState{}, err
	}
	holders := map[cluster.GPURef][]cluster.JobID{}
	fs := service.FleetState{Time: f.clock(), Mode: f.mode, Nodes: []service.NodeState{}}
	for _, e := range f.jobs {
		switch {
		case e.job.State == cluster.StateQueued:
			fs.Queued++
		case e.job.State.Active():
			fs.Running++
		}
		for _, ref := range e.placement {
			holders[ref] = append(holders[ref], e.job.ID)
		}
	}
	used := f.allocated()
	for _, n := range f.nodes {
		ns := service.NodeState{Name: n.Name, State: cmp.Or(f.power[n.Name], nodeState(n.State)), GPUs: []service.GPUState{}}
		if l, ok := f.loans[n.Name]; ok {
			ns.Loan = &l
		}
		for _, g := range n.GPUs {
			ref := cluster.GPURef{Node: n.Name, Index: g.Index}
			jobs := holders[ref]
			slices.Sort(jobs)
			gs := service.GPUState{Index: g.Index, Model: g.Model, MemoryBytes: g.MemoryBytes, AllocatedMilli: used[ref], Jobs: jobs}
			if t, ok := f.gpuTel[ref]; ok {
				gs.UtilizationPct, gs.MemoryUsedBytes, gs.PowerW = &t.UtilizationPct, &t.MemoryUsedBytes, &t.PowerW
			}
			ns.GPUs = append(ns.GPUs, gs)
			fs.GPUs++
			fs.GPUsBusy += float64(used[ref]) / cluster.MilliGPU
		}
		fs.Nodes = append(fs.Nodes, ns)
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

// Predict forecasts each spec; an invalid spec is ErrInvalid naming its index.
func (f *Fake) Predict(_ context.Context, specs []cluster.JobSpec) ([]service.Forecast, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.failure("Predict"); err != nil {
		return nil, err
	}
	out := make([]service.Forecast, len(specs))
	for i, s := range specs {
		if err := s.Validate(); err != nil {
			return nil, fmt.Errorf("specs[%d]: %w: %w", i, service.ErrInvalid, err)
		}
		out[i] = f.forecast(s)
	}
	return out, nil
}

// Recommendations answers those at or after since, newest first.
func (f *Fake) Recommendations(_ context.Context, since time.Time, limit int) ([]service.Recommendation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.failure("Recommendations"); err != nil {
		return nil, err
	}
	if limit < 0 {
		return nil, fmt.Errorf("limit: %d is negative: %w", limit, service.ErrInvalid)
	}
	limit = cmp.Or(limit, 100)
	out := []service.Recommendation{}
	for i := len(f.recs) - 1; i >= 0 && len(out) < limit; i-- {
		if !f.recs[i].Time.Before(since) {
			out = append(out, f.recs[i])
		}
	}
	return out, nil
}
