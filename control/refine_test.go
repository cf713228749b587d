package control

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/collector"
	"github.com/prescient-sched/prescient/collector/nvml"
	"github.com/prescient-sched/prescient/control/telemetry"
	"github.com/prescient-sched/prescient/datasets"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/models"
	"github.com/prescient-sched/prescient/predictor"
)

// factorRefiner forecasts a P90 of factor × the peak so far, refuses a
// series shorter than 10 samples as the peak model does, and records the
// series it is given. With none set it has no model.
type factorRefiner struct {
	mu     sync.Mutex
	factor float64
	none   bool
	seen   []datasets.Series
}

func (r *factorRefiner) RefinePeak(_ context.Context, s datasets.Series) (predictor.PeakForecast, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.none {
		return predictor.PeakForecast{}, predictor.ErrNoPeakModel
	}
	r.seen = append(r.seen, s)
	if len(s.Values) < 10 {
		return predictor.PeakForecast{}, fmt.Errorf("series %s: %w", s.ID, models.ErrTooLittleSeen)
	}
	peak := 0.0
	for _, v := range s.Values {
		peak = max(peak, v)
	}
	return predictor.PeakForecast{PeakSoFarBytes: peak, P50Bytes: peak * r.factor, P90Bytes: peak * r.factor, ModelVersion: "peak:1"}, nil
}

func (r *factorRefiner) calls() int { r.mu.Lock(); defer r.mu.Unlock(); return len(r.seen) }

func (r *factorRefiner) set(factor float64, none bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.factor, r.none = factor, none
}

const gib = 1 << 30

// recordMemory writes one process sample a minute of job on GPU uuid,
// from from for n minutes, holding gibAt(i) GiB at minute i.
func recordMemory(t *testing.T, e *env, job, uuid string, from time.Time, n int, gibAt func(i int) float64) {
	t.Helper()
	sink := collector.NewEmbeddedSink(e.store)
	var batch []collector.Sample
	for i := range n {
		used := uint64(gibAt(i) * gib)
		batch = append(batch, collector.Sample{Time: from.Add(time.Duration(i) * time.Minute), Node: "n0",
			DeviceInfo:   nvml.DeviceInfo{UUID: uuid, Model: "A100-80GB", MemoryTotalBytes: 80 * gib},
			DeviceSample: nvml.DeviceSample{MemUsedBytes: used, MemTotalBytes: 80 * gib},
			Processes:    []collector.ProcessSample{{PID: 4242, JobID: job, MemUsedBytes: used}}})
	}
	if err := sink.Write(e.ctx, batch); err != nil {
		t.Fatal(err)
	}
}

