package controltest_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/cluster/clustertest"
	"github.com/prescient-sched/prescient/control/controltest"
	"github.com/prescient-sched/prescient/service"
)

// clock is a settable test clock.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }
func newClock() *clock                   { return &clock{t: clustertest.Epoch} }
func spec(tenant string, gpus int) cluster.JobSpec {
	return cluster.JobSpec{Tenant: tenant, Tier: cluster.TierStandard, GPUs: gpus, GPUMilli: cluster.MilliGPU}
}

func newFake(c *clock) *controltest.Fake {
	return controltest.New(controltest.WithClock(c.now),
		controltest.WithNodes(clustertest.Node("n1").GPUs(4, "A100-SXM4-80GB").Obj()))
}

func TestSubmitIsIdempotentByIDAndConflictsOnAnotherSpec(t *testing.T) {
	ctx := context.Background()
	f := newFake(newClock())
	first, err := f.Submit(ctx, service.SubmitRequest{ID: "a", Spec: spec("t1", 1)})
	if err != nil || first.ID != "a" || first.State != cluster.StateQueued {
		t.Fatalf("Submit a = %+v, %v; want queued job a", first, err)
	}
	again, err := f.Submit(ctx, service.SubmitRequest{ID: "a", Spec: spec("t1", 1)})
	if err != nil || again.SubmitTime != first.SubmitTime {
		t.Fatalf("the same submission again = %+v, %v; want the stored job and no error", again, err)
	}
	if _, err := f.Submit(ctx, service.SubmitRequest{ID: "a", Spec: spec("t1", 2)}); !errors.Is(err, service.ErrConflict) {
		t.Fatalf("a with another spec: err %v, want ErrConflict", err)
	}
	if _, err := f.Submit(ctx, service.SubmitRequest{Spec: spec("t1", -1)}); !errors.Is(err, service.ErrInvalid) {
		t.Fatalf("negative GPUs: err %v, want ErrInvalid", err)
	}
	if _, err := f.Submit(ctx, service.SubmitRequest{Spec: spec("", 1)}); !errors.Is(err, service.ErrInvalid) {
		t.Fatalf("no tenant: err %v, want ErrInvalid", err)
	}
}

func TestJobsFilterByTenantStateAndLabelsNewestFirst(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	f := newFake(c)
	for i, tenant := range []string{"t1", "t2", "t1", "t1"} {
		s := spec(tenant, 1)
		if i%2 == 0 {
			s.Labels = map[string]string{"experiment": "e1"}
		}
		if _, err := f.Submit(ctx, service.SubmitRequest{ID: cluster.JobID([]string{"a", "b", "c", "d"}[i]), Spec: s}); err != nil {
			t.Fatal(err)
		}
		c.advance(time.Minute)
	}
	if err := f.Start("c", "n1", 0); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		q    service.JobQuery
		want []cluster.JobID
	}{
		{"all, newest first", service.JobQuery{}, []cluster.JobID{"d", "c", "b", "a"}},
		{"one tenant", service.JobQuery{Tenant: "t1"}, []cluster.JobID{"d", "c", "a"}},
		{"running only", service.JobQuery{States: []cluster.JobState{cluster.StateRunning}}, []cluster.JobID{"c"}},
		{"by label", service.JobQuery{Labels: map[string]string{"experiment": "e1"}}, []cluster.JobID{"c", "a"}},
		{"label with another value", service.JobQuery{Labels: map[string]string{"experiment": "e2"}}, nil},
		{"limit", service.JobQuery{Limit: 1}, []cluster.JobID{"d"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := f.Jobs(ctx, tt.q)
			if err != nil {
				t.Fatal(err)
			}
			var ids []cluster.JobID
			for _, j := range got {
				ids = append(ids, j.ID)
			}
			if len(ids) != len(tt.want) {
				t.Fatalf("got %v, want %v", ids, tt.want)
			}
			for i := range ids {
				if ids[i] != tt.want[i] {
					t.Fatalf("got %v, want %v", ids, tt.want)
				}
			}
		})
	}
}

