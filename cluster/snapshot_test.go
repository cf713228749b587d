package cluster_test

import (
	"errors"
	"fmt"
	"testing"

	"pgregory.net/rapid"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/cluster/clustertest"
)

func twoNodeSnapshot() *cluster.Snapshot {
	f := clustertest.Fleet(
		clustertest.Node("n1").GPUs(2, "A100-SXM4-80GB").Obj(),
		clustertest.Node("n2").GPUs(2, "T4").State(cluster.NodeDrained).Obj(),
	)
	return cluster.NewSnapshot(f, clustertest.Epoch)
}

func TestAllocate(t *testing.T) {
	g0, g1 := cluster.GPURef{Node: "n1", Index: 0}, cluster.GPURef{Node: "n1", Index: 1}
	tests := []struct {
		name   string
		before map[cluster.JobID][]cluster.Allocation
		job    cluster.JobID
		allocs []cluster.Allocation
		fits   bool
	}{
		{name: "two fractional jobs share a GPU", before: map[cluster.JobID][]cluster.Allocation{"a": {{GPU: g0, Milli: 600}}},
			job: "b", allocs: []cluster.Allocation{{GPU: g0, Milli: 400}}, fits: true},
		{name: "a share beyond what is free does not fit", before: map[cluster.JobID][]cluster.Allocation{"a": {{GPU: g0, Milli: 600}}},
			job: "b", allocs: []cluster.Allocation{{GPU: g0, Milli: 401}}},
		{name: "the same GPU twice in one allocation does not fit", job: "a", allocs: []cluster.Allocation{{GPU: g0, Milli: 100}, {GPU: g0, Milli: 100}}},
		{name: "a job already holding GPUs gets no more", before: map[cluster.JobID][]cluster.Allocation{"a": {{GPU: g0, Milli: 1000}}},
			job: "a", allocs: []cluster.Allocation{{GPU: g1, Milli: 1000}}},
		{name: "a drained node takes nothing new", job: "a", allocs: []cluster.Allocation{{GPU: cluster.GPURef{Node: "n2", Index: 0}, Milli: 1000}}},
		{name: "a GPU that is not there does not fit", job: "a", allocs: []cluster.Allocation{{GPU: cluster.GPURef{Node: "n1", Index: 7}, Milli: 1000}}},
		{name: "all or nothing: one bad GPU leaves the others free", job: "a", allocs: []cluster.Allocation{{GPU: g0, Milli: 1000}, {GPU: cluster.GPURef{Node: "nx"}, Milli: 1000}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := twoNodeSnapshot()
			for id, a := range tt.before {
				must(t, s.Allocate(id, a))
			}
			before := s.AllocatedMilli()
			err := s.Allocate(tt.job, tt.allocs)
			if tt.fits {
				must(t, err)
				return
			}
			if !errors.Is(err, cluster.ErrDoesNotFit) {
				t.Fatalf("Allocate = %v, want ErrDoesNotFit", err)
			}
			if s.AllocatedMilli() != before {
				t.Fatalf("a refused allocation changed the snapshot: %d -> %d milli-GPUs", before, s.AllocatedMilli())
			}
		})
	}
}

// Property: whatever sequence of allocations and releases happens, no GPU is
// given beyond its capacity, every job's holdings are what was granted, and
// releasing everything frees everything.
func TestSnapshotInvariants(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		nodes := rapid.IntRange(1, 4).Draw(t, "nodes")
		var ns []cluster.Node
		for i := range nodes {
			ns = append(ns, clustertest.Node(fmt.Sprintf("n%d", i)).GPUs(rapid.IntRange(1, 8).Draw(t, "gpus"), "V100").Obj())
		}
		s := cluster.NewSnapshot(clustertest.Fleet(ns...), clustertest.Epoch)
		granted := map[cluster.JobID]int{}
		for step := range rapid.IntRange(1, 60).Draw(t, "steps") {
			id := cluster.JobID(fmt.Sprintf("j%d", rapid.IntRange(0, 10).Draw(t, "job")))
			if rapid.Bool().Draw(t, "release") {
				s.Release(id)
				delete(granted, id)
				continue
			}
			var allocs []cluster.Allocation
			for range rapid.IntRange(1, 3).Draw(t, "parts") {
				n := rapid.IntRange(0, nodes-1).Draw(t, "node")
				allocs = append(allocs, cluster.Allocation{
					GPU:   cluster.GPURef{Node: fmt.Sprintf("n%d", n), Index: rapid.IntRange(0, 8).Draw(t, "gpu")},
					Milli: rapid.IntRange(1, 1000).Draw(t, "milli"),
				})
			}
			if err := s.Allocate(id, allocs); err == nil {
				total := 0
				for _, a := range allocs {
					total += a.Milli
				}
				granted[id] = total
			} else if !errors.Is(err, cluster.ErrDoesNotFit) {
				t.Fatalf("step %d: unexpected error %v", step, err)
			}
			checkInvariants(t, s, granted)
		}
		for _, id := range s.Jobs() {
			s.Release(id)
		}
		if s.AllocatedMilli() != 0 {
			t.Fatalf("after releasing every job %d milli-GPUs stay allocated", s.AllocatedMilli())
		}
	})
}

func checkInvariants(t *rapid.T, s *cluster.Snapshot, granted map[cluster.JobID]int) {
	perGPU := map[cluster.GPURef]int{}
	sum := 0
	for _, id := range s.Jobs() {
		seen := map[cluster.GPURef]bool{}
		held := 0
		for _, a := range s.Allocations(id) {
			if seen[a.GPU] {
				t.Fatalf("job %s holds %s twice", id, a.GPU)
			}
			seen[a.GPU] = true
			perGPU[a.GPU] += a.Milli
			held += a.Milli
		}
		if held != granted[id] {
			t.Fatalf("job %s holds %d milli-GPUs, was granted %d", id, held, granted[id])
		}
		sum += held
	}
	for g, m := range perGPU {
		if m > cluster.MilliGPU || s.FreeMilli(g) != cluster.MilliGPU-m {
			t.Fatalf("%s: %d milli-GPUs allocated, free %d", g, m, s.FreeMilli(g))
		}
	}
	if sum != s.AllocatedMilli() {
		t.Fatalf("allocations add up to %d, snapshot says %d", sum, s.AllocatedMilli())
	}
}
