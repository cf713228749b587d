package executor_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/cluster/clustertest"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/executor/policies"
)

// TestSortedQueuePlansLikeTheUnsortedOne: for a static order, a queue kept by
// SortedQueue (as the simulator does) gives the same plan as the queue in
// any order, which the planner sorts itself; and every plan fits the free
// capacity without giving a GPU twice.
func TestSortedQueuePlansLikeTheUnsortedOne(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		name := rapid.SampledFrom([]string{"fifo", "sjf-oracle", "srtf-oracle"}).Draw(rt, "policy")
		pol, err := policies.New(name, policies.Options{})
		if err != nil {
			rt.Fatal(err)
		}
		planner, _ := executor.New(pol)
		nodes := rapid.IntRange(1, 6).Draw(rt, "nodes")
		var ns []cluster.Node
		for i := range nodes {
			ns = append(ns, clustertest.Node(fmt.Sprintf("n%d", i)).GPUs(8, "V100").Obj())
		}
		snap := cluster.NewSnapshot(clustertest.Fleet(ns...), clustertest.Epoch)
		sq, ok := executor.NewSortedQueue(pol.Order)
		if !ok {
			rt.Fatalf("%s: order is not static", name)
		}
		var queue []*executor.JobView
		for i := range rapid.IntRange(0, 60).Draw(rt, "jobs") {
			j := clustertest.Job(fmt.Sprintf("j%02d", i)).GPUs(rapid.IntRange(1, 16).Draw(rt, "gpus")).
				Submitted(clustertest.Epoch.Add(-time.Duration(rapid.IntRange(0, 50).Draw(rt, "age_min")) * time.Minute)).Obj()
			d := time.Duration(rapid.IntRange(1, 600).Draw(rt, "min")) * time.Minute
			v := &executor.JobView{Job: &j, QueuedSince: j.SubmitTime, Forecast: executor.Forecast{Job: j.ID, DurationP50: d, DurationP90: d},
				AttainedGPU: time.Duration(rapid.IntRange(0, 7200).Draw(rt, "attained_s")) * time.Second}
			queue = append(queue, v)
			sq.Add(v, clustertest.Epoch)
		}
		if len(queue) > 0 && rapid.Bool().Draw(rt, "remove") {
			k := rapid.IntRange(0, len(queue)-1).Draw(rt, "removed")
			if !sq.Remove(queue[k]) {
				rt.Fatalf("remove of a queued job failed")
			}
			queue = slices.Delete(queue, k, k+1)
		}
		in := executor.PlanInput{Now: clustertest.Epoch, Cluster: snap, Queue: queue}
		plain, err := planner.Plan(t.Context(), in)
		if err != nil {
			rt.Fatal(err)
		}
		in.Queue, in.QueueSorted = sq.Jobs(), true
		sorted, err := planner.Plan(t.Context(), in)
		if err != nil {
			rt.Fatal(err)
		}
		if fmt.Sprint(plain.Placements) != fmt.Sprint(sorted.Placements) {
			rt.Fatalf("plans differ:\n%v\n%v", plain.Placements, sorted.Placements)
		}
		for _, p := range plain.Placements {
			if err := snap.Allocate(p.Job, p.Allocations); err != nil {
				rt.Fatalf("plan does not fit: %v", err)
			}
		}
	})
}
