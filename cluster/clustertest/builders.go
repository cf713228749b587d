// Package clustertest has fluent builders of cluster objects for tests:
//
//	clustertest.Job("j1").GPUs(8).Tier(cluster.TierProduction).Deadline(t).Obj()
//	clustertest.Node("n1").GPUs(8, "A100-SXM4-80GB").Rack("r1").Obj()
package clustertest

import (
	"time"

	"github.com/prescient-sched/prescient/cluster"
)

// Epoch is the submit time builders use unless told otherwise.
var Epoch = time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)

// JobWrapper builds a cluster.Job.
type JobWrapper struct{ job cluster.Job }

// Job starts a queued one-GPU job of the default tier submitted at Epoch.
func Job(id string) *JobWrapper {
	spec := cluster.JobSpec{Name: id, Tenant: "t1", Tier: cluster.DefaultTier, GPUs: 1, GPUMilli: cluster.MilliGPU}
	return &JobWrapper{job: cluster.NewJob(cluster.JobID(id), spec, Epoch)}
}

// GPUs sets the number of whole GPUs.
func (w *JobWrapper) GPUs(n int) *JobWrapper {
	w.job.Spec.GPUs, w.job.Spec.GPUMilli = n, cluster.MilliGPU
	if n == 0 {
		w.job.Spec.GPUMilli = 0
	}
	return w
}

// Share makes the job ask for milli thousandths of one GPU.
func (w *JobWrapper) Share(milli int) *JobWrapper {
	w.job.Spec.GPUs, w.job.Spec.GPUMilli = 1, milli
	return w
}

// Tenant sets the tenant.
func (w *JobWrapper) Tenant(t string) *JobWrapper { w.job.Spec.Tenant = t; return w }

// Tier sets the priority tier.
func (w *JobWrapper) Tier(t cluster.Tier) *JobWrapper { w.job.Spec.Tier = t; return w }

// Submitted sets the submit time.
func (w *JobWrapper) Submitted(t time.Time) *JobWrapper { w.job.SubmitTime = t.UTC(); return w }

// Deadline sets the deadline.
func (w *JobWrapper) Deadline(t time.Time) *JobWrapper { w.job.Spec.Deadline = t.UTC(); return w }

// Gang makes the job a gang of n tasks.
func (w *JobWrapper) Gang(n int) *JobWrapper { w.job.Spec.GangSize = n; return w }

// Checkpointable marks the job as able to checkpoint at the given cost.
func (w *JobWrapper) Checkpointable(cost time.Duration) *JobWrapper {
	w.job.Spec.Checkpointable, w.job.Spec.CheckpointCost = true, cost
	return w
}

// Label sets a label.
func (w *JobWrapper) Label(k, v string) *JobWrapper {
	if w.job.Spec.Labels == nil {
		w.job.Spec.Labels = map[string]string{}
	}
	w.job.Spec.Labels[k] = v
	return w
}

// Models restricts the GPU models the job may use.
func (w *JobWrapper) Models(m ...string) *JobWrapper { w.job.Spec.GPUModels = m; return w }

// Ran makes the job a finished record that ran for d after starting at start.
func (w *JobWrapper) Ran(start time.Time, d time.Duration, state cluster.JobState) *JobWrapper {
	w.job.State, w.job.Attempts = state, 1
	w.job.StartTime, w.job.EndTime = start.UTC(), start.Add(d).UTC()
	w.job.Outcome.RunTime = d
	return w
}

// Obj returns the job.
func (w *JobWrapper) Obj() cluster.Job { return w.job }

// NodeWrapper builds a cluster.Node.
type NodeWrapper struct{ node cluster.Node }

// Node starts a ready node without GPUs.
func Node(name string) *NodeWrapper {
	return &NodeWrapper{node: cluster.Node{Name: name, State: cluster.NodeReady, CPUMilli: 64000, MemoryBytes: 512 << 30}}
}

// GPUs gives the node n GPUs of a model with the catalog's defaults.
func (w *NodeWrapper) GPUs(n int, model string) *NodeWrapper {
	w.node.GPUs = make([]cluster.GPU, n)
	for i := range w.node.GPUs {
		w.node.GPUs[i] = cluster.NewGPU(i, model)
	}
	return w
}

// NVLink puts the listed GPUs in one NVLink domain.
func (w *NodeWrapper) NVLink(domain string, gpus ...int) *NodeWrapper {
	for _, i := range gpus {
		w.node.GPUs[i].NVLinkDomain = domain
	}
	return w
}

// Rack sets the rack.
func (w *NodeWrapper) Rack(r string) *NodeWrapper { w.node.Topology.Rack = r; return w }

// Leaf sets the network leaf.
func (w *NodeWrapper) Leaf(l string) *NodeWrapper { w.node.Topology.Leaf = l; return w }

// State sets the node state.
func (w *NodeWrapper) State(s cluster.NodeState) *NodeWrapper { w.node.State = s; return w }

// Obj returns the node.
func (w *NodeWrapper) Obj() cluster.Node { return w.node }

// Fleet returns a fleet of the nodes with one tenant "t1" of weight 1.
func Fleet(nodes ...cluster.Node) *cluster.Fleet {
	return &cluster.Fleet{Name: "test", Nodes: nodes, Tenants: []cluster.Tenant{{Name: "t1", Weight: 1}}}
}
