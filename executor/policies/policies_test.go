package policies

import (
	"strings"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
)

func TestCheckpointSpecs(t *testing.T) {
	for spec, ok := range map[string]bool{"none": true, "young-daly": true, "young-daly:45m": true, "fixed:1h": true,
		PrescientCheckpoint: true, "young-daly:x": false, "young-daly:0s": false, "young-daly:-1m": false,
		"none:1h": false, "fixed:": false, "fixed:0s": false, "fixed:30s": false, "young-daly:59s": false, "young-daly:1m": true, "daily": false, "": false} {
		_, err := CheckpointTimer(spec)
		if (err == nil) != ok {
			t.Errorf("CheckpointTimer(%q) error %v, want ok=%v", spec, err, ok)
		}
	}
}

func TestEveryPolicyAssembles(t *testing.T) {
	for _, name := range Names() {
		p, err := New(name, Options{})
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if p.Grace != DefaultGrace || Doc(name) == "" {
			t.Errorf("%s: grace %s, doc %q", name, p.Grace, Doc(name))
		}
	}
	if _, err := New("lottery", Options{}); err == nil || !strings.Contains(err.Error(), "lottery") {
		t.Errorf("unknown policy: error %v", err)
	}
	if p, _ := New("prescient", Options{}); p.Checkpoint == nil || p.Preemptor == nil {
		t.Error("prescient has no checkpoint timer or no preemptor")
	}
	if p, _ := New("prescient", Options{Grace: time.Minute}); p.Grace != time.Minute {
		t.Errorf("grace %s, want 1m", p.Grace)
	}
}

// FuzzCheckpointTimer: any --checkpoint value gives a timer or an error
// that names it, never a panic.
func FuzzCheckpointTimer(f *testing.F) {
	for _, s := range []string{"none", "young-daly", "young-daly:20m", "fixed:60m", "fixed:", "young-daly:", ":", "fixed:-1s", "young-daly:1ns", "none:x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		timer, err := CheckpointTimer(spec)
		if err != nil {
			if !strings.Contains(err.Error(), "checkpoint") {
				t.Errorf("error %q does not say what was wrong", err)
			}
			return
		}
		if (timer == nil) != (spec == "none") {
			t.Errorf("CheckpointTimer(%q) = %v", spec, timer)
		}
	})
}

func TestPreemptMinRunSetsHowLongThePrescientPolicySparesAJob(t *testing.T) {
	now := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	prod := &executor.JobView{Job: &cluster.Job{ID: "prod", Spec: cluster.JobSpec{Tier: cluster.TierProduction, GPUs: 4}}}
	batch := &executor.RunningJob{JobView: executor.JobView{Job: &cluster.Job{ID: "batch", Spec: cluster.JobSpec{Tier: cluster.TierBatch, GPUs: 4}}},
		Started: now.Add(-time.Minute)}
	victims := func(o Options) int {
		t.Helper()
		p, err := New("prescient", o)
		if err != nil {
			t.Fatal(err)
		}
		key := executor.Key{0, 0, 0}
		return len(p.Preemptor.Victims(prod, key, executor.NewCandidates([]*executor.RunningJob{batch}, []executor.Key{key}), &executor.OrderContext{Now: now}, 4))
	}
	if n := victims(Options{}); n != 0 {
		t.Errorf("default: a batch job that ran 1 minute was preempted (%d victims); the default spares it %s", n, DefaultPreemptMinRun)
	}
	if n := victims(Options{PreemptMinRun: 30 * time.Second}); n != 1 {
		t.Errorf("PreemptMinRun 30s: %d victims, want the batch job that ran 1 minute", n)
	}
	if _, err := New("prescient", Options{PreemptMinRun: -time.Second}); err == nil || !strings.Contains(err.Error(), "preempt min run") {
		t.Errorf("a negative PreemptMinRun: error %v", err)
	}
}
