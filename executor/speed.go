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

// JobTypeLabel is the label naming a job's workload type as Gavel names
// them ("ResNet-50 (batch size 64)", "LM (batch size 20)", ...): with a
// type GavelJobSpeeds knows, the job's speed on each GPU model is that
// type's (JobSpeed).
const JobTypeLabel = "prescient.io/job-type"

// GavelJobSpeeds is, for each of Gavel's 26 job types, its one-GPU
// isolated throughput on each GPU model over that on a V100
// (../shared/datasets/gavel/simulation_throughputs_flat.csv;
// TestGavelSpeeds recomputes it). Types differ widely: a ResNet-18 at
// batch size 256 runs at 0.086 of its V100 speed on a K80, a
// recommendation model at batch size 1024 at 1.5 times it.
var GavelJobSpeeds = map[string]map[string]float64{
	"A3C":                              {"K80": 0.479, "P100": 0.792, "V100": 1},
	"CycleGAN":                         {"K80": 0.114, "P100": 0.543, "V100": 1},
	"LM (batch size 10)":               {"K80": 0.291, "P100": 0.944, "V100": 1},
	"LM (batch size 20)":               {"K80": 0.265, "P100": 0.899, "V100": 1},
	"LM (batch size 40)":               {"K80": 0.254, "P100": 0.791, "V100": 1},
	"LM (batch size 5)":                {"K80": 0.233, "P100": 0.832, "V100": 1},
	"LM (batch size 80)":               {"K80": 0.214, "P100": 0.749, "V100": 1},
	"Recommendation (batch size 1024)": {"K80": 1.509, "P100": 2.315, "V100": 1},
	"Recommendation (batch size 2048)": {"K80": 1.398, "P100": 2.222, "V100": 1},
	"Recommendation (batch size 4096)": {"K80": 1.357, "P100": 2.278, "V100": 1},
	"Recommendation (batch size 512)":  {"K80": 1.409, "P100": 2.096, "V100": 1},
	"Recommendation (batch size 8192)": {"K80": 0.950, "P100": 1.953, "V100": 1},
	"ResNet-18 (batch size 128)":       {"K80": 0.100, "P100": 0.649, "V100": 1},
	"ResNet-18 (batch size 16)":        {"K80": 0.148, "P100": 1.109, "V100": 1},
	"ResNet-18 (batch size 256)":       {"K80": 0.086, "P100": 0.750, "V100": 1},
	"ResNet-18 (batch size 32)":        {"K80": 0.240, "P100": 1.196, "V100": 1},
	"ResNet-18 (batch size 64)":        {"K80": 0.293, "P100": 0.926, "V100": 1},
	"ResNet-50 (batch size 128)":       {"K80": 0.139, "P100": 0.635, "V100": 1},
	"ResNet-50 (batch size 16)":        {"K80": 0.202, "P100": 0.794, "V100": 1},
	"ResNet-50 (batch size 32)":        {"K80": 0.159, "P100": 0.628, "V100": 1},
	"ResNet-50 (batch size 64)":        {"K80": 0.141, "P100": 0.596, "V100": 1},
	"Transformer (batch size 128)":     {"K80": 0.180, "P100": 0.564, "V100": 1},
	"Transformer (batch size 16)":      {"K80": 0.494, "P100": 0.862, "V100": 1},
	"Transformer (batch size 256)":     {"K80": 0.287, "P100": 1.052, "V100": 1},
	"Transformer (batch size 32)":      {"K80": 0.330, "P100": 0.741, "V100": 1},
	"Transformer (batch size 64)":      {"K80": 0.203, "P100": 0.591, "V100": 1},
}

// JobTypes lists GavelJobSpeeds' job types, sorted.
func JobTypes() []string {
	out := make([]string, 0, len(GavelJobSpeeds))
	for t := range GavelJobSpeeds {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// JobSpeed is the job's speed on a GPU model against a V100: its type's
// GavelJobSpeeds entry when the job names a type Gavel measured
// (JobTypeLabel), else the model's median over the types (Speed).
func JobSpeed(job *cluster.Job, model string) float64 {
	if job != nil {
		if table, ok := GavelJobSpeeds[job.Spec.Labels[JobTypeLabel]]; ok {
			if s, ok := ByFamily(table, model); ok {
				return s
			}
		}
	}
	return Speed(model)
}

// Slowdown is 1 over the job's speed (speed, such as JobSpeed) on the
// slowest of the GPUs of allocs, the nodes looked up in snap: the wall
// time a unit of its forecast work takes there, below 1 where every GPU
// runs it faster than its forecast's model. 0 without speeds, or when none
// of the GPUs is known.
func Slowdown(speed func(*cluster.Job, string) float64, job *cluster.Job, allocs []cluster.Allocation, snap *cluster.Snapshot) float64 {
	if speed == nil || snap == nil {
		return 0
	}
	slow := 0.0
	for _, al := range allocs {
		n, ok := snap.Node(al.GPU.Node)
		if !ok || al.GPU.Index >= len(n.GPUs) {
			continue
		}
		if sp := speed(job, n.GPUs[al.GPU.Index].Model); sp > 0 {
			slow = max(slow, 1/sp)
		}
	}
	return slow
}

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
// names no model is offered the fastest model class first (by Speed, or by
// its own type's speeds, JobSpeed) and slower ones only when the faster
// cannot take it. On a fleet of one speed it is the inner placer.
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
	classes := f.classes
	if _, typed := GavelJobSpeeds[job.Spec.Labels[JobTypeLabel]]; typed {
		// The job's own speeds order the classes: a recommendation model
		// goes to the K80s first.
		classes = slices.Clone(classes)
		slices.SortStableFunc(classes, func(a, b []string) int {
			sa, sb := JobSpeed(job, a[0]), JobSpeed(job, b[0])
			switch {
			case sa > sb:
				return -1
			case sa < sb:
				return 1
			}
			return 0
		})
	}
	var why string
	for _, models := range classes {
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
