package park

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

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

// Wakes is Needed's answer.
type Wakes struct {
	// Wake is the Asleep nodes the waiting jobs need, with why
	// (Asleep.Needed of Decide).
	Wake map[string]string
	// Planned is the nodes the waiting jobs were planned on: not to be
	// parked.
	Planned map[string]bool
	// NextReplan is the earliest time a stage's plan asked to be made
	// again (zero: none): a job held now (a carbon hold) may want a
	// parked node then, which only a plan then will say.
	NextReplan time.Time
}

// Needed says which Asleep nodes the jobs the plan left waiting need,
// and why, and on which nodes it planned them. It plans those jobs in
// stages, each on top of what the earlier placed (as running, so that
// their tenants' quotas count them):
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
func Needed(ctx context.Context, planner executor.Planner, n Need) (Wakes, error) {
	st := newStages(planner, n)
	w := Wakes{Wake: map[string]string{}, Planned: st.planned}
	if len(st.queue) == 0 {
		return w, nil // nothing waits
	}
	if st.stopping {
		st.plan(ctx, "the GPUs being freed")
	}
	if len(st.queue) > 0 && len(n.Waking) > 0 {
		st.up(n.Waking)
		st.plan(ctx, "the waking nodes")
	}
	if len(st.queue) > 0 {
		st.up(n.Asleep)
		asleep := map[string]bool{}
		for _, node := range n.Asleep {
			asleep[node.Name] = true
		}
		for _, pl := range st.plan(ctx, "the parked nodes") {
			for _, a := range pl.Allocations {
				if _, known := w.Wake[a.GPU.Node]; !known && asleep[a.GPU.Node] {
					w.Wake[a.GPU.Node] = fmt.Sprintf("job %s waits for it", pl.Job)
				}
			}
		}
	}
	w.NextReplan = st.next
	return w, errors.Join(st.errs...)
}

// stages is Needed's plans, each on top of the ones before.
type stages struct {
	planner  executor.Planner
	n        Need
	views    map[cluster.JobID]*executor.JobView
	running  []*executor.RunningJob // those that hold GPUs in the stages
	stopping bool                   // jobs are being stopped: their GPUs are free in the stages
	queue    []*executor.JobView    // the jobs still waiting
	nodes    []cluster.Node         // n.Nodes until up changes them
	own      bool                   // nodes is a copy of n.Nodes
	planned  map[string]bool
	next     time.Time // the earliest NextReplan of the stages' plans
	errs     []error
}

// newStages starts from the plan: its placements run, its victims' and
// the stopping jobs' GPUs are free.
func newStages(planner executor.Planner, n Need) *stages {
	st := &stages{planner: planner, n: n, views: make(map[cluster.JobID]*executor.JobView, len(n.In.Queue)),
		queue: slices.Clone(n.In.Queue), nodes: n.Nodes, planned: map[string]bool{}}
	for _, v := range n.In.Queue {
		st.views[v.Job.ID] = v
	}
	victims := map[cluster.JobID]bool{}
	for _, pr := range n.Plan.Preemptions {
		victims[pr.Job] = true
	}
	for _, r := range n.In.Running {
		if r.Stopping || victims[r.Job.ID] {
			st.stopping = true
			continue
		}
		st.running = append(st.running, r)
	}
	st.placed(n.Plan.Placements)
	return st
}

// placed runs the jobs of pls and takes them out of the queue.
func (st *stages) placed(pls []executor.Placement) {
	done := map[cluster.JobID]bool{}
	for _, pl := range pls {
		if v := st.views[pl.Job]; v != nil {
			done[pl.Job] = true
			st.running = append(st.running, &executor.RunningJob{JobView: *v, Allocations: pl.Allocations, Started: st.n.In.Now})
		}
	}
	st.queue = slices.DeleteFunc(st.queue, func(v *executor.JobView) bool { return done[v.Job.ID] })
}

// up brings nodes up for the stages that follow: those in the fleet
// become ready, the others join it.
func (st *stages) up(ns []cluster.Node) {
	if !st.own {
		st.nodes, st.own = slices.Clone(st.nodes), true
	}
	pending := make(map[string]bool, len(ns))
	for _, node := range ns {
		pending[node.Name] = true
	}
	for i := range st.nodes {
		if pending[st.nodes[i].Name] {
			st.nodes[i].State = cluster.NodeReady
			delete(pending, st.nodes[i].Name)
		}
	}
	for _, node := range ns {
		if pending[node.Name] {
			st.nodes = append(st.nodes, node)
			delete(pending, node.Name)
		}
	}
}

// plan plans the waiting jobs on the nodes as they are now; what it
// places runs in the stages after it.
func (st *stages) plan(ctx context.Context, name string) []executor.Placement {
	snap := cluster.NewSnapshot(&cluster.Fleet{Nodes: st.nodes, Tenants: st.n.Tenants}, st.n.In.Now)
	for _, r := range st.running {
		_ = snap.Allocate(r.Job.ID, r.Allocations) // a job whose GPUs are not in the fleet holds none
	}
	in := st.n.In
	// A free index of its own; the facts were the whole queue's, and the
	// cycle walks this stage's queue for them.
	in.Cluster, in.Free, in.Running, in.Queue, in.Unexplained, in.Facts = snap, nil, st.running, st.queue, true, nil
	got, err := st.planner.Plan(ctx, in)
	if err != nil {
		st.errs = append(st.errs, fmt.Errorf("planning the jobs that wait on %s: %w", name, err))
		return nil
	}
	st.placed(got.Placements)
	if t := got.NextReplan; !t.IsZero() && (st.next.IsZero() || t.Before(st.next)) {
		st.next = t
	}
	for _, pl := range got.Placements {
		for _, a := range pl.Allocations {
			st.planned[a.GPU.Node] = true
		}
	}
	return got.Placements
}
