package control

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/cluster/clustertest"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/service"
	"github.com/prescient-sched/prescient/store"
)

// t0 is when test clocks start.
var t0 = time.Date(2026, 6, 1, 8, 0, 0, 0, time.UTC)

// fakeClock is a settable clock, safe for concurrent use.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *fakeClock) Advance(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.now = c.now.Add(d) }

// p50Label is the label the test forecaster reads a job's P50 (seconds)
// from; without it a job's P50 is 10 minutes. Its P90 is 1.5 × P50.
const p50Label = "p50_s"

type labelForecaster struct{}

func (labelForecaster) Forecast(_ context.Context, jobs []*cluster.Job) ([]executor.Forecast, error) {
	out := make([]executor.Forecast, len(jobs))
	for i, j := range jobs {
		p50 := 10 * time.Minute
		if s, ok := j.Spec.Labels[p50Label]; ok {
			v, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return nil, fmt.Errorf("job %s: label %s: %w", j.ID, p50Label, err)
			}
			p50 = time.Duration(v * float64(time.Second))
		}
		out[i] = executor.Forecast{Job: j.ID, DurationP50: p50, DurationP90: p50 * 3 / 2, Source: "label"}
	}
	return out, nil
}

// call is one request a fakeBackend got.
type call struct {
	kind    string // start, checkpoint, stop
	job     cluster.JobID
	attempt int
	a       executor.Assignment
}

// fakeBackend records what it is asked and lets the test send events.
type fakeBackend struct {
	mu     sync.Mutex
	calls  []call
	events chan executor.JobEvent
	// onStart, when set, answers Start instead of recording it.
	onStart func(a executor.Assignment) error
	// waiting are the jobs the backend cannot start yet (executor.Waiter).
	waiting map[cluster.JobID]bool
}

func (b *fakeBackend) Waiting(id cluster.JobID) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.waiting[id]
}

func newFakeBackend() *fakeBackend { return &fakeBackend{events: make(chan executor.JobEvent, 100)} }

func (b *fakeBackend) Start(_ context.Context, a executor.Assignment) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.onStart != nil {
		if err := b.onStart(a); err != nil {
			return err
		}
	}
	b.calls = append(b.calls, call{kind: "start", job: a.Job.ID, attempt: a.Attempt, a: a})
	return nil
}

func (b *fakeBackend) Checkpoint(_ context.Context, job cluster.JobID) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls = append(b.calls, call{kind: "checkpoint", job: job})
	return nil
}

func (b *fakeBackend) Stop(_ context.Context, job cluster.JobID, _ time.Duration) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls = append(b.calls, call{kind: "stop", job: job})
	return nil
}

func (b *fakeBackend) Watch(context.Context) (<-chan executor.JobEvent, error) { return b.events, nil }

// of returns the calls of one kind.
func (b *fakeBackend) of(kind string) []call {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []call
	for _, c := range b.calls {
		if c.kind == kind {
			out = append(out, c)
		}
	}
	return out
}

// env is a Plane under test on a real store in a temporary directory, a
// fake clock and a fake backend; the test drives its steps.
type env struct {
	t       testing.TB
	ctx     context.Context
	clock   *fakeClock
	path    string
	store   *store.Store
	backend *fakeBackend
	fleet   *cluster.Fleet
	plane   *Plane
	mod     func(*Config)
}

func newEnv(t testing.TB, fleet *cluster.Fleet, mod func(*Config)) *env {
	t.Helper()
	e := &env{t: t, ctx: context.Background(), clock: &fakeClock{now: t0}, path: filepath.Join(t.TempDir(), "prescient.db"),
		backend: newFakeBackend(), fleet: fleet, mod: mod}
	e.open()
	return e
}

// open opens the store and builds a Plane on it and recovers, as a
// restarted process does.
func (e *env) open() {
	e.t.Helper()
	st, err := store.Open(e.ctx, e.path, store.WithClock(e.clock.Now))
	if err != nil {
		e.t.Fatal(err)
	}
	e.store = st
	e.t.Cleanup(func() { _ = st.Close() })
	cfg := Config{Store: st, Nodes: service.StaticFleet{Fleet: e.fleet}, Tenants: e.fleet.Tenants, Backend: e.backend,
		Forecaster: labelForecaster{}, Mode: service.ModeAutopilot, Policy: "prescient", Clock: e.clock.Now,
		WhatIfBudget: time.Minute} // what-ifs are compared with full simulations, on however loaded a machine
	if e.mod != nil {
		e.mod(&cfg)
	}
	if e.plane, err = New(cfg); err != nil {
		e.t.Fatal(err)
	}
	if err := e.plane.recover(e.ctx); err != nil {
		e.t.Fatal(err)
	}
}

// restart closes the store and opens a new Plane on the same file.
func (e *env) restart() {
	e.t.Helper()
	if err := e.store.Close(); err != nil {
		e.t.Fatal(err)
	}
	e.open()
}

func (e *env) submit(id string, spec cluster.JobSpec) service.JobStatus {
	e.t.Helper()
	st, err := e.plane.Submit(e.ctx, service.SubmitRequest{ID: cluster.JobID(id), Spec: spec})
	if err != nil {
		e.t.Fatalf("Submit(%s): %v", id, err)
	}
	return st
}

func (e *env) job(id string) cluster.Job {
	e.t.Helper()
	j, err := e.store.GetJob(e.ctx, cluster.JobID(id))
	if err != nil {
		e.t.Fatal(err)
	}
	return j
}

// event applies a backend event.
func (e *env) event(ev executor.JobEvent) {
	if ev.Time.IsZero() {
		ev.Time = e.clock.Now()
	}
	e.plane.apply(e.ctx, ev)
}

// eventTypes lists the store's event types of a job.
func (e *env) eventTypes(id string) []store.EventType {
	e.t.Helper()
	evs, err := e.store.Events(e.ctx, cluster.JobID(id))
	if err != nil {
		e.t.Fatal(err)
	}
	out := make([]store.EventType, len(evs))
	for i, ev := range evs {
		out[i] = ev.Type
	}
	return out
}

func (e *env) wantEvents(id string, want ...store.EventType) {
	e.t.Helper()
	if got := e.eventTypes(id); !slices.Equal(got, want) {
		e.t.Errorf("events of %s: %v, want %v", id, got, want)
	}
}

// spec is a standard job of tenant t1 on n GPUs with a P50 of p50.
func spec(gpus int, p50 time.Duration) cluster.JobSpec {
	return cluster.JobSpec{Tenant: "t1", Tier: cluster.TierStandard, GPUs: gpus, GPUMilli: cluster.MilliGPU,
		Labels: map[string]string{p50Label: strconv.FormatFloat(p50.Seconds(), 'f', -1, 64)}}
}

// fleetOf is n nodes of g A100 GPUs each.
func fleetOf(n, g int) *cluster.Fleet {
	var nodes []cluster.Node
	for i := range n {
		nodes = append(nodes, clustertest.Node(fmt.Sprintf("n%d", i)).GPUs(g, "A100-80GB").Obj())
	}
	return clustertest.Fleet(nodes...)
}

// recordingNotifier keeps the lifecycle events it hears.
type recordingNotifier struct {
	mu     sync.Mutex
	events []service.LifecycleEvent
}

func (n *recordingNotifier) Notify(_ context.Context, e service.LifecycleEvent) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.events = append(n.events, e)
}

func (n *recordingNotifier) types() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]string, len(n.events))
	for i, e := range n.events {
		out[i] = e.Type
	}
	return out
}
