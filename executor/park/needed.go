package park

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
)

// Need is what Needed plans on.
type Need struct {
	// In is the plan's input: its queue, its running jobs (those
	// Stopping free their GPUs), the clock, the tenants' usage.
	In executor.PlanInput
	// Plan is the plan made on In: its placements count as running, its
	// victims' GPUs as free.
	Plan executor.Plan
	// Nodes is the fleet In saw, the parked and waking nodes out of the
	// plan; Tenants its tenants.
	Nodes   []cluster.Node
	Tenants []cluster.Tenant
	// Waking are the nodes being woken and Asleep the parked nodes that
	// may be woken, each as it is when up.
	Waking, Asleep []cluster.Node
}

// Needed says which Asleep nodes the jobs the plan left waiting need,
// and why (Asleep.Needed of Decide), and on which nodes it planned them
// (not to be parked). It plans those jobs in stages, each on top of what
// the earlier placed (as running, so that their tenants' quotas count
// them):
//
//  1. on the nodes up, with the GPUs of the jobs being stopped (and of
//     the plan's victims) free;
//  2. with the Waking nodes up too;
//  3. with the Asleep nodes up too: an Asleep node a job is placed on is
//     needed.
//
// So a job that waits for a victim's GPUs, or for a node that is booting,
// wakes nothing more. A stage whose plan fails places nothing; its error
// is returned with the answer of the other stages.
func Needed(ctx context.Context, planner executor.Planner, n Need) (wake map[string]string, planned map[string]bool, err error) {
	wake, planned = map[string]string{}, map[string]bool{}
	views := make(map[cluster.JobID]*executor.JobView, len(n.In.Queue))
	for _, v := range n.In.Queue {
		views[v.Job.ID] = v
	}
	victims := map[cluster.JobID]bool{}
	for _, pr := range n.Plan.Preemptions {
		victims[pr.Job] = true
	}
	var running []*executor.RunningJob // those that hold GPUs in the stages
	stopping := false
	for _, r := range n.In.Running {
		if r.Stopping || victims[r.Job.ID] {
			stopping = true
			continue
		}
		running = append(running, r)
	}
	queue := slices.Clone(n.In.Queue)
	placed := func(pls []executor.Placement) {
		done := map[cluster.JobID]bool{}
		for _, pl := range pls {
			if v := views[pl.Job]; v != nil {
				done[pl.Job] = true
				running = append(running, &executor.RunningJob{JobView: *v, Allocations: pl.Allocations, Started: n.In.Now})
			}
		}
		queue = slices.DeleteFunc(queue, func(v *executor.JobView) bool { return done[v.Job.ID] })
	}
	placed(n.Plan.Placements)
	if len(queue) == 0 {
		return wake, planned, nil // nothing waits
	}
	nodes := slices.Clone(n.Nodes)
	at := map[string]int{}
	for i := range nodes {
		at[nodes[i].Name] = i
	}
	up := func(ns []cluster.Node) {
		for _, node := range ns {
			if i, ok := at[node.Name]; ok {
				nodes[i].State = cluster.NodeReady
			} else {
				at[node.Name] = len(nodes)
				nodes = append(nodes, node)
			}
		}
	}
	var errs []error
	stage := func(name string) []executor.Placement {
		snap := cluster.NewSnapshot(&cluster.Fleet{Nodes: nodes, Tenants: n.Tenants}, n.In.Now)
		for _, r := range running {
			_ = snap.Allocate(r.Job.ID, r.Allocations) // a job whose GPUs are not in the fleet holds none
		}
		in := n.In
		in.Cluster, in.Free, in.Running, in.Queue, in.Unexplained = snap, nil, running, queue, true // a free index of its own
		got, err := planner.Plan(ctx, in)
		if err != nil {
			errs = append(errs, fmt.Errorf("planning the jobs that wait on %s: %w", name, err))
			return nil
		}
		placed(got.Placements)
		for _, pl := range got.Placements {
			for _, a := range pl.Allocations {
				planned[a.GPU.Node] = true
			}
		}
		return got.Placements
	}
	if stopping {
		stage("the GPUs being freed")
	}
	if len(queue) > 0 && len(n.Waking) > 0 {
		up(n.Waking)
		stage("the waking nodes")
	}
	if len(queue) == 0 {
		return wake, planned, errors.Join(errs...)
	}
	up(n.Asleep)
	asleep := map[string]bool{}
	for _, node := range n.Asleep {
		asleep[node.Name] = true
	}
	for _, pl := range stage("the parked nodes") {
		for _, a := range pl.Allocations {
			if _, known := wake[a.GPU.Node]; !known && asleep[a.GPU.Node] {
				wake[a.GPU.Node] = fmt.Sprintf("job %s waits for it", pl.Job)
			}
		}
	}
	return wake, planned, errors.Join(errs...)
}
