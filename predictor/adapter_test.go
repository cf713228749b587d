package predictor_test

import (
	"context"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/cluster/clustertest"
	"github.com/prescient-sched/prescient/predictor"
)

// fakeLearned records what it is asked and answers P50 = 1h, P90 = 2h,
// and a memory P90 when memP90 is set.
type fakeLearned struct {
	asked, observed []cluster.Job
	memP90          float64
}

func (f *fakeLearned) Forecast(_ context.Context, jobs []cluster.Job) ([]predictor.Forecast, error) {
	f.asked = append(f.asked, jobs...)
	out := make([]predictor.Forecast, len(jobs))
	for i, j := range jobs {
		p50, p90 := 3600.0, 7200.0
		out[i] = predictor.Forecast{JobID: j.ID, DurationP50S: &p50, DurationP90S: &p90, ModelVersion: "duration:1"}
		if f.memP90 > 0 {
			out[i].MemoryP90Bytes = &f.memP90
		}
	}
	return out, nil
}

func (f *fakeLearned) Observe(j cluster.Job) { f.observed = append(f.observed, j) }

// The replay's synthetic deadlines are a multiple of the true duration and
// its jobs are made checkpointable: neither may reach the model.
func TestAdapterSeesReplayedJobsAsTheTraceRecordedThem(t *testing.T) {
	orig := clustertest.Job("j1").GPUs(2).Obj()
	replayed := orig.Clone()
	replayed.Spec.Deadline = orig.SubmitTime.Add(4 * time.Hour)
	replayed.Spec.Checkpointable, replayed.Spec.CheckpointCost = true, time.Minute
	fake := &fakeLearned{}
	m := predictor.Adapter{P: fake, Trace: map[cluster.JobID]cluster.Job{orig.ID: orig}}
	fc, err := m.Forecast(t.Context(), []*cluster.Job{&replayed})
	if err != nil {
		t.Fatal(err)
	}
	if got := fake.asked[0].Spec; got.HasDeadline() || got.Checkpointable {
		t.Errorf("the model saw deadline %v, checkpointable %v", got.Deadline, got.Checkpointable)
	}
	if fc[0].DurationP50 != time.Hour || fc[0].DurationP90 != 2*time.Hour || fc[0].Source != "model duration:1" {
		t.Errorf("forecast %+v", fc[0])
	}
	m.Observe(replayed)
	if fake.observed[0].Spec.HasDeadline() {
		t.Error("the model observed the synthetic deadline")
	}
	if _, err := m.Forecast(t.Context(), []*cluster.Job{{ID: "unknown"}}); err == nil {
		t.Error("a job the trace lacks was forecast")
	}
}

// The memory model's P90 reaches the planner, which lets jobs share a GPU
// only when their footprints fit.
func TestAdapterCarriesTheMemoryP90(t *testing.T) {
	j := clustertest.Job("j1").Obj()
	for _, mem := range []float64{0, 12 << 30} {
		m := predictor.Adapter{P: &fakeLearned{memP90: mem}, Trace: map[cluster.JobID]cluster.Job{j.ID: j}}
		fc, err := m.Forecast(t.Context(), []*cluster.Job{&j})
		if err != nil {
			t.Fatal(err)
		}
		if fc[0].MemoryP90Bytes != int64(mem) {
			t.Errorf("memory model P90 %g: forecast carries %d bytes", mem, fc[0].MemoryP90Bytes)
		}
	}
}
