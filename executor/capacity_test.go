package executor_test

import (
	"fmt"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/cluster/clustertest"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/executor/plugins/firstfit"
)

// TestCapacityFollowsTheSnapshot drives a snapshot and the capacity index
// through the same random allocations (chosen by the first-fit placer),
// releases (with right and wrong hints of the nodes' places) and node
// outages, and checks after each step that the index
// agrees with the snapshot GPU by GPU, that its buckets hold exactly the
// ready nodes with that many free GPUs, and that a clone, fresh or made in
// the arrays of an earlier one (CloneInto), agrees too and is independent.
func TestCapacityFollowsTheSnapshot(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		var nodes []cluster.Node
		for i := range rapid.IntRange(1, 5).Draw(rt, "nodes") {
			nodes = append(nodes, clustertest.Node(fmt.Sprintf("n%d", i)).GPUs(rapid.IntRange(1, 8).Draw(rt, "gpus"), "V100").Obj())
		}
		fleet := clustertest.Fleet(nodes...)
		snap := cluster.NewSnapshot(fleet, clustertest.Epoch)
		c := executor.NewCapacity(snap)
		placer := firstfit.New()
		var held []cluster.JobID
		var reused *executor.Capacity // cloned into each step, mutated since
		for step := range rapid.IntRange(1, 60).Draw(rt, "steps") {
			switch rapid.IntRange(0, 3).Draw(rt, "op") {
			case 0, 1:
				w := clustertest.Job(fmt.Sprintf("j%d", step))
				if rapid.Bool().Draw(rt, "share") {
					w.Share(rapid.IntRange(1, 999).Draw(rt, "milli"))
				} else {
					w.GPUs(rapid.IntRange(1, 12).Draw(rt, "job_gpus"))
				}
				j := w.Obj()
				allocs, ok, _ := placer.Place(&j, c)
				if !ok {
					continue
				}
				if err := snap.Allocate(j.ID, allocs); err != nil {
					rt.Fatalf("placer chose what the snapshot refuses: %v", err)
				}
				if err := c.Allocate(allocs); err != nil {
					rt.Fatal(err)
				}
				held = append(held, j.ID)
			case 2:
				if len(held) == 0 {
					continue
				}
				k := rapid.IntRange(0, len(held)-1).Draw(rt, "release")
				allocs := snap.Release(held[k])
				// Released with its nodes' places as hints (RunningJob.Nodes):
				// right, wrong or missing, each is checked against the name.
				var hints []int32
				if rapid.Bool().Draw(rt, "hinted") {
					for _, a := range allocs {
						i, _ := c.NodeIndex(a.GPU.Node)
						hints = append(hints, int32(rapid.SampledFrom([]int{i, i, -1, i + 1, len(nodes)}).Draw(rt, "hint")))
					}
				}
				c.ReleaseOn(hints, allocs)
				held = append(held[:k], held[k+1:]...)
			case 3:
				i := rapid.IntRange(0, len(nodes)-1).Draw(rt, "node")
				ready := rapid.Bool().Draw(rt, "ready")
				c.SetReady(i, ready)
				snap.Nodes[i].State = map[bool]cluster.NodeState{true: cluster.NodeReady, false: cluster.NodeFailed}[ready]
			}
			clone := c.Clone()
			reused = c.CloneInto(reused)
			agree(rt, snap, c)
			c.SetReady(0, !c.Ready(0))
			c.SetReady(0, !c.Ready(0))
			agree(rt, snap, clone)
			agree(rt, snap, reused)
			for i := range nodes { // dirty its arrays for the next CloneInto; c stays as it was
				reused.SetReady(i, rapid.Bool().Draw(rt, "reused_ready"))
			}
			agree(rt, snap, c)
		}
	})
}

func agree(rt *rapid.T, snap *cluster.Snapshot, c *executor.Capacity) {
	free := 0
	inBucket := map[int]int{}
	for k := 0; k <= c.MaxNodeGPUs(); k++ {
		for _, i := range c.Bucket(k) {
			inBucket[int(i)]++
			if c.WholeFree(int(i)) != k {
				rt.Fatalf("node %d in bucket %d has %d free", i, k, c.WholeFree(int(i)))
			}
		}
	}
	for i := range snap.Nodes {
		n := &snap.Nodes[i]
		whole := 0
		for g := range n.GPUs {
			f := snap.FreeMilli(cluster.GPURef{Node: n.Name, Index: g})
			if f != c.FreeMilli(i, g) {
				rt.Fatalf("%s/gpu%d: snapshot %d free, index %d", n.Name, g, f, c.FreeMilli(i, g))
			}
			if f == cluster.MilliGPU {
				whole++
			}
		}
		want := 0
		if c.Ready(i) {
			want = 1
			free += whole
		}
		if inBucket[i] != want || c.WholeFree(i) != whole {
			rt.Fatalf("node %s: in %d buckets (ready %v), %d whole free, want %d", n.Name, inBucket[i], c.Ready(i), c.WholeFree(i), whole)
		}
	}
	if free != c.FreeGPUs() {
		rt.Fatalf("index counts %d free GPUs, snapshot %d", c.FreeGPUs(), free)
	}
}

