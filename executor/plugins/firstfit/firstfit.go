package firstfit

import (
	"fmt"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
)

// Name is the placement's name.
const Name = "first-fit"

// FirstFit is the placer.
type FirstFit struct{}

var _ executor.Placer = (*FirstFit)(nil)

// New returns the placer.
func New() *FirstFit { return &FirstFit{} }

// Name implements executor.Placer.
func (*FirstFit) Name() string { return Name }

// Place implements executor.Placer.
func (*FirstFit) Place(job *cluster.Job, c *executor.Capacity) ([]cluster.Allocation, bool, string) {
	spec := &job.Spec
	switch {
	case spec.GPUs == 0:
		return nil, true, "needs no GPU"
	case spec.Fractional():
		return placeShare(spec, c)
	}
	// Failure reasons are constant strings: a planning cycle may try
	// thousands of placements that fail, and formatting them would cost
	// more than the search.
	if c.FreeGPUs() < spec.GPUs {
		return nil, false, "not enough GPUs free"
	}
	var buf, nodeBuf [8]int // most jobs are a few tasks: a failed try allocates nothing
	tasks, ok := spec.AppendTasks(buf[:0], c.MaxNodeGPUs())
	if !ok {
		return nil, false, "gang cannot be split evenly onto nodes"
	}
	// Choose each task's node, then take the GPUs: Place does not change
	// c, so the second pass sees what the first did.
	var took taken
	var cur cursor
	nodes := nodeBuf[:0]
	for _, size := range tasks {
		i, ok := leastLoaded(spec, c, size, took, &cur)
		if !ok {
			return nil, false, "no ready node has room for a task (fragmented)"
		}
		nodes = append(nodes, i)
		took.add(i, size)
	}
	took = taken{}
	allocs := make([]cluster.Allocation, 0, spec.GPUs)
	for k, size := range tasks {
		allocs = takeWhole(c, nodes[k], size, took.of(nodes[k]), allocs)
		took.add(nodes[k], size)
	}
	if len(tasks) == 1 { // most jobs: no formatting
		return allocs, true, "first fit on the least-loaded node, one task"
	}
	return allocs, true, fmt.Sprintf("first fit on the least-loaded nodes, %d tasks", len(tasks))
}

// leastLoaded finds the ready node with the most free GPUs, at least size
// beyond what this job took already, that the job's GPU models allow and
// that has room for another of its tasks (JobSpec.TasksApart,
// TasksPerNode); with node preferences (JobSpec.NodePreference), the most
// preferred such node, the least loaded among equals.
//
// A job's tasks come largest first, and a node's room for the job only
// shrinks as its tasks are placed, so a node passed over for one task is
// passed over for the next of the same size: without preferences, cur
// resumes the scan where the last task of that size was placed (a job of
// thousands of whole-node tasks would otherwise scan quadratically).
func leastLoaded(spec *cluster.JobSpec, c *executor.Capacity, size int, t taken, cur *cursor) (int, bool) {
	best, bestPrefer := -1, 0.0
	top, from := c.MaxNodeGPUs(), 0
	if spec.NodePreference == nil && cur.size == size && cur.valid {
		top, from = cur.k, cur.pos
	}
	for k := top; k >= size; k-- {
		bucket := c.Bucket(k)
		if k != top {
			from = 0
		}
		for p := from; p < len(bucket); p++ {
			n := int(bucket[p])
			if k-t.of(n) < size || !allows(spec, c.Node(n)) || t.tasksOn(n) >= spec.TaskRoom(c.Node(n).Name) {
				continue
			}
			if spec.NodePreference == nil {
				*cur = cursor{valid: true, size: size, k: k, pos: p}
				return n, true
			}
			if p := spec.NodePreference[c.Node(n).Name]; best < 0 || p > bestPrefer {
				best, bestPrefer = n, p
			}
		}
	}
	return best, best >= 0
}

// cursor is where leastLoaded placed a job's last task: its size, bucket
// and position in the bucket.
type cursor struct {
	valid        bool
	size, k, pos int
}

func allows(spec *cluster.JobSpec, n *cluster.Node) bool {
	return len(n.GPUs) > 0 && spec.AllowsModel(n.GPUs[0].Model) && spec.AllowsNode(n.Name)
}