// runningMemory is the P90 memory the planner is given for a running job
// once the refinement the live state started (if any) has finished.
func runningMemory(t *testing.T, e *env, id cluster.JobID) int64 {
	t.Helper()
	// A refinement an earlier cycle started may still run on what was
	// there then: let it end, so that the read below starts a fresh one.
	e.plane.refiner.Wait() // an earlier refinement
	if _, err := e.plane.liveState(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.plane.refiner.Wait()
	lv, err := e.plane.liveState(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range lv.In.Running {
		if r.Job.ID == id {
			return r.Forecast.MemoryP90Bytes
		}
	}
	t.Fatalf("job %s is not running", id)
	return 0
}

func TestRunningJobsMemoryIsRefinedFromTheirTelemetry(t *testing.T) {
	ref := &factorRefiner{factor: 1.5}
	e := newEnv(t, fleetOf(1, 8), func(c *Config) {
		c.Telemetry, c.PeakRefiner = collector.NewEmbeddedSink(c.Store), ref
	})
	e.submit("j1", spec(1, 2*time.Hour))
	e.plane.cycle(e.ctx)
	e.event(executor.JobEvent{Type: executor.JobStarted, Job: "j1", Attempt: 1, Node: "n0"})
	// 20 GiB rising by 1 GiB a minute over its first 15 minutes.
	recordMemory(t, e, "j1", "GPU-j1", t0, 15, func(i int) float64 { return 20 + float64(i) })

	e.clock.Advance(5 * time.Minute)
	if m := runningMemory(t, e, "j1"); m != 0 || ref.calls() != 0 {
		t.Fatalf("after 5 minutes: memory %d, %d refinements; want none before 10 minutes", m, ref.calls())
	}
	e.clock.Advance(10 * time.Minute)
	if m, want := runningMemory(t, e, "j1"), int64(1.5*34*gib); m != want || ref.calls() != 1 {
		t.Fatalf("after 15 minutes: memory %d after %d refinements; want %d (1.5 × the 34 GiB peak so far) after 1", m, ref.calls(), want)
	}
	if s := ref.seen[0]; len(s.Values) != 15 || s.ID != "j1" || !s.Times[0].Equal(t0) {
		t.Errorf("the refiner saw %d samples of %s from %s; want 15 of j1 from %s", len(s.Values), s.ID, s.Times[0], t0)
	}
	if st, err := e.plane.Job(e.ctx, "j1"); err != nil || st.Forecast == nil || st.Forecast.MemoryP90RefinedBytes != int64(1.5*34*gib) {
		t.Errorf("the API's forecast %+v (%v); want the refined P90 shown", st.Forecast, err)
	}
	e.clock.Advance(time.Minute)
	if m := runningMemory(t, e, "j1"); m != int64(1.5*34*gib) || ref.calls() != 1 {
		t.Errorf("a minute later: memory %d, %d refinements; want the refinement kept until RefineEvery", m, ref.calls())
	}
	// Five minutes on, only the new samples are read (minutes 15 to 20 of
	// 40 to 45 GiB; minute 21's window is not complete yet), and a
	// forecast below what the job holds now is raised to it.
	recordMemory(t, e, "j1", "GPU-j1", t0.Add(15*time.Minute), 7, func(i int) float64 { return 40 + float64(i) })
	ref.set(0.5, false)
	e.clock.Advance(telemetry.DefaultRefineEvery)
	if m := runningMemory(t, e, "j1"); m != 45*gib || ref.calls() != 2 {
		t.Errorf("with a P90 below the current use: memory %d after %d refinements; want the 45 GiB held", m, ref.calls())
	}
	if s := ref.seen[1]; len(s.Values) != 21 || !slices.IsSortedFunc(s.Times, time.Time.Compare) || s.Values[20] != 45*gib {
		t.Errorf("second refinement saw %d samples (sorted %v), last %v; want minutes 0 to 20 once each",
			len(s.Values), slices.IsSortedFunc(s.Times, time.Time.Compare), s.Values[len(s.Values)-1])
	}
	// Without a published peak model the forecast from submission stands.
	ref.set(0, true)
	e.clock.Advance(telemetry.DefaultRefineEvery)
	if m := runningMemory(t, e, "j1"); m != 0 {
		t.Errorf("without a peak model: memory %d, want the forecast from submission (none)", m)
	}
}

// The refined memory reaches placement: a share that would fit beside a
// running share by its requested fraction waits once the running share's
// telemetry says it will need most of the GPU.
func TestRefinedMemoryKeepsASharedGPUFromOvercommitting(t *testing.T) {
	for _, tc := range []struct {
		name    string
		factor  float64
		started bool
	}{
		{"the running share forecast to stay small leaves room", 1.0, true},
		{"the running share forecast to grow to 60 GiB leaves none", 2.0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ref := &factorRefiner{factor: tc.factor}
			fleet := fleetOf(1, 1)
			fleet.Nodes[0].GPUs[0].MemoryBytes = 80 * gib
			e := newEnv(t, fleet, func(c *Config) {
				c.Telemetry, c.PeakRefiner = collector.NewEmbeddedSink(c.Store), ref
				c.Placement = "prescient" // checks forecast memory on shared GPUs
			})
			half := spec(1, 2*time.Hour)
			half.GPUMilli = cluster.MilliGPU / 2
			e.submit("j1", half)
			e.plane.cycle(e.ctx)
			e.event(executor.JobEvent{Type: executor.JobStarted, Job: "j1", Attempt: 1, Node: "n0"})
			recordMemory(t, e, "j1", "GPU-j1", t0, 15, func(int) float64 { return 30 })
			e.clock.Advance(15 * time.Minute)
			runningMemory(t, e, "j1") // refines j1 before j2 is planned
			e.submit("j2", half)
			e.plane.cycle(e.ctx)
			starts := e.backend.of("start")
			if got := len(starts) == 2; got != tc.started {
				t.Fatalf("%d starts (refined P90 of j1: %d GiB); want j2 started: %v", len(starts), runningMemory(t, e, "j1")/gib, tc.started)
			}
		})
	}
}

func TestRefineEveryMustNotBeNegative(t *testing.T) {
	c := Config{RefineEvery: -time.Minute}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "RefineEvery -1m0s must not be negative") {
		t.Fatalf("Validate: %v", err)
	}
}

// countingMemory counts the queries it passes on.
type countingMemory struct {
	collector.JobMemoryStore
	mu      sync.Mutex
	queries []collector.JobMemoryQuery
}

func (c *countingMemory) JobMemory(ctx context.Context, q collector.JobMemoryQuery) ([]collector.JobMemorySeries, error) {
	c.mu.Lock()
	c.queries = append(c.queries, q)
	c.mu.Unlock()
	return c.JobMemoryStore.JobMemory(ctx, q)
}

// Telemetry's TelemetryStore half, so that the plane sees both.
func (c *countingMemory) Query(ctx context.Context, q collector.SeriesQuery) ([]collector.Series, error) {
	return c.JobMemoryStore.(collector.TelemetryStore).Query(ctx, q)
}

// A long history (the first refinement after a restart) is read in chunks
// of refineChunk, each sample once.
func TestALongMemoryHistoryIsReadInChunks(t *testing.T) {
	ref := &factorRefiner{factor: 1.5}
	var mem *countingMemory
	e := newEnv(t, fleetOf(1, 8), func(c *Config) {
		mem = &countingMemory{JobMemoryStore: collector.NewEmbeddedSink(c.Store)}
		c.Telemetry, c.PeakRefiner = mem, ref
	})
	e.submit("j1", spec(1, 4*time.Hour))
	e.plane.cycle(e.ctx)
	e.event(executor.JobEvent{Type: executor.JobStarted, Job: "j1", Attempt: 1, Node: "n0"})
	recordMemory(t, e, "j1", "GPU-j1", t0, 75, func(i int) float64 { return 10 + float64(i%7) })
	e.clock.Advance(75 * time.Minute)
	if m := runningMemory(t, e, "j1"); m != int64(1.5*16*gib) {
		t.Fatalf("memory %d, want %d", m, int64(1.5*16*gib))
	}
	s := ref.seen[0]
	if len(s.Values) != 75 || !slices.IsSortedFunc(s.Times, time.Time.Compare) {
		t.Errorf("the refiner saw %d samples; want 75 once each, in order", len(s.Values))
	}
	mem.mu.Lock()
	defer mem.mu.Unlock()
	if len(mem.queries) != 3 || mem.queries[2].End.Sub(mem.queries[2].Start) != 15*time.Minute {
		t.Errorf("%d queries (%+v); want 30, 30 and 15 minutes", len(mem.queries), mem.queries)
	}
}
