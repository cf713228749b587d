package whatif

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/cluster/clustertest"
	"github.com/prescient-sched/prescient/control/live"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/executor/policies"
	"github.com/prescient-sched/prescient/service"
)

// fakeSource is a plane of two idle nodes whose version and clock the
// test moves.
type fakeSource struct {
	mu      sync.Mutex
	version uint64
	now     time.Time
}

func (f *fakeSource) Live(context.Context) (*live.State, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	nodes := []cluster.Node{clustertest.Node("n0").GPUs(4, "A100").Obj(), clustertest.Node("n1").GPUs(4, "A100").Obj()}
	snap := cluster.NewSnapshot(&cluster.Fleet{Nodes: nodes}, f.now)
	return &live.State{Now: f.now, Nodes: nodes, Snap: snap, In: executor.PlanInput{Now: f.now, Cluster: snap}}, nil
}

func (f *fakeSource) Version() uint64 { f.mu.Lock(); defer f.mu.Unlock(); return f.version }

func (f *fakeSource) CheckSpec(spec cluster.JobSpec, _ string) (cluster.JobSpec, error) {
	return spec, nil
}

func (f *fakeSource) Policy(string) (executor.Policy, executor.Planner, error) {
	return executor.Policy{}, nil, errors.New("one policy only")
}

func (f *fakeSource) clock() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.now }

// What-ifs within a second of each other share one baseline while nothing
// changes; a change of the plane's state or a later clock takes a new one.
func TestWhatIfReusesTheBaselineUntilTheStateChanges(t *testing.T) {
	pol, err := policies.New("fifo", policies.Options{})
	if err != nil {
		t.Fatal(err)
	}
	planner, err := executor.New(pol)
	if err != nil {
		t.Fatal(err)
	}
	src := &fakeSource{now: time.Date(2026, 6, 1, 8, 0, 0, 0, time.UTC)}
	w := New(Deps{Source: src, Policy: pol, Planner: planner, Forecaster: known{}, Clock: src.clock, Log: slog.New(slog.DiscardHandler)})
	base := func() *baseline {
		t.Helper()
		if _, err := w.Answer(t.Context(), service.WhatIfRequest{}); err != nil {
			t.Fatal(err)
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.last
	}
	first := base()
	if again := base(); again != first {
		t.Error("a second what-if at the same state took a new baseline")
	}
	src.mu.Lock()
	src.version++
	src.mu.Unlock()
	changed := base()
	if changed == first {
		t.Fatal("the baseline was reused after the state changed")
	}
	src.mu.Lock()
	src.now = src.now.Add(2 * reuse)
	src.mu.Unlock()
	if base() == changed {
		t.Error("the baseline was reused after its time")
	}
}
