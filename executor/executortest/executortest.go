package executortest

import (
	"context"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/cluster/clustertest"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/executor/policies"
)

// Scenario is one planning situation.
type Scenario struct {
	t       testing.TB
	policy  string
	opts    policies.Options
	now     time.Time
	nodes   []cluster.Node
	tenants []cluster.Tenant
	queue   []*executor.JobView
	running []*RunningWrapper
	usage   map[string]time.Duration
	mtbf    time.Duration
}

// NewScenario starts a scenario for the named policy at clustertest.Epoch.
func NewScenario(t testing.TB, policy string) *Scenario {
	return &Scenario{t: t, policy: policy, now: clustertest.Epoch, opts: policies.Options{Checkpoint: "none"}}
}

// At sets the planning time.
func (s *Scenario) At(now time.Time) *Scenario { s.now = now; return s }

// Nodes adds nodes.
func (s *Scenario) Nodes(n ...cluster.Node) *Scenario { s.nodes = append(s.nodes, n...); return s }

// Tenants sets the tenants.
func (s *Scenario) Tenants(t ...cluster.Tenant) *Scenario { s.tenants = t; return s }

// Checkpoint sets the checkpoint option of the policy.
func (s *Scenario) Checkpoint(spec string) *Scenario { s.opts.Checkpoint = spec; return s }

// NodeMTBF sets the expected node MTBF.
func (s *Scenario) NodeMTBF(d time.Duration) *Scenario { s.mtbf = d; return s }

// Usage sets a tenant's decayed GPU-time.
func (s *Scenario) Usage(tenant string, d time.Duration) *Scenario {
	if s.usage == nil {
		s.usage = map[string]time.Duration{}
	}
	s.usage[tenant] = d
	return s
}

// QueuedWrapper builds a queued job's view.
type QueuedWrapper struct{ v *executor.JobView }

// Queued adds a queued job (queued since its submit time; forecast 1h/1h).
func (s *Scenario) Queued(j cluster.Job) *QueuedWrapper {
	job := j
	v := &executor.JobView{Job: &job, QueuedSince: j.SubmitTime,
		Forecast: executor.Forecast{Job: j.ID, DurationP50: time.Hour, DurationP90: time.Hour, Source: "test"}}
	s.queue = append(s.queue, v)
	return &QueuedWrapper{v: v}
}

// Forecast sets the P50 and P90.
func (w *QueuedWrapper) Forecast(p50, p90 time.Duration) *QueuedWrapper {
	w.v.Forecast.DurationP50, w.v.Forecast.DurationP90 = p50, p90
	return w
}

// Since sets when it entered the queue.
// Unplaceable marks the job as no node may take, for why.
func (w *QueuedWrapper) Unplaceable(why string) *QueuedWrapper { w.v.Unplaceable = why; return w }

func (w *QueuedWrapper) Since(t time.Time) *QueuedWrapper { w.v.QueuedSince = t; return w }

// Attained sets the GPU-time it already had.
func (w *QueuedWrapper) Attained(d time.Duration) *QueuedWrapper { w.v.AttainedGPU = d; return w }

// LastRan says how long its last attempt ran (it was stopped and queued
// again).
func (w *QueuedWrapper) LastRan(d time.Duration) *QueuedWrapper { w.v.LastRun = d; return w }

// RunningWrapper builds a running job.
type RunningWrapper struct {
	s    *Scenario
	r    *executor.RunningJob
	gpus map[string][]int
	ran  time.Duration
}

// Running adds a running job (forecast 1h/1h, started at the planning time).
func (s *Scenario) Running(j cluster.Job) *RunningWrapper {
	job := j
	job.State = cluster.StateRunning
	r := &executor.RunningJob{JobView: executor.JobView{Job: &job,
		Forecast: executor.Forecast{Job: j.ID, DurationP50: time.Hour, DurationP90: time.Hour, Source: "test"}}}
	w := &RunningWrapper{s: s, r: r, gpus: map[string][]int{}}
	s.running = append(s.running, w)
	return w
}

