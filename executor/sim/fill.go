package sim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor/plugins/placement"
)

// FillConfig is one fill experiment, the FGD paper's protocol: pods drawn
// from a pod list arrive one by one, never leave, and are placed as they
// come until the GPU demand that has arrived is Tune times the fleet's GPU
// capacity.
type FillConfig struct {
	Fleet *cluster.Fleet
	// Pods is the pod list; only each job's Spec is read. The typical
	// request distribution of the fragmentation-aware placements is
	// computed from it.
	Pods      []cluster.Job
	Placement string
	// Tune is the arrived GPU demand, as a multiple of capacity, at which
	// arrivals stop (FGD's -tune; 1.3 in its experiments).
	Tune float64
	// Seed drives the order of the pods, the draws once the list is used
	// up, and tie-breaking.
	Seed uint64
	// Progress, when set, is called now and then with the arrived demand
	// and the target, in milli-GPUs.
	Progress func(done, total int)
}

// DefaultTune is the FGD experiments' arrival target: 130% of capacity.
const DefaultTune = 1.3

// CurvePoint is the allocation after a share of the target demand arrived.
type CurvePoint struct {
	ArrivedPct float64 `json:"arrived_pct"`
	AllocPct   float64 `json:"alloc_pct"`
}

// FillResult is the outcome of a fill experiment.
type FillResult struct {
	Experiment string  `json:"experiment"`
	Placement  string  `json:"placement"`
	Seed       uint64  `json:"seed"`
	Tune       float64 `json:"tune"`
	Nodes      int     `json:"nodes"`
	GPUs       int     `json:"gpus"`
	// Pods counts the pods that arrived, PlacedPods those placed.
	Pods       int `json:"pods"`
	PlacedPods int `json:"placed_pods"`
	FailedPods int `json:"failed_pods"`
	// ArrivedPct is the arrived GPU demand over capacity, in percent.
	ArrivedPct float64 `json:"arrived_pct"`
	// GPUAllocPct is the allocated milli-GPU share over the capacity.
	GPUAllocPct float64 `json:"gpu_alloc_pct"`
	// GPUWholeAllocPct is the share of GPUs wholly allocated (1000 of 1000
	// milli-GPUs); GPUOccupiedPct that of GPUs with any allocation (the FGD
	// simulator's "Gpu" line).
	GPUWholeAllocPct float64 `json:"gpu_whole_alloc_pct"`
	GPUOccupiedPct   float64 `json:"gpu_occupied_pct"`
	// UnallocatedGPUs is the capacity left unallocated, in GPUs (milli-GPUs
	// / 1000), when arrivals stop.
	UnallocatedGPUs float64 `json:"unallocated_gpus"`
	// FailedGPUs is the GPU demand of the pods that could not be placed.
	FailedGPUs float64      `json:"failed_gpus"`
	AllocCurve []CurvePoint `json:"alloc_curve"`
	// TypicalClasses counts the request classes of the typical
	// distribution (0 for placements that do not use one).
	TypicalClasses int     `json:"typical_classes"`
	SimWallS       float64 `json:"sim_wall_s"`
}

// Validate checks the configuration.
func (c *FillConfig) Validate() error {
	var errs []error
	if c.Fleet == nil || len(c.Fleet.Nodes) == 0 {
		errs = append(errs, errors.New("fill: no fleet"))
	}
	if len(c.Pods) == 0 {
		errs = append(errs, errors.New("fill: the pod list is empty"))
	}
	if !(c.Tune > 0 && c.Tune <= 100) {
		errs = append(errs, fmt.Errorf("fill: tune %g is outside (0, 100]", c.Tune))
	}
	if _, err := placement.New(c.Placement); err != nil {
		errs = append(errs, fmt.Errorf("fill: %w", err))
	}
	return errors.Join(errs...)
}

// Fill runs the fill experiment:
//
//  1. sort the pod list by ID and shuffle it with the seed (FGD shuffles
//     the name-sorted list);
//  2. learn the typical request distribution from the list;
//  3. take pods in that order, then drawn with replacement, stopping before
//     the first whose GPU demand would take the arrived demand past Tune ×
//     capacity;
//  4. place each as it arrives (filter, score, best node, ties at random);
//     a pod that fits nowhere fails and is not retried.
func Fill(ctx context.Context, cfg FillConfig) (*FillResult, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	start := time.Now()
	rng := rand.New(rand.NewPCG(cfg.Seed, 0xf111))
	reqs := fillRequests(cfg.Pods, rng)
	scorer, _ := placement.New(cfg.Placement)
	pctx := &placement.Context{Rand: rng}
	res := &FillResult{Experiment: "fill", Placement: cfg.Placement, Seed: cfg.Seed, Tune: cfg.Tune}
	if placement.NeedsTypical(cfg.Placement) {
		t, err := placement.NewTypical(reqs, placement.DefaultPopularity)
		if err != nil {
			return nil, fmt.Errorf("fill: %w", err)
		}
		pctx.Typical, res.TypicalClasses = t, len(t.Classes)
	}
	nodes := fillNodes(cfg.Fleet)
	rng.Shuffle(len(nodes), func(i, j int) { nodes[i], nodes[j] = nodes[j], nodes[i] })
	capacity := 0
	for _, n := range nodes {
		capacity += len(n.MilliLeft) * cluster.MilliGPU
	}
	if capacity == 0 {
		return nil, errors.New("fill: the fleet has no GPUs on ready nodes")
	}
	res.Nodes, res.GPUs = len(nodes), capacity/cluster.MilliGPU
	f := filler{cfg: &cfg, res: res, nodes: nodes, capacity: capacity, target: int(cfg.Tune * float64(capacity)), nextPct: 1}
	res.AllocCurve = append(res.AllocCurve, CurvePoint{})
	if err := f.run(ctx, reqs, scorer, pctx, rng); err != nil {
		return nil, err
	}
	f.finish()
	res.SimWallS = time.Since(start).Seconds()
	return res, nil
}

