package executor

import (
	"fmt"

	"github.com/prescient-sched/prescient/cluster"
)

// Capacity is an index of free GPU shares by node, kept incrementally: nodes
// are bucketed by their number of wholly free GPUs, so the least-loaded node
// with room for k GPUs is found without scanning the fleet. It mirrors a
// cluster.Snapshot (which enforces capacity) and is cheap to clone, which is
// how the planner tries placements without touching its input.
type Capacity struct {
	nodes   []cluster.Node // shared, read-only
	index   map[string]int // shared, read-only
	first   []int          // node i's GPUs are milli[first[i]:first[i+1]]
	milli   []int16        // free milli-GPUs per GPU
	whole   []int16        // wholly free GPUs per node
	ready   []bool
	buckets [][]int32 // buckets[k]: ready nodes with k whole GPUs free
	pos     []int32   // position of node i in its bucket
	free    int       // wholly free GPUs on ready nodes
	maxNode int       // most GPUs on one node
	grown   uint64    // counts the calls that may have added free capacity
	// The arrays a clone's slices are windows of (CloneInto reuses them).
	i16 []int16
	i32 []int32
}

// NewCapacity indexes the free GPUs of a snapshot.
func NewCapacity(s *cluster.Snapshot) *Capacity {
	c := &Capacity{nodes: s.Nodes, index: make(map[string]int, len(s.Nodes))}
	c.first = make([]int, len(s.Nodes)+1)
	for i := range s.Nodes {
		c.index[s.Nodes[i].Name] = i
		c.first[i+1] = c.first[i] + len(s.Nodes[i].GPUs)
		c.maxNode = max(c.maxNode, len(s.Nodes[i].GPUs))
	}
	c.milli = make([]int16, c.first[len(s.Nodes)])
	c.whole = make([]int16, len(s.Nodes))
	c.ready = make([]bool, len(s.Nodes))
	c.pos = make([]int32, len(s.Nodes))
	c.buckets = make([][]int32, c.maxNode+1)
	for i := range s.Nodes {
		for g := c.first[i]; g < c.first[i+1]; g++ {
			c.milli[g] = cluster.MilliGPU
		}
		c.whole[i] = int16(len(s.Nodes[i].GPUs))
	}
	for g, used := range s.Used() { // the allocated GPUs only: a fleet mostly free indexes fast
		i := c.index[g.Node]
		c.milli[c.first[i]+g.Index] -= int16(used)
		c.whole[i]--
	}
	for i := range s.Nodes {
		c.pos[i] = -1
		if n := &s.Nodes[i]; n.State == "" || n.State == cluster.NodeReady {
			c.setReady(i, true)
		}
	}
	return c
}

// bucketSlack is the room Clone leaves in each bucket, so that nodes
// moving between buckets seldom grow one.
const bucketSlack = 4

// Clone returns an independent copy. A planning cycle clones a capacity
// several times (its free, pending and fenced views, reservations'
// scratch), so the copy takes one allocation per element type: the slices
// are windows of one array, each capped at its end so that growing one
// (a bucket's append) moves it out instead of writing over the next.
func (c *Capacity) Clone() *Capacity { return c.CloneInto(nil) }

// CloneInto is Clone into d, reusing d's arrays where they are large
// enough (d's contents are lost); with d nil it allocates a new one.
func (c *Capacity) CloneInto(d *Capacity) *Capacity {
	if d == nil {
		d = new(Capacity)
	}
	i16, i32, ready, buckets := d.i16, d.i32, d.ready, d.buckets
	*d = *c
	d.i16 = sized(i16, len(c.milli)+len(c.whole))
	d.milli = window(d.i16, 0, c.milli, 0)
	d.whole = window(d.i16, len(c.milli), c.whole, 0)
	d.ready = append(ready[:0], c.ready...)
	n32 := len(c.pos)
	for _, b := range c.buckets {
		n32 += len(b) + bucketSlack
	}
	d.i32 = sized(i32, n32)
	d.pos = window(d.i32, 0, c.pos, 0)
	at := len(c.pos)
	d.buckets = sized(buckets, len(c.buckets))
	for k, b := range c.buckets {
		d.buckets[k] = window(d.i32, at, b, bucketSlack)
		at += len(b) + bucketSlack
	}
	return d
}