func TestCancelReleasesGPUsAndRefusesFinishedJobs(t *testing.T) {
	ctx := context.Background()
	f := newFake(newClock())
	if _, err := f.Submit(ctx, service.SubmitRequest{ID: "a", Spec: spec("t1", 2)}); err != nil {
		t.Fatal(err)
	}
	if err := f.Start("a", "n1", 0, 1); err != nil {
		t.Fatal(err)
	}
	if fs, _ := f.Fleet(ctx); fs.GPUsBusy != 2 || fs.Running != 1 {
		t.Fatalf("fleet with a running 2-GPU job: busy %g running %d", fs.GPUsBusy, fs.Running)
	}
	st, err := f.Cancel(ctx, "a")
	if err != nil || st.State != cluster.StateCancelled || len(st.Placement) != 0 {
		t.Fatalf("Cancel = %+v, %v; want cancelled without placement", st, err)
	}
	if fs, _ := f.Fleet(ctx); fs.GPUsBusy != 0 {
		t.Fatalf("GPUs busy after cancel: %g", fs.GPUsBusy)
	}
	if _, err := f.Cancel(ctx, "a"); !errors.Is(err, service.ErrConflict) {
		t.Fatalf("cancel twice: %v, want ErrConflict", err)
	}
	if _, err := f.Cancel(ctx, "nope"); !errors.Is(err, service.ErrNotFound) {
		t.Fatalf("cancel unknown: %v, want ErrNotFound", err)
	}
}

