package placement

import (
	"fmt"
	"slices"

	"github.com/prescient-sched/prescient/cluster"
)

// MIGProfile is a GPU instance profile of NVIDIA's Multi-Instance GPU: its
// compute slices (of 7), its size in memory slices (of 8) and the memory
// slices it may start at.
type MIGProfile struct {
	Name          string
	ComputeSlices int
	MemorySlices  int
	MemoryBytes   int64
	Starts        []int
}

// migSlices is the number of memory slices of a MIG-capable A100/H100/H200.
const migSlices = 8

// migGeometry is the placement table NVIDIA documents for the A100 and
// H100 families (the H200 shares it): sizes and valid start slices.
var migGeometry = []struct {
	compute, size int
	memSlices     int // memory slices the profile's memory spans
	starts        []int
}{
	{1, 1, 1, []int{0, 1, 2, 3, 4, 5, 6}}, // 1g.5gb (A100-40GB), 1g.10gb (80GB), 1g.18gb (H200)
	{1, 2, 2, []int{0, 2, 4, 6}},          // 1g.10gb (40GB), 1g.20gb (80GB), 1g.35gb (H200)
	{2, 2, 2, []int{0, 2, 4}},             // 2g.10gb, 2g.20gb, 2g.35gb
	{3, 4, 4, []int{0, 4}},                // 3g.20gb, 3g.40gb, 3g.71gb
	{4, 4, 4, []int{0}},                   // 4g.20gb, 4g.40gb, 4g.71gb
	{7, 8, 8, []int{0}},                   // 7g.40gb, 7g.80gb, 7g.141gb
}

// MIGProfiles lists the profiles of a MIG-capable model, smallest first;
// none for other models. The memory of a slice is the GPU's memory over 8,
// rounded as NVIDIA names the profiles.
func MIGProfiles(model string, gpuMemory int64) []MIGProfile {
	spec, ok := cluster.LookupGPUModel(model)
	if !ok || !spec.MIGCapable {
		return nil
	}
	if gpuMemory <= 0 {
		gpuMemory = spec.MemoryBytes
	}
	slice := gpuMemory / migSlices
	out := make([]MIGProfile, 0, len(migGeometry))
	for _, g := range migGeometry {
		mem := slice * int64(g.memSlices)
		out = append(out, MIGProfile{
			Name:          fmt.Sprintf("%dg.%dgb", g.compute, (mem+(1<<29))>>30),
			ComputeSlices: g.compute, MemorySlices: g.size, MemoryBytes: mem, Starts: g.starts,
		})
	}
	return out
}

// MIGProfileFor is the smallest profile of the model with at least milli
// thousandths of the GPU's compute (ceil(7·milli/1000) compute slices) and
// at least memBytes of memory (0: no memory need).
func MIGProfileFor(model string, gpuMemory int64, milli int, memBytes int64) (MIGProfile, bool) {
	need := (7*milli + cluster.MilliGPU - 1) / cluster.MilliGPU
	for _, p := range MIGProfiles(model, gpuMemory) {
		if p.ComputeSlices >= need && p.MemoryBytes >= memBytes {
			return p, true
		}
	}
	return MIGProfile{}, false
}

// Milli is the share of the GPU's capacity a MIG instance of the profile
// takes in the planner's books: its memory slices over 8.
func (p MIGProfile) Milli() int { return p.MemorySlices * cluster.MilliGPU / migSlices }

// migSizeOf is the size in memory slices of an instance holding milli of
// a MIG GPU (instances the planner made hold a whole number of slices).
func migSizeOf(milli int) int {
	return (milli*migSlices + cluster.MilliGPU - 1) / cluster.MilliGPU
}

// migPlace finds a start slice for a new instance of the profile beside
// existing instances of the given sizes. The planner's books hold shares,
// not slices, so where the existing instances sit is not known: the new
// one is accepted only if it has a valid start under every layout the
// existing ones could have (each at a start its size allows, none
// overlapping), so that it fits whichever is the real one. The start
// returned is the one for the layout with the lowest starts.
func migPlace(existing []int, p MIGProfile) (start int, ok bool) {
	total := p.MemorySlices
	for _, size := range existing {
		total += size
	}
	if total > migSlices {
		return 0, false
	}
	sizes := slices.Clone(existing)
	slices.SortFunc(sizes, func(a, b int) int { return b - a })
	first, layouts := true, 0
	fitsAll := true
	migLayouts(sizes, 0, 0, func(used uint8) bool {
		layouts++
		st, fits := migStart(used, p)
		if !fits {
			fitsAll = false
			return false
		}
		if first {
			start, first = st, false
		}
		return true
	})
	return start, fitsAll && layouts > 0
}

// migLayouts calls visit with the occupied-slice mask of every layout of
// the sizes (at starts their size allows, none overlapping) until visit
// returns false.
func migLayouts(sizes []int, k int, used uint8, visit func(uint8) bool) bool {
	if k == len(sizes) {
		return visit(used)
	}
	for _, st := range permissiveStarts(sizes[k]) {
		mask := uint8((1<<sizes[k])-1) << st
		if used&mask == 0 && !migLayouts(sizes, k+1, used|mask, visit) {
			return false
		}
	}
	return true
}

// migStart is the lowest valid start of the profile in the free slices.
func migStart(used uint8, p MIGProfile) (int, bool) {
	for _, st := range p.Starts {
		if used&(uint8((1<<p.MemorySlices)-1)<<st) == 0 {
			return st, true
		}
	}
	return 0, false
}

// permissiveStarts are the starts any profile of a size may take.
func permissiveStarts(size int) []int {
	var out []int
	for _, g := range migGeometry {
		if g.size == size {
			for _, st := range g.starts {
				if !slices.Contains(out, st) {
					out = append(out, st)
				}
			}
		}
	}
	return out
}
