package placement

import (
	"math"

	"github.com/prescient-sched/prescient/cluster"
)

// The FGD simulator's constants: kube-scheduler's score range and the
// largest node it normalises by (MaxSpecCpu, MaxSpecGpu).
const (
	maxNodeScore = 100
	maxSpecCPU   = 128000
	maxSpecGPU   = 8000
)

// The placement names.
const (
	BestFitName       = "best-fit"
	DotProductName    = "dot-product"
	GPUPackingName    = "gpu-packing"
	GPUClusteringName = "gpu-clustering"
	RandomName        = "random"
	FGDName           = "fgd"
	SpreadName        = "spread"
	PrescientName     = "prescient"
)

// bestFit scores 100·(1 − ½·(CPU left after)/128000 − ½·(GPU left
// after)/8000), truncated, then rescaled to 0..100 over the feasible nodes
// (best_fit_score.go); the GPU is the best-fitting one.
type bestFit struct{}

func (bestFit) Name() string { return BestFitName }

func (bestFit) Score(n *Node, r *Request, _ *Context, buf []int) (float64, []int) {
	cpu := float64(cpuLeft(n)-r.CPUMilli) / maxSpecCPU * 0.5
	gpu := float64(n.MilliLeftTotal()-r.TotalMilli()) / maxSpecGPU * 0.5
	return math.Trunc((1 - (cpu + gpu)) * maxNodeScore), gpusBestFit(n, r, buf)
}

// Normalize is kube-scheduler's min-max rescaling to 0..100 in integers.
func (bestFit) Normalize(s []float64) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range s {
		lo, hi = min(lo, v), max(hi, v)
	}
	for i, v := range s {
		if hi == lo {
			s[i] = 0
			continue
		}
		s[i] = math.Floor((v - lo) * maxNodeScore / (hi - lo))
	}
}

// dotProduct is Tetris's alignment score with the merged GPU dimension and
// max normalisation (dot_product_score.go, "merge", "max"): the dot
// product of the free (CPU, GPU) vector and the request, each divided by
// (128000, 8000), halved; the score is 100·(1 − that), truncated.
type dotProduct struct{}

func (dotProduct) Name() string { return DotProductName }

func (dotProduct) Score(n *Node, r *Request, _ *Context, buf []int) (float64, []int) {
	dot := float64(cpuLeft(n))/maxSpecCPU*float64(r.CPUMilli)/maxSpecCPU +
		float64(n.MilliLeftTotal())/maxSpecGPU*float64(r.TotalMilli())/maxSpecGPU
	return math.Trunc((1 - dot/2) * maxNodeScore), gpusBestFit(n, r, buf)
}

// gpuPacking prefers, in order: a share of a GPU already in use (less free
// share is better), free GPUs of a node already in use (fewer is better),
// a wholly free node (gpu_packing_score.go, with its caps).
type gpuPacking struct{}

func (gpuPacking) Name() string { return GPUPackingName }

func (gpuPacking) Score(n *Node, r *Request, _ *Context, buf []int) (float64, []int) {
	gpus := gpusBestFit(n, r, buf)
	if r.Milli <= 0 {
		return 0, gpus
	}
	free := n.WholeFree()
	if free == len(n.MilliLeft) {
		return float64(max(maxNodeScore/3-free, free)), gpus
	}
	// The simulator takes the least-free GPUs that fit, smallest first.
	used, freeUsed, ratio := 0, 0, 0
	for _, g := range sortedByLeft(n.MilliLeft) {
		if used == r.GPUs {
			break
		}
		if m := n.MilliLeft[g]; r.Milli <= m {
			used++
			ratio += m * 100 / cluster.MilliGPU
			if m == cluster.MilliGPU {
				freeUsed++
			}
		}
	}
	if freeUsed > 0 {
		return float64(max(maxNodeScore/2-freeUsed, maxNodeScore/3)), gpus
	}
	return float64(max(maxNodeScore-ratio/10, maxNodeScore/2)), gpus
}

