package placement

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
)

// placeTasks places a job of several per-node tasks (a gang, or a job
// larger than a node): within one network leaf when a leaf has room for
// every task, the leaf with the fewest wholly free GPUs among those
// (packing leaves, keeping the emptiest whole); across leaves only when no
// leaf has room. Within the chosen set each task, largest first, takes the
// node with the fewest wholly free GPUs that still fits it (best fit), on
// that node's GPUs of one NVLink domain when it has one with room. With
// data locality (the prescient placement) a task prefers a node holding a
// warm copy of the job's dataset, then one in a warm rack, before best
// fit, and among the leaves with room the one whose tasks land warm most
// comes first. A job whose tasks must be apart (JobSpec.TasksApart) takes
// one node per task, and a node takes no more of its tasks than it has
// room for (JobSpec.TasksPerNode).
func (cp *cyclePlacer) placeTasks(job *cluster.Job, tasks []int, c *executor.Capacity) ([]cluster.Allocation, bool, string) {
	sorted := slices.Clone(tasks)
	slices.SortFunc(sorted, func(a, b int) int { return cmp.Compare(b, a) })
	req := RequestOf(&job.Spec)
	leaves := map[string][]int{}
	var order []string
	for k := sorted[len(sorted)-1]; k <= c.MaxNodeGPUs(); k++ {
		for _, i32 := range c.Bucket(k) {
			i := int(i32)
			n := c.Node(i)
			if !req.allowsOn(n) {
				continue
			}
			leaf := n.Topology.Leaf
			if _, seen := leaves[leaf]; !seen {
				order = append(order, leaf)
			}
			leaves[leaf] = append(leaves[leaf], i)
		}
	}
	slices.Sort(order)
	warm := func(i int) int { return cp.warmth(job, c, i) }
	prefer := func(i int) float64 { return job.Spec.NodePreference[c.Node(i).Name] }
	room := func(i int) int { return job.Spec.TaskRoom(c.Node(i).Name) }
	bestLeaf, bestFree, bestWarm := "", -1, 0
	var bestPick []int
	for _, leaf := range order {
		pick, ok := assignTasks(c, sorted, leaves[leaf], warm, prefer, room)
		if !ok {
			continue
		}
		free, w := 0, 0
		for _, i := range leaves[leaf] {
			free += c.WholeFree(i)
		}
		for _, i := range pick {
			w += warm(i)
		}
		if bestFree < 0 || w > bestWarm || w == bestWarm && free < bestFree {
			bestLeaf, bestFree, bestWarm, bestPick = leaf, free, w, pick
		}
	}
	where := ""
	if bestFree >= 0 && !cp.quiet {
		where = fmt.Sprintf("%d tasks within leaf %q", len(tasks), bestLeaf)
	}
	if bestFree < 0 {
		var all []int
		for _, leaf := range order {
			all = append(all, leaves[leaf]...)
		}
		pick, ok := assignTasks(c, sorted, all, warm, prefer, room)
		if !ok {
			return nil, false, "no set of ready nodes has room for every task"
		}
		bestPick = pick
		if !cp.quiet {
			where = fmt.Sprintf("%d tasks across leaves %s: no leaf has room for all", len(tasks), leavesOf(c, pick))
		}
	}
	allocs := make([]cluster.Allocation, 0, job.Spec.GPUs)
	for t, i := range bestPick {
		n := c.Node(i)
		for _, g := range pickGPUs(c, i, sorted[t], allocs) {
			allocs = append(allocs, cluster.Allocation{GPU: cluster.GPURef{Node: n.Name, Index: g}, Milli: cluster.MilliGPU})
		}
	}
	slices.SortFunc(allocs, func(a, b cluster.Allocation) int {
		if d := cmp.Compare(a.GPU.Node, b.GPU.Node); d != 0 {
			return d
		}
		return cmp.Compare(a.GPU.Index, b.GPU.Index)
	})
	if cp.quiet {
		return allocs, true, ""
	}
	return allocs, true, fmt.Sprintf("%s: %s", cp.name, where)
}

// assignTasks gives each task (largest first) the node among nodes that
// still fits it with the most warmth (warm says how warm node i is for the
// job's data: 2 a copy on it, 1 in its rack, 0 none), then the job's
// preference (prefer), then the fewest wholly free GPUs left; node i
// takes at most room(i) tasks. It returns the node of each task.
func assignTasks(c *executor.Capacity, tasks, nodes []int, warm func(i int) int, prefer func(i int) float64, room func(i int) int) ([]int, bool) {
	pick := make([]int, len(tasks))
	used := map[int]int{}  // GPUs taken, by node
	taken := map[int]int{} // tasks, by node
	for t, size := range tasks {
		best, bestWarm, bestPrefer := -1, 0, 0.0
		for _, i := range nodes {
			free := c.WholeFree(i) - used[i]
			if free < size || taken[i] >= room(i) {
				continue
			}
			w, p := warm(i), prefer(i)
			if best < 0 || w > bestWarm || w == bestWarm && (p > bestPrefer || p == bestPrefer && free < c.WholeFree(best)-used[best]) {
				best, bestWarm, bestPrefer = i, w, p
			}
		}
		if best < 0 {
			return nil, false
		}
		pick[t] = best
		used[best] += size
		taken[best]++
	}
	return pick, true
}

// pickGPUs chooses size wholly free GPUs of node i not among taken (the
// job's allocations so far): all in one NVLink domain when one has room
// (the fullest such domain), else the lowest-numbered.
func pickGPUs(c *executor.Capacity, i, size int, taken []cluster.Allocation) []int {
	n := c.Node(i)
	free := func(g int) bool {
		return c.FreeMilli(i, g) == cluster.MilliGPU && !slices.ContainsFunc(taken, func(a cluster.Allocation) bool {
			return a.GPU.Index == g && a.GPU.Node == n.Name
		})
	}
	domains := map[string][]int{}
	var any []int
	for g := range n.GPUs {
		if !free(g) {
			continue
		}
		any = append(any, g)
		if d := n.GPUs[g].NVLinkDomain; d != "" {
			domains[d] = append(domains[d], g)
		}
	}
	var best []int
	for _, gs := range domains {
		if len(gs) >= size && (best == nil || len(gs) < len(best) || len(gs) == len(best) && gs[0] < best[0]) {
			best = gs
		}
	}
	if best != nil {
		return best[:size]
	}
	return any[:size]
}

func leavesOf(c *executor.Capacity, pick []int) string {
	var ls []string
	for _, i := range pick {
		if l := c.Node(i).Topology.Leaf; !slices.Contains(ls, l) {
			ls = append(ls, l)
		}
	}
	slices.Sort(ls)
	return strings.Join(ls, ",")
}