// sized is s with length n, reusing its array when it is large enough.
func sized[T any](s []T, n int) []T {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]T, n)
}

// window copies src into arena at off and returns it as a slice there
// with room for slack more elements.
func window[T any](arena []T, off int, src []T, slack int) []T {
	end := off + len(src)
	copy(arena[off:end], src)
	return arena[off:end:min(end+slack, len(arena))]
}

// FreeGPUs is the number of wholly free GPUs on ready nodes.
func (c *Capacity) FreeGPUs() int { return c.free }

// MaxNodeGPUs is the most GPUs any node has.
func (c *Capacity) MaxNodeGPUs() int { return c.maxNode }

// Len is the number of nodes.
func (c *Capacity) Len() int { return len(c.nodes) }

// Node returns node i of the snapshot.
func (c *Capacity) Node(i int) *cluster.Node { return &c.nodes[i] }

// NodeIndex returns the index of the named node.
func (c *Capacity) NodeIndex(name string) (int, bool) {
	i, ok := c.index[name]
	return i, ok
}

// NodeIndexHint is NodeIndex for a name whose place is probably hint (an
// entry of RunningJob.Nodes): checked against the node's name, which costs
// little where the strings are one (the caller's allocations name nodes
// with the snapshot's strings), else looked up.
func (c *Capacity) NodeIndexHint(hint int32, name string) (int, bool) {
	if i := int(hint); i >= 0 && i < len(c.nodes) && c.nodes[i].Name == name {
		return i, true
	}
	return c.NodeIndex(name)
}

// Ready reports whether node i takes work.
func (c *Capacity) Ready(i int) bool { return c.ready[i] }

// WholeFree is the number of wholly free GPUs on node i.
func (c *Capacity) WholeFree(i int) int { return int(c.whole[i]) }

// FreeMilli is the free share of GPU g of node i.
func (c *Capacity) FreeMilli(i, g int) int { return int(c.milli[c.first[i]+g]) }

// Bucket lists the ready nodes with exactly k wholly free GPUs. The slice
// belongs to c.
func (c *Capacity) Bucket(k int) []int32 {
	if k < 0 || k >= len(c.buckets) {
		return nil
	}
	return c.buckets[k]
}

// SetReady takes node i in or out of service. Its allocations stay.
func (c *Capacity) SetReady(i int, ready bool) {
	c.grown++
	if c.ready[i] != ready {
		c.setReady(i, ready)
	}
}

func (c *Capacity) setReady(i int, ready bool) {
	c.ready[i] = ready
	if ready {
		c.bucketAdd(i)
		c.free += int(c.whole[i])
		return
	}
	c.bucketRemove(i)
	c.free -= int(c.whole[i])
}

// shortAllocs is the longest allocation list Allocate checks for
// duplicates pair by pair.
const shortAllocs = 32