// sortedByLeft lists GPU indices by free share, ascending, stable.
func sortedByLeft(left []int) []int {
	idx := make([]int, len(left))
	for i := range idx {
		idx[i] = i
	}
	for i := 1; i < len(idx); i++ { // insertion sort: at most a few dozen GPUs
		for j := i; j > 0 && left[idx[j]] < left[idx[j-1]]; j-- {
			idx[j], idx[j-1] = idx[j-1], idx[j]
		}
	}
	return idx
}

// gpuClustering prefers nodes that run only requests of the same kind
// (share, 1 GPU, 2 GPUs, ...), then nodes that run it among others, then
// idle nodes, then nodes running other kinds; within each quarter of the
// score range, nodes with less GPU share free (gpu_clustering_score.go).
type gpuClustering struct{}

func (gpuClustering) Name() string { return GPUClusteringName }

func (gpuClustering) Score(n *Node, r *Request, _ *Context, buf []int) (float64, []int) {
	gpus := gpusBestFit(n, r, buf)
	k := r.affinity()
	if k < 0 {
		return 0, gpus
	}
	fill := maxNodeScore / 4 * (maxSpecGPU - n.MilliLeftTotal()) / maxSpecGPU
	switch {
	case n.affinity[k] > 0 && n.kinds == 1:
		return float64(fill + maxNodeScore*3/4), gpus
	case n.affinity[k] > 0:
		return float64(fill + maxNodeScore*2/4), gpus
	case n.kinds == 0:
		return float64(fill + maxNodeScore/4), gpus
	}
	return float64(fill), gpus
}

// random scores each node with a uniform random number, which picks a
// random feasible node, and takes a random fitting GPU for a share.
type random struct{}

func (random) Name() string { return RandomName }

func (random) Score(n *Node, r *Request, ctx *Context, buf []int) (float64, []int) {
	if ctx.Rand == nil {
		return 0, gpusBestFit(n, r, buf)
	}
	score := ctx.Rand.Float64() // FGD's PreScore: one node drawn uniformly scores high
	if !r.Share() {
		return score, gpusBestFit(n, r, buf)
	}
	pick, seen := -1, 0
	for g, m := range n.MilliLeft {
		if m >= r.Milli {
			if seen++; ctx.Rand.IntN(seen) == 0 {
				pick = g
			}
		}
	}
	return score, append(buf[:0], pick)
}

// spread is the energy-blind least-loaded placement: the node with the most
// GPU share free after placement (ties: the most CPU free), and within it
// the GPU with the most share free.
type spread struct{}

func (spread) Name() string { return SpreadName }

func (spread) Score(n *Node, r *Request, _ *Context, buf []int) (float64, []int) {
	var gpus []int
	switch {
	case r.GPUs == 0 || r.Milli == 0:
		gpus = buf[:0]
	case r.Share():
		best := -1
		for g, m := range n.MilliLeft {
			if m >= r.Milli && (best < 0 || m > n.MilliLeft[best]) {
				best = g
			}
		}
		gpus = append(buf[:0], best)
	default:
		gpus = wholeGPUs(n.MilliLeft, r.GPUs, buf)
	}
	left := float64(n.MilliLeftTotal()-r.TotalMilli()) / maxSpecGPU
	cpu := 0.0
	if n.CPUMilliCap != Unlimited && n.CPUMilliCap > 0 {
		cpu = float64(n.CPUMilliLeft-r.CPUMilli) / float64(n.CPUMilliCap)
	}
	return left + cpu*1e-3, gpus
}

// cpuLeft is the node's free CPU for the scores that weigh it; a node whose
// CPU is not tracked counts as if the request took none of it.
func cpuLeft(n *Node) int64 {
	if n.CPUMilliCap == Unlimited {
		return 0
	}
	return n.CPUMilliLeft
}
