package park_test

import (
	"testing"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/cluster/clustertest"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/executor/park"
)

func view(j cluster.Job) *executor.JobView { return &executor.JobView{Job: &j} }

func TestQueuedDemandLeavesOutWhatMoreNodesCannotServe(t *testing.T) {
	nodes := []cluster.Node{clustertest.Node("n0").GPUs(4, "A100").Obj(), clustertest.Node("n1").GPUs(4, "A100").Obj()}
	tenants := []cluster.Tenant{{Name: "t1", Weight: 1}, {Name: "capped", Weight: 1, Quota: []cluster.Quota{{GPUs: 4}}}}
	held := view(clustertest.Job("capped-running").GPUs(4).Tenant("capped").Obj())
	running := []*executor.RunningJob{{JobView: *held}}
	for i := range 4 {
		running[0].Allocations = append(running[0].Allocations, cluster.Allocation{Job: held.Job.ID, GPU: cluster.GPURef{Node: "n0", Index: i}, Milli: cluster.MilliGPU})
	}
	queue := []*executor.JobView{
		view(clustertest.Job("capped-queued").GPUs(4).Tenant("capped").Obj()),   // its tenant's quota holds it back
		view(clustertest.Job("h100").GPUs(1).Tenant("t1").Models("H100").Obj()), // no node has its model
		view(clustertest.Job("gang").GPUs(8).Gang(2).Tenant("t1").Obj()),        // two tasks of 4: both nodes
		view(clustertest.Job("uneven").GPUs(8).Gang(3).Tenant("t1").Obj()),      // the placer cannot split it evenly
		view(clustertest.Job("big").GPUs(9).Tenant("t1").Obj()),                 // larger than the fleet
		view(clustertest.Job("fits").GPUs(2).Tenant("t1").Obj()),
		view(clustertest.Job("half").GPUs(1).Share(cluster.MilliGPU / 2).Tenant("t1").Obj()),
	}
	if got := park.QueuedDemand(queue, running, nodes, tenants); got != 10.5 {
		t.Errorf("demand %g GPUs, want 10.5 (the 8-GPU gang across both nodes, the 2-GPU job and half a GPU; "+
			"not the capped tenant's, the H100 job, the uneven gang nor the job larger than the fleet)", got)
	}
}