// fillRequests turns the pod list into requests, sorted by pod ID and
// shuffled.
func fillRequests(pods []cluster.Job, rng *rand.Rand) []placement.Request {
	order := make([]int, len(pods))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(pods[a].ID, pods[b].ID) })
	rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	reqs := make([]placement.Request, len(order))
	for k, i := range order {
		reqs[k] = placement.RequestOf(&pods[i].Spec)
	}
	return reqs
}

// fillNodes is the free state of the fleet's ready nodes.
func fillNodes(f *cluster.Fleet) []*placement.Node {
	var nodes []*placement.Node
	for i := range f.Nodes {
		if n := &f.Nodes[i]; n.State == "" || n.State == cluster.NodeReady {
			nodes = append(nodes, placement.NewNode(i, n))
		}
	}
	return nodes
}

type filler struct {
	cfg      *FillConfig
	res      *FillResult
	nodes    []*placement.Node
	capacity int // milli-GPUs
	target   int // arrived demand at which arrivals stop, milli-GPUs
	arrived  int
	alloc    int
	failed   int
	nextPct  int // next whole arrived percentage to record on the curve
}

// run draws and places pods until the target demand has arrived.
func (f *filler) run(ctx context.Context, reqs []placement.Request, sc placement.Scorer, pctx *placement.Context, rng *rand.Rand) error {
	if !anyGPUDemand(reqs) {
		return errors.New("fill: no pod in the list asks for a GPU, so the demand never reaches the target")
	}
	var scratch placement.Scratch
	for k := 0; ; k++ {
		if k%256 == 0 {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("fill: %w", err)
			}
			if f.cfg.Progress != nil {
				f.cfg.Progress(f.arrived, f.target)
			}
		}
		r := &reqs[k%len(reqs)]
		if k >= len(reqs) {
			r = &reqs[rng.IntN(len(reqs))]
		}
		if f.arrived+r.TotalMilli() > f.target {
			return nil
		}
		f.arrived += r.TotalMilli()
		f.res.Pods++
		if c, ok := placement.Place(f.nodes, r, sc, pctx, &scratch); ok {
			f.nodes[c.Node].Take(r, c.GPUs)
			f.alloc += r.TotalMilli()
			f.res.PlacedPods++
		} else {
			f.res.FailedPods++
			f.failed += r.TotalMilli()
		}
		f.record()
	}
}

func anyGPUDemand(reqs []placement.Request) bool {
	for i := range reqs {
		if reqs[i].TotalMilli() > 0 {
			return true
		}
	}
	return false
}

// record adds a curve point each time the arrived demand passes a whole
// percent of capacity.
func (f *filler) record() {
	for f.arrived*100 >= f.nextPct*f.capacity {
		f.res.AllocCurve = append(f.res.AllocCurve, CurvePoint{ArrivedPct: float64(f.nextPct), AllocPct: pct(f.alloc, f.capacity)})
		f.nextPct++
	}
}

// finish computes the final figures.
func (f *filler) finish() {
	r := f.res
	r.ArrivedPct = pct(f.arrived, f.capacity)
	r.GPUAllocPct = pct(f.alloc, f.capacity)
	r.UnallocatedGPUs = float64(f.capacity-f.alloc) / cluster.MilliGPU
	r.FailedGPUs = float64(f.failed) / cluster.MilliGPU
	whole, occupied, gpus := 0, 0, 0
	for _, n := range f.nodes {
		for _, m := range n.MilliLeft {
			gpus++
			if m == 0 {
				whole++
			}
			if m < cluster.MilliGPU {
				occupied++
			}
		}
	}
	r.GPUWholeAllocPct, r.GPUOccupiedPct = pct(whole, gpus), pct(occupied, gpus)
	if last := len(r.AllocCurve) - 1; last < 0 || r.AllocCurve[last].ArrivedPct != r.ArrivedPct {
		r.AllocCurve = append(r.AllocCurve, CurvePoint{ArrivedPct: r.ArrivedPct, AllocPct: r.GPUAllocPct})
	}
}

func pct(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return 100 * float64(a) / float64(b)
}
