package placement_test

import (
	"context"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/cluster/clustertest"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/executor/plugins/placement"
	"github.com/prescient-sched/prescient/executor/policies"
)

func TestPlannerPacksSharesAndKeepsTenantsApart(t *testing.T) {
	fleet := clustertest.Fleet(clustertest.Node("n1").GPUs(4, "A100-SXM4-40GB").NVLink("s", 0, 1, 2, 3).Obj())
	snap := cluster.NewSnapshot(fleet, clustertest.Epoch)
	in := executor.PlanInput{Now: clustertest.Epoch, Cluster: snap}
	for _, j := range []cluster.Job{
		clustertest.Job("red-1").Share(400).Tenant("red").Obj(),
		clustertest.Job("red-2").Share(400).Tenant("red").Obj(),
		clustertest.Job("blue-1").Share(200).Tenant("blue").Obj(),
		clustertest.Job("whole").GPUs(2).Tenant("blue").Obj(),
	} {
		job := j
		in.Queue = append(in.Queue, &executor.JobView{Job: &job, QueuedSince: job.SubmitTime,
			Forecast: executor.Forecast{Job: job.ID, DurationP50: time.Hour, DurationP90: time.Hour, MemoryP90Bytes: 8 << 30}})
	}
	pol, err := policies.New("fifo", policies.Options{Checkpoint: "none"})
	if err != nil {
		t.Fatal(err)
	}
	if pol.Placer, err = placement.NewPlacer(placement.PrescientName, placement.PlacerArgs{}); err != nil {
		t.Fatal(err)
	}
	p, err := executor.New(pol)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := p.Plan(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Placements) != 4 {
		t.Fatalf("placed %d of 4 jobs: %+v %+v", len(plan.Placements), plan.Placements, plan.Waiting)
	}
	gpu := map[cluster.JobID]cluster.GPURef{}
	for _, pl := range plan.Placements {
		if pl.Reason == "" {
			t.Errorf("%s placed without a reason", pl.Job)
		}
		gpu[pl.Job] = pl.Allocations[0].GPU
		if err := snap.Allocate(pl.Job, pl.Allocations); err != nil {
			t.Fatalf("the plan does not fit the fleet: %v", err)
		}
	}
	if gpu["red-1"] != gpu["red-2"] {
		t.Errorf("the red shares went to %s and %s, want one GPU", gpu["red-1"], gpu["red-2"])
	}
	if gpu["blue-1"] == gpu["red-1"] {
		t.Errorf("blue shares %s with red without MIG", gpu["blue-1"])
	}
}
