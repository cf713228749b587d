package cluster_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/cluster/clustertest"
)

func TestTiersAreOrderedAndNamed(t *testing.T) {
	tiers := cluster.Tiers()
	for i := 1; i < len(tiers); i++ {
		if tiers[i] >= tiers[i-1] {
			t.Fatalf("Tiers() not from most to least important: %v", tiers)
		}
	}
	for _, tier := range tiers {
		b, err := tier.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back cluster.Tier
		if err := back.UnmarshalText(b); err != nil || back != tier {
			t.Fatalf("tier %v round-trips to %v, %v", tier, back, err)
		}
	}
	if _, err := cluster.ParseTier("urgent"); err == nil || !strings.Contains(err.Error(), "production") {
		t.Fatalf("ParseTier(urgent) = %v; want an error listing the tiers", err)
	}
	if got, _ := cluster.ParseTier(" Production "); got != cluster.TierProduction {
		t.Fatalf("ParseTier ignores case and space: got %v", got)
	}
}

func TestJobStateMachine(t *testing.T) {
	allowed := map[[2]cluster.JobState]bool{}
	for _, tr := range [][2]cluster.JobState{
		{cluster.StateQueued, cluster.StateRunning}, {cluster.StateQueued, cluster.StateCancelled}, {cluster.StateQueued, cluster.StateFailed},
		{cluster.StateRunning, cluster.StateCheckpointing}, {cluster.StateRunning, cluster.StateQueued}, {cluster.StateRunning, cluster.StateSucceeded},
		{cluster.StateRunning, cluster.StateFailed}, {cluster.StateRunning, cluster.StateCancelled},
		{cluster.StateCheckpointing, cluster.StateRunning}, {cluster.StateCheckpointing, cluster.StateQueued}, {cluster.StateCheckpointing, cluster.StateSucceeded},
		{cluster.StateCheckpointing, cluster.StateFailed}, {cluster.StateCheckpointing, cluster.StateCancelled},
	} {
		allowed[tr] = true
	}
	for _, from := range cluster.JobStates() {
		for _, to := range cluster.JobStates() {
			j := clustertest.Job("j").Obj()
			j.State = from
			err := j.Transition(to, clustertest.Epoch)
			if allowed[[2]cluster.JobState{from, to}] {
				if err != nil || j.State != to {
					t.Errorf("%s -> %s: %v; want allowed", from, to, err)
				}
				continue
			}
			if !errors.Is(err, cluster.ErrInvalidTransition) || j.State != from {
				t.Errorf("%s -> %s: err %v, state %s; want ErrInvalidTransition and state unchanged", from, to, err, j.State)
			}
		}
	}
}

func TestPreemptedJobGoesBackToQueueWithAttemptsAndCheckpoint(t *testing.T) {
	t0 := clustertest.Epoch
	j := clustertest.Job("j").GPUs(4).Checkpointable(time.Minute).Obj()
	must(t, j.Transition(cluster.StateRunning, t0))
	must(t, j.Transition(cluster.StateCheckpointing, t0.Add(50*time.Minute)))
	must(t, j.Checkpointed(cluster.Checkpoint{Time: t0.Add(51 * time.Minute), Step: 1200, Path: "/ckpt/1200"}))
	if j.State != cluster.StateRunning {
		t.Fatalf("after the checkpoint landed the job is %s, want running", j.State)
	}
	if got := j.WorkSinceCheckpoint(t0.Add(61 * time.Minute)); got != 40*time.Minute {
		t.Fatalf("work since checkpoint = %s, want 10 min x 4 GPUs = 40m", got)
	}
	must(t, j.Transition(cluster.StateQueued, t0.Add(60*time.Minute)))
	if j.Attempts != 1 || j.LastCheckpoint == nil || j.LastCheckpoint.Step != 1200 || !j.StartTime.IsZero() {
		t.Fatalf("requeued job: attempts %d, checkpoint %+v, start %v; want 1, step 1200, zero", j.Attempts, j.LastCheckpoint, j.StartTime)
	}
	must(t, j.Transition(cluster.StateRunning, t0.Add(90*time.Minute)))
	must(t, j.Transition(cluster.StateSucceeded, t0.Add(120*time.Minute)))
	if j.Attempts != 2 || j.Outcome.RunTime != 90*time.Minute || !j.EndTime.Equal(t0.Add(120*time.Minute)) {
		t.Fatalf("finished job: attempts %d, run time %s, end %v; want 2, 1h30m, t0+2h", j.Attempts, j.Outcome.RunTime, j.EndTime)
	}
	if err := j.Checkpointed(cluster.Checkpoint{Time: t0}); !errors.Is(err, cluster.ErrInvalidTransition) {
		t.Fatalf("checkpoint after the end: %v; want ErrInvalidTransition", err)
	}
}

