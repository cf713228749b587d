package cluster

import (
	"errors"
	"fmt"
	"iter"
	"maps"
	"sort"
	"time"
)

// Allocation is a share of one GPU held by a job.
type Allocation struct {
	Job   JobID
	GPU   GPURef
	Milli int // milli-GPUs of that GPU the job holds
}

// ErrDoesNotFit is returned (wrapped) when an allocation would exceed a GPU's
// capacity or names a GPU that is not there or not ready.
var ErrDoesNotFit = errors.New("allocation does not fit")

// Snapshot is the state of the fleet at one time: its nodes and what each
// job holds. Planners read it; only Allocate and Release change it, and they
// keep its invariants: no GPU is given beyond MilliGPU in total, and no job
// holds the same GPU twice.
type Snapshot struct {
	Time    time.Time
	Nodes   []Node
	Tenants []Tenant

	nodeIndex map[string]int
	used      map[GPURef]int         // milli-GPUs allocated per GPU
	byJob     map[JobID][]Allocation // allocations per job
}

// NewSnapshot returns a snapshot of the fleet at time t with nothing allocated.
func NewSnapshot(f *Fleet, t time.Time) *Snapshot {
	s := &Snapshot{
		Time:      t.UTC(),
		Nodes:     f.Nodes,
		Tenants:   f.Tenants,
		nodeIndex: make(map[string]int, len(f.Nodes)),
		used:      make(map[GPURef]int),
		byJob:     make(map[JobID][]Allocation),
	}
	for i, n := range f.Nodes {
		s.nodeIndex[n.Name] = i
	}
	return s
}

// Node returns the named node.
func (s *Snapshot) Node(name string) (*Node, bool) {
	i, ok := s.nodeIndex[name]
	if !ok {
		return nil, false
	}
	return &s.Nodes[i], true
}

// GPUModel is the model of a GPU of the fleet, "" for one not in it.
func (s *Snapshot) GPUModel(g GPURef) string {
	if n, ok := s.Node(g.Node); ok && g.Index >= 0 && g.Index < len(n.GPUs) {
		return n.GPUs[g.Index].Model
	}
	return ""
}

// FreeMilli is the unallocated share of a GPU in milli-GPUs.
func (s *Snapshot) FreeMilli(g GPURef) int { return MilliGPU - s.used[g] }

// Used is every GPU with a share allocated, with the milli-GPUs
// allocated, in no order.
func (s *Snapshot) Used() iter.Seq2[GPURef, int] { return maps.All(s.used) }

// Allocations returns what a job holds, in GPU order.
func (s *Snapshot) Allocations(job JobID) []Allocation { return s.byJob[job] }

// Jobs returns the jobs that hold GPUs, sorted.
func (s *Snapshot) Jobs() []JobID {
	ids := make([]JobID, 0, len(s.byJob))
	for id := range s.byJob {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(a, b int) bool { return ids[a] < ids[b] })
	return ids
}

// AllocatedMilli is the total allocated GPU share in milli-GPUs.
func (s *Snapshot) AllocatedMilli() int {
	total := 0
	for _, m := range s.used {
		total += m
	}
	return total
}

// Allocate gives job the listed shares, all or none.
func (s *Snapshot) Allocate(job JobID, allocs []Allocation) error {
	if _, held := s.byJob[job]; held {
		return fmt.Errorf("job %s already holds GPUs: %w", job, ErrDoesNotFit)
	}
	want := make(map[GPURef]int, len(allocs))
	for _, a := range allocs {
		if a.Milli <= 0 || a.Milli > MilliGPU {
			return fmt.Errorf("job %s on %s: share %d outside 1..%d: %w", job, a.GPU, a.Milli, MilliGPU, ErrDoesNotFit)
		}
		if _, dup := want[a.GPU]; dup {
			return fmt.Errorf("job %s: %s listed twice: %w", job, a.GPU, ErrDoesNotFit)
		}
		n, ok := s.Node(a.GPU.Node)
		if !ok || a.GPU.Index < 0 || a.GPU.Index >= len(n.GPUs) {
			return fmt.Errorf("job %s: no GPU %s: %w", job, a.GPU, ErrDoesNotFit)
		}
		if n.State != "" && n.State != NodeReady {
			return fmt.Errorf("job %s: node %s is %s: %w", job, n.Name, n.State, ErrDoesNotFit)
		}
		if free := s.FreeMilli(a.GPU); a.Milli > free {
			return fmt.Errorf("job %s: %s has %d milli-GPUs free, %d asked: %w", job, a.GPU, free, a.Milli, ErrDoesNotFit)
		}
		want[a.GPU] = a.Milli
	}
	for _, a := range allocs {
		a.Job = job
		s.used[a.GPU] += a.Milli
		s.byJob[job] = append(s.byJob[job], a)
	}
	return nil
}

// Release frees everything job holds and returns what it held.
func (s *Snapshot) Release(job JobID) []Allocation {
	allocs := s.byJob[job]
	for _, a := range allocs {
		s.used[a.GPU] -= a.Milli
		if s.used[a.GPU] == 0 {
			delete(s.used, a.GPU)
		}
	}
	delete(s.byJob, job)
	return allocs
}