func TestStartRefusesAGPUWithoutRoom(t *testing.T) {
	ctx := context.Background()
	f := newFake(newClock())
	for _, id := range []cluster.JobID{"a", "b"} {
		if _, err := f.Submit(ctx, service.SubmitRequest{ID: id, Spec: spec("t1", 1)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Start("a", "n1", 3); err != nil {
		t.Fatal(err)
	}
	if err := f.Start("b", "n1", 3); err == nil {
		t.Fatal("two whole-GPU jobs on one GPU were allowed")
	}
	if err := f.Start("b", "n1", 4); err == nil {
		t.Fatal("a GPU the node lacks was allowed")
	}
}

func TestDeadlineFeasibilityFollowsTheForecast(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	f := newFake(c)
	// DefaultForecast: one GPU, P90 one hour.
	s := spec("t1", 1)
	s.Deadline = c.t.Add(90 * time.Minute)
	st, err := f.Submit(ctx, service.SubmitRequest{ID: "a", Spec: s})
	if err != nil || st.DeadlineFeasible == nil || !*st.DeadlineFeasible || !st.LatestStart.Equal(c.t.Add(30*time.Minute)) {
		t.Fatalf("Submit = %+v, %v; want feasible with latest start in 30 min", st, err)
	}
	c.advance(31 * time.Minute)
	if st, _ = f.Job(ctx, "a"); *st.DeadlineFeasible {
		t.Fatal("still feasible after the latest start passed")
	}
}

func TestWhatIfAddedJobDelaysTheQueueAndAddedNodeHelps(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	f := newFake(c) // 4 GPUs
	for _, id := range []cluster.JobID{"a", "b"} {
		if _, err := f.Submit(ctx, service.SubmitRequest{ID: id, Spec: spec("t1", 4)}); err != nil {
			t.Fatal(err)
		}
		c.advance(time.Second)
	}
	// Baseline: a from now for 2 h (P50 30 min × 4 GPUs), b after it.
	res, err := f.WhatIf(ctx, service.WhatIfRequest{AddJobs: []service.SubmitRequest{{Spec: spec("t1", 2)}}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[cluster.JobID]service.WhatIfJob{}
	for _, j := range res.Jobs {
		got[j.Job] = j
	}
	if h := got["whatif-1"]; !h.Hypothetical || h.Start == nil || !h.Start.Equal(c.t.Add(4*time.Hour)) {
		t.Fatalf("hypothetical job: %+v; want it to start after a and b, in 4 h", h)
	}
	if d := got["b"].DeltaEndS; d == nil || *d != 0 {
		t.Fatalf("b's end moved by %v under FIFO; want 0", d)
	}
	res, err = f.WhatIf(ctx, service.WhatIfRequest{AddNodes: []cluster.Node{clustertest.Node("n2").GPUs(4, "A100-SXM4-80GB").Obj()}})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range res.Jobs {
		if j.Job == "b" && (j.DeltaEndS == nil || *j.DeltaEndS != -2*3600) {
			t.Fatalf("b with a second node: delta %v, want -7200 s", j.DeltaEndS)
		}
	}
	if res.Scenario.MakespanS >= res.Baseline.MakespanS {
		t.Fatalf("makespan %g with a node more, %g without", res.Scenario.MakespanS, res.Baseline.MakespanS)
	}
	if _, err := f.WhatIf(ctx, service.WhatIfRequest{RemoveNodes: []string{"n9"}}); !errors.Is(err, service.ErrInvalid) {
		t.Fatalf("removing an unknown node: %v, want ErrInvalid", err)
	}
	if _, err := f.WhatIf(ctx, service.WhatIfRequest{Policy: "lottery"}); !errors.Is(err, service.ErrInvalid) {
		t.Fatalf("unknown policy: %v, want ErrInvalid", err)
	}
}

func TestStatsCountOutcomesWaitsAndCost(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	f := controltest.New(controltest.WithClock(c.now),
		controltest.WithNodes(clustertest.Node("n1").GPUs(4, "A100-SXM4-80GB").Obj()),
		controltest.WithPrices(controltest.Prices{PerGPUHour: 2, PerKWh: 0.5, Currency: "EUR", GPUPowerW: 400}))
	s := spec("t1", 2)
	s.Labels = map[string]string{"workload": "llm"}
	for _, id := range []cluster.JobID{"ok", "bad"} {
		if _, err := f.Submit(ctx, service.SubmitRequest{ID: id, Spec: s}); err != nil {
			t.Fatal(err)
		}
	}
	f.AddSample(c.t, 55, 1200)
	c.advance(10 * time.Minute)
	if err := f.Start("ok", "n1", 0, 1); err != nil {
		t.Fatal(err)
	}
	if err := f.Start("bad", "n1", 2, 3); err != nil {
		t.Fatal(err)
	}
	c.advance(time.Hour)
	if err := f.Finish("ok", 0, ""); err != nil {
		t.Fatal(err)
	}
	if err := f.Finish("bad", 137, "out of memory"); err != nil {
		t.Fatal(err)
	}
	st, err := f.Stats(ctx, service.StatsQuery{Window: 2 * time.Hour, Step: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if st.Completed != 1 || st.Failed != 1 || len(st.Failures) != 1 || st.Failures[0].Reason != "out of memory" {
		t.Fatalf("outcomes: %d completed, %d failed, %+v", st.Completed, st.Failed, st.Failures)
	}
	if len(st.WaitByTenant) != 1 || st.WaitByTenant[0].MeanS != 600 || st.WaitByTenant[0].Jobs != 2 {
		t.Fatalf("wait by tenant: %+v; want 2 jobs waiting 600 s", st.WaitByTenant)
	}
	if len(st.Cost) != 1 || st.Cost[0].Workload != "t1/llm" || st.Cost[0].GPUHours != 4 || st.Cost[0].EnergyKWh != 1.6 || st.Cost[0].Cost != 8.8 {
		t.Fatalf("cost: %+v; want t1/llm 4 GPU-h, 1.6 kWh, 8.8 EUR", st.Cost)
	}
	if len(st.Forecasts) != 1 || st.Forecasts[0].ActualS != 3600 || st.Forecasts[0].DurationP50S != 3600 {
		t.Fatalf("forecast checks: %+v", st.Forecasts)
	}
	busyAt := map[time.Duration]float64{}
	for _, p := range st.Series {
		busyAt[p.Time.Sub(clustertest.Epoch)] = p.GPUsBusy
	}
	if busyAt[30*time.Minute] != 4 || busyAt[0] != 0 || busyAt[70*time.Minute] != 0 {
		t.Fatalf("GPUs busy over time: %v", busyAt)
	}
	if st.Series[len(st.Series)-1].UtilizationPct != 55 {
		t.Fatalf("utilization from the latest sample: %+v", st.Series[len(st.Series)-1])
	}
}

func TestRetrainAndRollback(t *testing.T) {
	ctx := context.Background()
	f := controltest.New(controltest.WithModels(
		service.ModelVersion{Target: "duration", Version: 1},
		service.ModelVersion{Target: "duration", Version: 2, Current: true, Selected: "forest"},
	))
	if err := f.Retrain(ctx); err != nil || f.Retrains() != 1 {
		t.Fatalf("Retrain: %v (%d runs)", err, f.Retrains())
	}
	ms, _ := f.Models(ctx)
	if len(ms) != 3 || ms[0].Version != 3 || !ms[0].Current || ms[1].Current {
		t.Fatalf("after retraining: %+v; want version 3 current", ms)
	}
	mv, err := f.Rollback(ctx, "duration", 0)
	if err != nil || mv.Version != 2 || !mv.Current {
		t.Fatalf("Rollback to the previous = %+v, %v; want version 2", mv, err)
	}
	if _, err := f.Rollback(ctx, "duration", 9); !errors.Is(err, service.ErrNotFound) {
		t.Fatalf("rollback to a missing version: %v", err)
	}
	if _, err := f.Rollback(ctx, "memory", 0); !errors.Is(err, service.ErrNotFound) {
		t.Fatalf("rollback of an unknown target: %v", err)
	}
	if _, err := f.Rollback(ctx, "duration", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Rollback(ctx, "duration", 0); !errors.Is(err, service.ErrConflict) {
		t.Fatalf("rollback below the first version: %v, want ErrConflict", err)
	}
}

func TestFailWithAndSetMode(t *testing.T) {
	ctx := context.Background()
	f := controltest.New()
	boom := errors.New("store is down")
	f.FailWith("Fleet", boom)
	if _, err := f.Fleet(ctx); !errors.Is(err, boom) {
		t.Fatalf("Fleet after FailWith: %v", err)
	}
	f.FailWith("Fleet", nil)
	if _, err := f.Fleet(ctx); err != nil {
		t.Fatalf("Fleet after FailWith(nil): %v", err)
	}
	if err := f.SetMode(ctx, "yolo"); !errors.Is(err, service.ErrInvalid) {
		t.Fatalf("SetMode yolo: %v", err)
	}
	if err := f.SetMode(ctx, service.ModeAutopilot); err != nil || f.Mode() != service.ModeAutopilot {
		t.Fatalf("SetMode autopilot: %v, mode %s", err, f.Mode())
	}
}

func TestJobKeepsItsAttemptsEventsAndLogs(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	f := controltest.New(controltest.WithClock(c.now),
		controltest.WithPrices(controltest.Prices{GPUPowerW: 400}),
		controltest.WithNodes(clustertest.Node("n1").GPUs(4, "A100-SXM4-80GB").Obj()))
	st, err := f.Submit(ctx, service.SubmitRequest{ID: "a", Spec: spec("t1", 2)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.JobLog(ctx, "a", 0, 0); !errors.Is(err, service.ErrNotFound) {
		t.Fatalf("the log of a job that never started: err %v, want ErrNotFound", err)
	}
	// An hour on GPUs 0 and 1, preempted; half an hour on 2 and 3, failed.
	must(t, f.Start(st.ID, "n1", 0, 1))
	c.advance(time.Hour)
	must(t, f.Preempt(st.ID, "a production job needs the GPUs"))
	must(t, f.Start(st.ID, "n1", 2, 3))
	c.advance(30 * time.Minute)
	must(t, f.Finish(st.ID, 137, "CUDA out of memory"))
	f.SetJobLog(st.ID, 2, "n1", "step 1\nstep 2\nOOM\n")

	got, err := f.Job(ctx, st.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.History) != 2 || got.LastError != "CUDA out of memory" || got.RunS != 5400 || got.GPUHours != 3 {
		t.Fatalf("Job = %d attempts, last error %q, run %g s, %g GPU-h; want 2, the OOM, 5400 s, 3 GPU-h",
			len(got.History), got.LastError, got.RunS, got.GPUHours)
	}
	first, second := got.History[0], got.History[1]
	if first.EndedBy != "requeued" || first.Message != "a production job needs the GPUs" || len(first.Allocations) != 2 ||
		first.Allocations[1] != (service.GPUShare{Node: "n1", GPU: 1, Milli: 1000}) {
		t.Errorf("attempt 1 = %+v; want requeued with the reason, on n1 GPUs 0 and 1", first)
	}
	if second.EndedBy != "failed" || second.EnergyKWh == nil || math.Abs(*second.EnergyKWh-0.4) > 1e-9 || math.Abs(*got.EnergyKWh-1.2) > 1e-9 {
		t.Errorf("attempt 2 = %+v, job energy %v; want failed, 0.4 kWh of 1.2", second, got.EnergyKWh)
	}
	evs, err := f.JobEvents(ctx, st.ID)
	if err != nil || len(evs) != 5 || evs[2].Message != "a production job needs the GPUs" || evs[4].Type != "failed" {
		t.Errorf("JobEvents = %+v, %v; want submitted, started, requeued with its reason, started, failed", evs, err)
	}
	log, err := f.JobLog(ctx, st.ID, 0, 4)
	if err != nil || log.Attempt != 2 || len(log.Nodes) != 1 || log.Nodes[0].Text != "OOM\n" || !log.Nodes[0].Truncated {
		t.Errorf("JobLog(newest, 4 bytes) = %+v, %v; want attempt 2's last 4 bytes on n1, truncated", log, err)
	}
	log, err = f.JobLog(ctx, st.ID, 1, 0)
	if err != nil || len(log.Nodes) != 1 || log.Nodes[0].Unavailable == "" {
		t.Errorf("JobLog(attempt 1) = %+v, %v; want n1 unavailable", log, err)
	}
}

func TestEnergyIsUnavailableWithoutADraw(t *testing.T) {
	ctx := context.Background()
	f := newFake(newClock())
	st, err := f.Submit(ctx, service.SubmitRequest{Spec: spec("t1", 1)})
	if err != nil {
		t.Fatal(err)
	}
	must(t, f.Start(st.ID, "n1", 0))
	got, err := f.Job(ctx, st.ID)
	if err != nil || len(got.History) != 1 || got.History[0].EnergyUnavailable == "" || got.EnergyKWh != nil {
		t.Fatalf("Job = %+v, %v; want one running attempt whose energy is unavailable, and no total", got, err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