// Property: the capacity index refuses exactly what the snapshot refuses,
// including the same GPU twice in one request and shares outside 1..1000.
func TestCapacityRefusesWhatTheSnapshotRefuses(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		fleet := clustertest.Fleet(clustertest.Node("n0").GPUs(2, "V100").Obj())
		snap := cluster.NewSnapshot(fleet, clustertest.Epoch)
		c := executor.NewCapacity(snap)
		for step := range rapid.IntRange(1, 20).Draw(rt, "steps") {
			var allocs []cluster.Allocation
			for range rapid.IntRange(1, 3).Draw(rt, "parts") {
				allocs = append(allocs, cluster.Allocation{
					GPU:   cluster.GPURef{Node: "n0", Index: rapid.IntRange(0, 1).Draw(rt, "gpu")},
					Milli: rapid.IntRange(-100, 1100).Draw(rt, "milli"),
				})
			}
			errCap := c.Allocate(allocs)
			errSnap := snap.Allocate(cluster.JobID(fmt.Sprint(step)), allocs)
			if (errCap == nil) != (errSnap == nil) {
				rt.Fatalf("step %d, %v: capacity says %v, snapshot says %v", step, allocs, errCap, errSnap)
			}
		}
	})
}

// wideFleet is a machine of n nodes of 16 GPUs, as an HPC log's header
// describes Curie's (5,544 nodes).
func wideFleet(n int) *cluster.Fleet {
	nodes := make([]cluster.Node, n)
	for i := range nodes {
		nodes[i] = clustertest.Node(fmt.Sprintf("n%04d", i)).GPUs(16, "processor").Obj()
	}
	return clustertest.Fleet(nodes...)
}

// A job across most of a machine of thousands of nodes places on distinct
// GPUs, once, and the capacity takes it; a long list that names a GPU
// twice is refused.
func TestPlaceAcrossAWideMachine(t *testing.T) {
	snap := cluster.NewSnapshot(wideFleet(2000), clustertest.Epoch)
	c := executor.NewCapacity(snap)
	job := &cluster.Job{ID: "wide", Spec: cluster.JobSpec{GPUs: 31_000, GPUMilli: cluster.MilliGPU}}
	allocs, ok, why := firstfit.New().Place(job, c)
	if !ok || len(allocs) != 31_000 {
		t.Fatalf("placed %d GPUs, %v: %s", len(allocs), ok, why)
	}
	seen := map[cluster.GPURef]bool{}
	for _, a := range allocs {
		if seen[a.GPU] {
			t.Fatalf("GPU %s twice", a.GPU)
		}
		seen[a.GPU] = true
	}
	twice := append(append([]cluster.Allocation(nil), allocs[:100]...), allocs[7])
	if err := c.Allocate(twice); err == nil || !strings.Contains(err.Error(), "listed twice") {
		t.Fatalf("a GPU listed twice in a long list: %v", err)
	}
	if err := c.Allocate(allocs); err != nil {
		t.Fatal(err)
	}
	if c.FreeGPUs() != 32_000-31_000 {
		t.Fatalf("%d GPUs free, want 1,000", c.FreeGPUs())
	}
	if _, ok, _ := firstfit.New().Place(&cluster.Job{ID: "next", Spec: cluster.JobSpec{GPUs: 1_001, GPUMilli: cluster.MilliGPU}}, c); ok {
		t.Fatal("placed 1,001 GPUs on 1,000 free")
	}
}

// BenchmarkPlaceAcrossCurie places an 80,000-processor job, Curie's
// largest, on its 5,544 nodes of 16.
func BenchmarkPlaceAcrossCurie(b *testing.B) {
	c := executor.NewCapacity(cluster.NewSnapshot(wideFleet(5544), clustertest.Epoch))
	job := &cluster.Job{ID: "wide", Spec: cluster.JobSpec{GPUs: 80_000, GPUMilli: cluster.MilliGPU}}
	for b.Loop() {
		if _, ok, why := firstfit.New().Place(job, c); !ok {
			b.Fatal(why)
		}
	}
}
