package park_test

import (
	"context"
	"maps"
	"slices"
	"testing"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/cluster/clustertest"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/executor/executortest"
	"github.com/prescient-sched/prescient/executor/park"
	"github.com/prescient-sched/prescient/executor/policies"
)

func TestNeededWakesOnlyForWorkNothingUpWillTake(t *testing.T) {
	pol, err := policies.New("fifo", policies.Options{Checkpoint: "none"})
	if err != nil {
		t.Fatal(err)
	}
	planner, err := executor.New(pol)
	if err != nil {
		t.Fatal(err)
	}
	n0 := clustertest.Node("n0").GPUs(4, "A100").Obj()
	p0 := clustertest.Node("p0").GPUs(4, "A100").Obj()
	w0 := clustertest.Node("w0").GPUs(4, "A100").Obj()
	for _, tc := range []struct {
		name        string
		stopping    bool
		waking      []cluster.Node
		wake        map[string]string
		plannedOnto []string
	}{
		{"a job no node up can take wakes the parked node it is planned on", false, nil,
			map[string]string{"p0": "job j1 waits for it"}, []string{"p0"}},
		{"a job that waits for the GPUs of a job being stopped wakes nothing", true, nil, map[string]string{}, []string{"n0"}},
		{"a job that waits for a node being woken wakes nothing more", false, []cluster.Node{w0}, map[string]string{}, []string{"w0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := executortest.NewScenario(t, "fifo").Nodes(n0)
			r := s.Running(clustertest.Job("r0").GPUs(4).Obj()).On("n0", 0, 1, 2, 3)
			if tc.stopping {
				r.Stopping()
			}
			s.Queued(clustertest.Job("j1").GPUs(4).Obj())
			in := s.Input()
			plan, err := planner.Plan(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			if len(plan.Placements) != 0 {
				t.Fatalf("the plan placed %v on the nodes up", executortest.Placed(plan))
			}
			got, err := park.Needed(context.Background(), planner, park.Need{In: in, Plan: plan,
				Nodes: []cluster.Node{n0}, Waking: tc.waking, Asleep: []cluster.Node{p0}})
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(got.Wake, tc.wake) {
				t.Errorf("wake %v, want %v", got.Wake, tc.wake)
			}
			if onto := slices.Sorted(maps.Keys(got.Planned)); !slices.Equal(onto, tc.plannedOnto) {
				t.Errorf("planned onto %v, want %v", onto, tc.plannedOnto)
			}
		})
	}
}