// Allocate takes the shares; it returns an error and changes nothing when
// one does not fit.
func (c *Capacity) Allocate(allocs []cluster.Allocation) error {
	// A GPU listed twice: compared pairwise in a short list, by position
	// in a long one (a job across thousands of nodes).
	var seen map[int]bool
	if len(allocs) > shortAllocs {
		seen = make(map[int]bool, len(allocs))
	}
	nodes := nodeLookup{c: c}
	for k, a := range allocs {
		i, ok := nodes.of(&allocs[k])
		if !ok || a.GPU.Index < 0 || c.first[i]+a.GPU.Index >= c.first[i+1] {
			return fmt.Errorf("no GPU %s: %w", a.GPU, cluster.ErrDoesNotFit)
		}
		if a.Milli <= 0 || a.Milli > cluster.MilliGPU {
			return fmt.Errorf("GPU %s: share %d outside 1..%d: %w", a.GPU, a.Milli, cluster.MilliGPU, cluster.ErrDoesNotFit)
		}
		twice := false
		if seen != nil {
			p := c.first[i] + a.GPU.Index
			twice, seen[p] = seen[p], true
		} else {
			for _, b := range allocs[:k] {
				if b.GPU == a.GPU {
					twice = true
					break
				}
			}
		}
		if twice {
			return fmt.Errorf("GPU %s listed twice: %w", a.GPU, cluster.ErrDoesNotFit)
		}
		if !c.ready[i] || int(c.milli[c.first[i]+a.GPU.Index]) < a.Milli {
			return fmt.Errorf("GPU %s has no room for %d milli-GPUs: %w", a.GPU, a.Milli, cluster.ErrDoesNotFit)
		}
	}
	for k, a := range allocs {
		i, _ := nodes.of(&allocs[k])
		c.adjust(i, a.GPU.Index, -a.Milli)
	}
	return nil
}

// nodeLookup finds the nodes of a list of allocations by name. A job's
// GPUs on one node come together, so it looks a name up once per run of
// them.
type nodeLookup struct {
	c    *Capacity
	name string
	i    int
	ok   bool
	used bool
}

func (l *nodeLookup) of(a *cluster.Allocation) (int, bool) {
	if !l.used || a.GPU.Node != l.name {
		l.i, l.ok = l.c.index[a.GPU.Node]
		l.name, l.used = a.GPU.Node, true
	}
	return l.i, l.ok
}

// Grown counts the calls (Release, SetReady) that may have added free
// capacity: while it is unchanged, a request that did not fit still does
// not, which lets placers remember failures.
func (c *Capacity) Grown() uint64 { return c.grown }

// Release gives the shares back.
func (c *Capacity) Release(allocs []cluster.Allocation) { c.ReleaseOn(nil, allocs) }

// ReleaseOn is Release with nodes[k], where given, the place of allocs[k]'s
// node (RunningJob.Nodes): a hint, checked as NodeIndexHint does.
func (c *Capacity) ReleaseOn(nodes []int32, allocs []cluster.Allocation) {
	c.grown++
	if len(nodes) != len(allocs) {
		nodes = nil
	}
	look := nodeLookup{c: c}
	for k, a := range allocs {
		var i int
		if nodes != nil {
			i, _ = c.NodeIndexHint(nodes[k], a.GPU.Node)
		} else {
			i, _ = look.of(&allocs[k])
		}
		c.adjust(i, a.GPU.Index, a.Milli)
	}
}

func (c *Capacity) adjust(i, g, delta int) {
	p := c.first[i] + g
	wasWhole := c.milli[p] == cluster.MilliGPU
	c.milli[p] += int16(delta)
	isWhole := c.milli[p] == cluster.MilliGPU
	if wasWhole == isWhole {
		return
	}
	if c.ready[i] {
		c.bucketRemove(i)
	}
	if isWhole {
		c.whole[i]++
	} else {
		c.whole[i]--
	}
	if c.ready[i] {
		c.bucketAdd(i)
		if isWhole {
			c.free++
		} else {
			c.free--
		}
	}
}

func (c *Capacity) bucketAdd(i int) {
	k := c.whole[i]
	c.pos[i] = int32(len(c.buckets[k]))
	c.buckets[k] = append(c.buckets[k], int32(i))
}

func (c *Capacity) bucketRemove(i int) {
	k, p := c.whole[i], c.pos[i]
	b := c.buckets[k]
	last := b[len(b)-1]
	b[p] = last
	c.pos[last] = p
	c.buckets[k] = b[:len(b)-1]
	c.pos[i] = -1
}