// On puts it on GPUs of a node.
func (w *RunningWrapper) On(node string, gpus ...int) *RunningWrapper {
	w.gpus[node] = append(w.gpus[node], gpus...)
	return w
}

// For says it has run for d (its progress, attained service and work since
// checkpoint follow, unless Checkpointed says otherwise).
func (w *RunningWrapper) For(d time.Duration) *RunningWrapper { w.ran = d; return w }

// Checkpointed says its last checkpoint was ago before now.
func (w *RunningWrapper) Checkpointed(ago time.Duration) *RunningWrapper {
	w.r.WorkSinceCheckpoint = ago * time.Duration(max(w.r.Job.Spec.GPUs, 1))
	return w
}

// Forecast sets the P50 and P90.
func (w *RunningWrapper) Forecast(p50, p90 time.Duration) *RunningWrapper {
	w.r.Forecast.DurationP50, w.r.Forecast.DurationP90 = p50, p90
	return w
}

// Stopping marks it as already told to stop.
func (w *RunningWrapper) Stopping() *RunningWrapper { w.r.Stopping = true; return w }

// Input builds the planner's input; running jobs' GPUs are allocated in the
// snapshot.
func (s *Scenario) Input() executor.PlanInput {
	fleet := clustertest.Fleet(s.nodes...)
	if s.tenants != nil {
		fleet.Tenants = s.tenants
	}
	snap := cluster.NewSnapshot(fleet, s.now)
	in := executor.PlanInput{Now: s.now, Cluster: snap, Queue: s.queue, UsageGPU: s.usage, NodeMTBF: s.mtbf}
	for _, w := range s.running {
		var allocs []cluster.Allocation
		for node, gpus := range w.gpus {
			for _, g := range gpus {
				allocs = append(allocs, cluster.Allocation{GPU: cluster.GPURef{Node: node, Index: g}, Milli: cluster.MilliGPU})
			}
		}
		if err := snap.Allocate(w.r.Job.ID, allocs); err != nil {
			s.t.Fatalf("scenario: running job %s: %v", w.r.Job.ID, err)
		}
		w.r.Allocations = snap.Allocations(w.r.Job.ID)
		w.r.Started = s.now.Add(-w.ran)
		w.r.Progress = w.ran
		w.r.AttainedGPU = w.ran * time.Duration(max(w.r.Job.Spec.GPUs, 1))
		if w.r.WorkSinceCheckpoint == 0 {
			w.r.WorkSinceCheckpoint = w.r.AttainedGPU
		}
		in.Running = append(in.Running, w.r)
	}
	in.Free = executor.NewCapacity(snap)
	return in
}

// Plan runs the policy's planner on the scenario and fails the test on an
// error.
func (s *Scenario) Plan() executor.Plan {
	s.t.Helper()
	pol, err := policies.New(s.policy, s.opts)
	if err != nil {
		s.t.Fatalf("scenario: %v", err)
	}
	p, err := executor.New(pol)
	if err != nil {
		s.t.Fatalf("scenario: %v", err)
	}
	plan, err := p.Plan(context.Background(), s.Input())
	if err != nil {
		s.t.Fatalf("scenario: plan: %v", err)
	}
	return plan
}

// Placed returns the jobs placed, in plan order.
func Placed(p executor.Plan) []cluster.JobID {
	var out []cluster.JobID
	for _, pl := range p.Placements {
		out = append(out, pl.Job)
	}
	return out
}

// Preempted returns the jobs preempted, in plan order.
func Preempted(p executor.Plan) []cluster.JobID {
	var out []cluster.JobID
	for _, pr := range p.Preemptions {
		out = append(out, pr.Job)
	}
	return out
}

// Nodes returns the distinct nodes of a placement, in allocation order.
func Nodes(pl executor.Placement) []string {
	var out []string
	for i, a := range pl.Allocations {
		if i == 0 || a.GPU.Node != pl.Allocations[i-1].GPU.Node {
			out = append(out, a.GPU.Node)
		}
	}
	return out
}
