package control

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/backend/simbackend"
	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/service"
	"github.com/prescient-sched/prescient/store"
)

// runPlane runs a Plane on the store file at path with the simulated
// backend until stop is called; stop waits for Run to return.
func runPlane(t *testing.T, path string, b *simbackend.Backend, fleet *cluster.Fleet) (*Plane, *store.Store, func()) {
	t.Helper()
	st, err := store.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(Config{Store: st, Nodes: service.StaticFleet{Fleet: fleet}, Tenants: fleet.Tenants, Backend: b,
		Forecaster: labelForecaster{}, Mode: service.ModeAutopilot, Policy: "fifo", Tick: 20 * time.Millisecond, Debounce: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	select {
	case <-p.Ready():
	case err := <-done:
		t.Fatalf("Run: %v", err)
	}
	return p, st, func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	}
}

// waitFor polls cond until it holds or 10 seconds pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestRunWithTheSimulatedBackendSurvivesARestart(t *testing.T) {
	fleet := fleetOf(1, 2)
	// The simulated jobs take the time their p50 label says, in
	// milliseconds of wall clock per second of label.
	b, err := simbackend.New(simbackend.Config{Duration: func(j *cluster.Job) time.Duration {
		v, _ := strconv.ParseFloat(j.Spec.Labels[p50Label], 64)
		return time.Duration(v) * time.Millisecond
	}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "prescient.db")
	p, st, stop := runPlane(t, path, b, fleet)
	ids := []cluster.JobID{"j0", "j1", "j2", "j3", "j4", "j5"}
	for i, id := range ids {
		if _, err := p.Submit(context.Background(), service.SubmitRequest{ID: id, Spec: spec(1, time.Duration(150+20*i)*time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "two jobs running", func() bool {
		jobs, _ := st.ListJobs(context.Background(), store.JobFilter{States: []cluster.JobState{cluster.StateRunning}})
		return len(jobs) == 2
	})
	stop() // the control plane goes away while jobs run; they keep running

	b.Rewatch()
	p, st, stop = runPlane(t, path, b, fleet)
	defer stop()
	b.Sync("n0") // the node reports what it runs, as an agent does on reconnect
	waitFor(t, "every job done", func() bool {
		jobs, _ := st.ListJobs(context.Background(), store.JobFilter{States: []cluster.JobState{cluster.StateSucceeded}})
		return len(jobs) == len(ids)
	})
	for _, id := range ids {
		j, err := p.Job(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if j.Attempts != 1 {
			t.Errorf("%s ran %d attempts, want 1", id, j.Attempts)
		}
	}
	starts := b.Starts()
	if len(starts) != len(ids) {
		t.Errorf("the backend started %v, want each job once", starts)
	}
	for _, s := range starts {
		if s.Attempt != 1 {
			t.Errorf("%s started as attempt %d", s.Job, s.Attempt)
		}
	}
	fs, err := p.Fleet(context.Background())
	if err != nil || fs.GPUs != 2 || fs.GPUsBusy != 0 || fs.Queued != 0 || fs.Running != 0 {
		t.Errorf("fleet at the end: %+v, %v", fs, err)
	}
}

var _ executor.Backend = (*simbackend.Backend)(nil)
