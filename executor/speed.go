package executor

import (
	"slices"
	"strings"

	"github.com/prescient-sched/prescient/cluster"
)

// GavelSpeeds is each GPU model's training speed relative to a V100: the
// median over Gavel's (OSDI'20) 26 job types of the isolated one-GPU
// throughput on the model over that on a V100
// (../shared/datasets/gavel/simulation_throughputs_flat.csv;
// TestGavelSpeeds recomputes it). The spread is wide (K80 0.09-1.5, P100
// 0.54-2.3 across job types); models Gavel did not measure run at the
// V100's speed (Speed).
var GavelSpeeds = map[string]float64{"K80": 0.247, "P100": 0.813, "V100": 1}

// Speed is a model's GavelSpeeds entry, matched by family ("V100M32" is a
// V100, "P100-12GB" a P100), else 1 (the V100 stands in).
func Speed(model string) float64 {
	if s, ok := ByFamily(GavelSpeeds, model); ok {
		return s
	}
	return 1
}

// ByFamily looks a GPU model up in a table keyed by model family: the
// entry whose key the model's name, upper-cased, starts with.
func ByFamily(table map[string]float64, model string) (float64, bool) {
	m := strings.ToUpper(model)
	for fam, v := range table {
		if strings.HasPrefix(m, fam) {
			return v, true
		}
	}
	return 0, false
}

// FastestFirst wraps a placer for fleets of mixed GPU models: a job that
// names no model is offered the fastest model class first (by Speed) and
// slower ones only when the faster cannot take it. On a fleet of one speed
// it is the inner placer.
type FastestFirst struct {
	Inner   Placer
	classes [][]string // models grouped by speed, fastest first; set per cycle
}

var _ CyclePlacer = (*FastestFirst)(nil)

// Name implements Placer.
func (f *FastestFirst) Name() string { return f.Inner.Name() + "+fastest-first" }

// ForCycle implements CyclePlacer: the model classes of the cycle's fleet,
// and the inner placer's own cycle placer.
func (f *FastestFirst) ForCycle(in *PlanInput) Placer {
	inner := f.Inner
	if cp, ok := inner.(CyclePlacer); ok {
		inner = cp.ForCycle(in)
	}
	out := &FastestFirst{Inner: inner}
	if in.Cluster != nil {
		out.classes = speedClasses(in.Cluster.Nodes)
	}
	return out
}

// speedClasses groups the fleet's GPU models by speed, fastest first.
func speedClasses(nodes []cluster.Node) [][]string {
	by := map[float64][]string{}
	seen := map[string]bool{}
	for i := range nodes {
		for _, g := range nodes[i].GPUs {
			if !seen[g.Model] {
				seen[g.Model] = true
				by[Speed(g.Model)] = append(by[Speed(g.Model)], g.Model)
			}
		}
	}
	if len(by) < 2 {
		return nil
	}
	speeds := make([]float64, 0, len(by))
	for s := range by {
		speeds = append(speeds, s)
	}
	slices.Sort(speeds)
	slices.Reverse(speeds)
	out := make([][]string, 0, len(speeds))
	for _, s := range speeds {
		ms := by[s]
		slices.Sort(ms)
		out = append(out, ms)
	}
	return out
}

// Place implements Placer.
func (f *FastestFirst) Place(job *cluster.Job, c *Capacity) ([]cluster.Allocation, bool, string) {
	if len(f.classes) < 2 || len(job.Spec.GPUModels) > 0 {
		return f.Inner.Place(job, c)
	}
	var why string
	for _, models := range f.classes {
		j := *job
		j.Spec.GPUModels = models
		allocs, ok, w := f.Inner.Place(&j, c)
		if ok {
			return allocs, true, w
		}
		why = w
	}
	return nil, false, why
}