func TestJobSpecValidate(t *testing.T) {
	tests := []struct {
		name    string
		job     cluster.Job
		wantErr string
	}{
		{name: "whole-GPU job is valid", job: clustertest.Job("a").GPUs(8).Obj()},
		{name: "fractional job on one GPU is valid", job: clustertest.Job("a").Share(250).Obj()},
		{name: "CPU-only job is valid", job: clustertest.Job("a").GPUs(0).Obj()},
		{name: "fraction of several GPUs is rejected", job: func() cluster.Job { j := clustertest.Job("a").GPUs(2).Obj(); j.Spec.GPUMilli = 500; return j }(), wantErr: "gpu_milli"},
		{name: "share above a whole GPU is rejected", job: clustertest.Job("a").Share(1500).Obj(), wantErr: "gpu_milli"},
		{name: "negative GPUs are rejected", job: clustertest.Job("a").GPUs(-1).Obj(), wantErr: "gpus"},
		{name: "unknown tier is rejected", job: clustertest.Job("a").Tier(cluster.Tier(9)).Obj(), wantErr: "tier"},
		{name: "job without id is rejected", job: func() cluster.Job { j := clustertest.Job("a").Obj(); j.ID = ""; return j }(), wantErr: "id"},
		{name: "end before start is rejected", job: func() cluster.Job {
			j := clustertest.Job("a").Ran(clustertest.Epoch, time.Hour, cluster.StateSucceeded).Obj()
			j.EndTime = j.StartTime.Add(-time.Second)
			return j
		}(), wantErr: "end_time"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.job.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Validate() = %v, want an error naming %q", err, tt.wantErr)
			}
		})
	}
}

func TestAllowsModel(t *testing.T) {
	any := clustertest.Job("a").Obj().Spec
	v100 := clustertest.Job("b").Models("V100", "V100M32").Obj().Spec
	if !any.AllowsModel("T4") || !v100.AllowsModel("V100M32") || v100.AllowsModel("T4") {
		t.Fatal("AllowsModel: an empty list allows any model, a list only its models")
	}
	mig := clustertest.Job("c").Models(cluster.MIGInstanceModel("1g.10gb")).Obj().Spec
	if any.AllowsModel("MIG-1g.10gb") || !mig.AllowsModel("MIG-1g.10gb") || mig.AllowsModel("MIG-2g.20gb") {
		t.Fatal("AllowsModel: a MIG instance takes only the jobs that name its profile")
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestCloneSharesNothing(t *testing.T) {
	j := clustertest.Job("a").Label("framework", "jax").Models("H100").Obj()
	j.LastCheckpoint = &cluster.Checkpoint{Step: 1}
	c := j.Clone()
	c.Spec.Labels["framework"] = "torch"
	c.Spec.GPUModels[0] = "T4"
	c.LastCheckpoint.Step = 2
	if j.Spec.Labels["framework"] != "jax" || j.Spec.GPUModels[0] != "H100" || j.LastCheckpoint.Step != 1 {
		t.Fatalf("changing the clone changed the original: %+v", j)
	}
}

func TestDataSourceCloneAndWarmOn(t *testing.T) {
	j := cluster.Job{ID: "j", Spec: cluster.JobSpec{Data: &cluster.DataSource{Name: "d", Bytes: 1, Nodes: []string{"n1"}, Racks: []string{"r1"}}}}
	c := j.Clone()
	c.Spec.Data.Nodes[0] = "changed"
	if j.Spec.Data.Nodes[0] != "n1" || c.Spec.Data == j.Spec.Data {
		t.Error("Clone shares the data source")
	}
	d := j.Spec.Data
	if !d.WarmOn(&cluster.Node{Name: "n1"}) || !d.WarmOn(&cluster.Node{Name: "x", Topology: cluster.Topology{Rack: "r1"}}) || d.WarmOn(&cluster.Node{Name: "x"}) {
		t.Error("WarmOn: want the node n1 and any node of rack r1 only")
	}
	var none *cluster.DataSource
	if none.WarmOn(&cluster.Node{Name: "n1"}) {
		t.Error("no data source is warm somewhere")
	}
	err := (cluster.JobSpec{Tier: cluster.DefaultTier, Data: &cluster.DataSource{Bytes: -1, Nodes: []string{"n1", ""}, Racks: []string{""}}}).Validate()
	for _, field := range []string{"data.name", "data.bytes", "data.nodes[1]", "data.racks[0]"} {
		if err == nil || !strings.Contains(err.Error(), field+": ") {
			t.Errorf("a nameless dataset of negative size with nameless places: %v, want %s named", err, field)
		}
	}
}

func TestTasksSplitAJobIntoPerNodeTasks(t *testing.T) {
	for _, tc := range []struct {
		name            string
		gpus, gang, per int
		want            []int
		ok              bool
	}{
		{"a job that fits a node is one task", 4, 0, 8, []int{4}, true},
		{"a job larger than a node takes whole nodes and a remainder", 20, 0, 8, []int{8, 8, 4}, true},
		{"a gang is GangSize equal tasks", 12, 3, 8, []int{4, 4, 4}, true},
		{"a gang of unequal tasks does not split", 10, 3, 8, nil, false},
		{"a gang whose task is larger than a node does not split", 18, 2, 8, nil, false},
		{"no node has GPUs", 1, 0, 0, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := cluster.JobSpec{GPUs: tc.gpus, GangSize: tc.gang}.Tasks(tc.per)
			if ok != tc.ok || !slices.Equal(got, tc.want) {
				t.Errorf("Tasks(%d) = %v, %v; want %v, %v", tc.per, got, ok, tc.want, tc.ok)
			}
		})
	}
}
