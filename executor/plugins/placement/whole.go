package placement

import (
	"fmt"
	"math"
	"slices"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
)

// placeOnNode places a whole-GPU job that fits one node: one NVLink domain
// if any node has one with room, else one node over PCIe; the scorer,
// with the job's preferences (JobSpec.NodePreference), orders nodes of the
// same topology tier.
func (cp *cyclePlacer) placeOnNode(job *cluster.Job, req *Request, c *executor.Capacity, ctx *Context) ([]cluster.Allocation, bool, string) {
	cp.resetMemo()
	size := req.GPUs
	bestNode, bestTier, best, bestScore := -1, 0, math.Inf(-1), 0.0
	for k := size; k <= c.MaxNodeGPUs(); k++ {
		for _, i32 := range c.Bucket(k) {
			i := int(i32)
			if !req.allowsOn(c.Node(i)) {
				continue
			}
			tier := 1
			if cp.hasDomainRoom(c, i, size) {
				tier = 2
			}
			if tier < bestTier {
				continue
			}
			mv := cp.score(cp.fillView(c, i, nil), req, ctx)
			if sc := mv.score - cp.energyCost(job, c, i) + cp.locality(job, c, i) + job.Spec.NodePreference[c.Node(i).Name]; tier > bestTier || sc > best {
				bestNode, bestTier, best, bestScore = i, tier, sc, mv.score
			}
		}
	}
	if bestNode < 0 {
		return nil, false, "no ready node has room for a task (fragmented)"
	}
	n := c.Node(bestNode)
	gpus, inDomain := domainGPUs(c, bestNode, size)
	if !inDomain {
		gpus = wholeFree(c, bestNode, size)
	}
	allocs := make([]cluster.Allocation, len(gpus))
	for k, g := range gpus {
		allocs[k] = cluster.Allocation{GPU: cluster.GPURef{Node: n.Name, Index: g}, Milli: cluster.MilliGPU}
	}
	if cp.quiet {
		return allocs, true, ""
	}
	where := fmt.Sprintf("one node (%s) over PCIe: no node has %d free GPUs in one NVLink domain", n.Name, size)
	if inDomain {
		where = fmt.Sprintf("one NVLink domain (%s on %s)", n.GPUs[gpus[0]].NVLinkDomain, n.Name)
	}
	if size == 1 {
		where = "one GPU on " + n.Name
	}
	return allocs, true, fmt.Sprintf("%s: %s; score %.1f", cp.name, where, bestScore) + cp.energyNote(job, c, bestNode)
}

// hasDomainRoom reports whether some NVLink domain of node i has size
// wholly free GPUs (the domains of each node numbered once per cycle; a
// node without domains, the common case, is not remembered).
func (cp *cyclePlacer) hasDomainRoom(c *executor.Capacity, i, size int) bool {
	var d []int8
	if i < len(cp.domains) {
		d = cp.domains[i]
	}
	if d == nil {
		n := c.Node(i)
		var names []string
		for g := range n.GPUs {
			name := n.GPUs[g].NVLinkDomain
			if name == "" {
				continue
			}
			if d == nil {
				d = make([]int8, len(n.GPUs))
				for k := range d {
					d[k] = -1
				}
			}
			k := slices.Index(names, name)
			if k < 0 {
				k, names = len(names), append(names, name)
			}
			d[g] = int8(min(k, maxGPUsPerNode-1))
		}
		if d == nil {
			return false
		}
		if len(cp.domains) <= i { // sized once: a cycle's capacities number nodes alike
			cp.domains = append(cp.domains, make([][]int8, max(c.Len(), i+1)-len(cp.domains))...)
		}
		cp.domains[i] = d
	}
	var free [maxGPUsPerNode]int
	for g, k := range d {
		if k >= 0 && c.FreeMilli(i, g) == cluster.MilliGPU {
			if free[k]++; free[k] >= size {
				return true
			}
		}
	}
	return false
}

// domainGPUs picks size free GPUs of one NVLink domain of node i, from the
// domain with the fewest free GPUs that has enough (best fit), lowest
// indices first.
func domainGPUs(c *executor.Capacity, i, size int) ([]int, bool) {
	n := c.Node(i)
	var bestDomain string
	bestFree := math.MaxInt
	for g := range n.GPUs {
		d := n.GPUs[g].NVLinkDomain
		if d == "" || (g > 0 && slices.ContainsFunc(n.GPUs[:g], func(x cluster.GPU) bool { return x.NVLinkDomain == d })) {
			continue // no domain, or one counted already
		}
		free := 0
		for h := g; h < len(n.GPUs); h++ {
			if n.GPUs[h].NVLinkDomain == d && c.FreeMilli(i, h) == cluster.MilliGPU {
				free++
			}
		}
		if free >= size && free < bestFree {
			bestDomain, bestFree = d, free
		}
	}
	if bestDomain == "" {
		return nil, false
	}
	var gpus []int
	for g := range n.GPUs {
		if len(gpus) < size && n.GPUs[g].NVLinkDomain == bestDomain && c.FreeMilli(i, g) == cluster.MilliGPU {
			gpus = append(gpus, g)
		}
	}
	return gpus, true
}

// wholeFree lists the first size wholly free GPUs of node i.
func wholeFree(c *executor.Capacity, i, size int) []int {
	var gpus []int
	for g := range c.Node(i).GPUs {
		if len(gpus) < size && c.FreeMilli(i, g) == cluster.MilliGPU {
			gpus = append(gpus, g)
		}
	}
	return gpus
}