// takeWhole appends size wholly free GPUs of node i, skipping the first skip
// of them (already taken by this job).
func takeWhole(c *executor.Capacity, i, size, skip int, allocs []cluster.Allocation) []cluster.Allocation {
	n := c.Node(i)
	for g := range n.GPUs {
		if size == 0 {
			break
		}
		if c.FreeMilli(i, g) != cluster.MilliGPU {
			continue
		}
		if skip > 0 {
			skip--
			continue
		}
		allocs = append(allocs, cluster.Allocation{GPU: cluster.GPURef{Node: n.Name, Index: g}, Milli: cluster.MilliGPU})
		size--
	}
	return allocs
}

// placeShare puts a fractional job on a GPU already shared if one has room,
// else on a free GPU of the least-loaded node; with node preferences
// (JobSpec.NodePreference), on the most preferred node that has either,
// a shared GPU first.
func placeShare(spec *cluster.JobSpec, c *executor.Capacity) ([]cluster.Allocation, bool, string) {
	var whole, shared cluster.Allocation
	foundWhole, foundShared := false, false
	wholePrefer, sharedPrefer := 0.0, 0.0
	for k := c.MaxNodeGPUs(); k >= 0; k-- {
		for _, i := range c.Bucket(k) {
			n := c.Node(int(i))
			if !allows(spec, n) {
				continue
			}
			p := spec.NodePreference[n.Name]
			for g := range n.GPUs {
				f := c.FreeMilli(int(i), g)
				a := cluster.Allocation{GPU: cluster.GPURef{Node: n.Name, Index: g}, Milli: spec.GPUMilli}
				if f >= spec.GPUMilli && f < cluster.MilliGPU && (!foundShared || p > sharedPrefer) {
					if spec.NodePreference == nil {
						return []cluster.Allocation{a}, true, "shares a GPU already in use"
					}
					shared, foundShared, sharedPrefer = a, true, p
				}
				if f == cluster.MilliGPU && (!foundWhole || p > wholePrefer) {
					whole, foundWhole, wholePrefer = a, true, p
				}
			}
		}
	}
	switch {
	case foundShared && (!foundWhole || sharedPrefer >= wholePrefer):
		return []cluster.Allocation{shared}, true, "shares a GPU already in use"
	case foundWhole:
		return []cluster.Allocation{whole}, true, "share of a free GPU on the least-loaded node"
	}
	return nil, false, "no GPU has the share free"
}

// taken counts the GPUs and tasks a job took so far per node. Most jobs
// span few nodes, and a list beats a map; a job of thousands of tasks (an
// HPC job across a machine) indexes its list, or each task's search would
// scan it and placing the job would take cubic time.
type taken struct {
	on  []nodeTaken
	idx map[int]int // node to its index in on, once on is longer than takenList
}

type nodeTaken struct{ node, gpus, tasks int }

// takenList is the longest list taken searches without an index.
const takenList = 16

func (t *taken) find(node int) int {
	if t.idx != nil {
		if k, ok := t.idx[node]; ok {
			return k
		}
		return -1
	}
	for k := range t.on {
		if t.on[k].node == node {
			return k
		}
	}
	return -1
}

func (t *taken) of(node int) int {
	if k := t.find(node); k >= 0 {
		return t.on[k].gpus
	}
	return 0
}

// tasksOn is how many of the job's tasks node took so far.
func (t *taken) tasksOn(node int) int {
	if k := t.find(node); k >= 0 {
		return t.on[k].tasks
	}
	return 0
}

// add records a task of gpus GPUs on node.
func (t *taken) add(node, gpus int) {
	if k := t.find(node); k >= 0 {
		t.on[k].gpus += gpus
		t.on[k].tasks++
		return
	}
	t.on = append(t.on, nodeTaken{node: node, gpus: gpus, tasks: 1})
	switch {
	case t.idx != nil:
		t.idx[node] = len(t.on) - 1
	case len(t.on) > takenList:
		t.idx = make(map[int]int, 2*len(t.on))
		for k, x := range t.on {
			t.idx[x.node] = k
		}
	}
}
