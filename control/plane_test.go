package control

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/service"
	"github.com/prescient-sched/prescient/store"
)

func TestASubmittedJobIsPlannedStartedAndFinished(t *testing.T) {
	hooks := &recordingNotifier{}
	e := newEnv(t, fleetOf(1, 8), func(c *Config) { c.Notifier = hooks })
	st := e.submit("j1", spec(2, 20*time.Minute))
	if st.State != cluster.StateQueued || st.Forecast == nil || st.Forecast.DurationP50S != 1200 {
		t.Fatalf("status at submit %+v, want queued with its forecast", st)
	}
	e.plane.cycle(e.ctx)
	starts := e.backend.of("start")
	if len(starts) != 1 || starts[0].job != "j1" || starts[0].attempt != 1 || len(starts[0].a.Allocations) != 2 {
		t.Fatalf("starts %+v, want j1 attempt 1 on 2 GPUs", starts)
	}
	pl, err := e.store.GetPlacement(e.ctx, "j1")
	if err != nil || pl.Confirmed || pl.Attempt != 1 {
		t.Fatalf("placement %+v, %v: want attempt 1 recorded, not confirmed yet", pl, err)
	}
	e.event(executor.JobEvent{Type: executor.JobStarted, Job: "j1", Attempt: 1, Node: "n0"})
	if pl, _ := e.store.GetPlacement(e.ctx, "j1"); !pl.Confirmed {
		t.Error("the started event did not confirm the placement")
	}
	got, err := e.plane.Job(e.ctx, "j1")
	if err != nil {
		t.Fatal(err)
	}
	if got.State != cluster.StateRunning || len(got.Placement) != 2 || got.Reason == "" || got.PredictedEnd == nil {
		t.Errorf("status while running %+v: want running with its GPUs, reason and predicted end", got)
	}
	// A second cycle starts nothing more.
	e.plane.cycle(e.ctx)
	if n := len(e.backend.of("start")); n != 1 {
		t.Errorf("%d starts after a second cycle, want 1", n)
	}
	e.clock.Advance(20 * time.Minute)
	e.event(executor.JobEvent{Type: executor.JobExited, Job: "j1", Attempt: 1, Node: "n0", ExitCode: 0})
	got, _ = e.plane.Job(e.ctx, "j1")
	if got.State != cluster.StateSucceeded || got.ExitCode == nil || *got.ExitCode != 0 || got.EndTime == nil {
		t.Errorf("status after exit %+v: want succeeded with exit code 0", got)
	}
	e.wantEvents("j1", store.EventSubmitted, store.EventStarted, store.EventFinished)
	if got := hooks.types(); !slices.Equal(got, []string{"submitted", "started", "finished"}) {
		t.Errorf("lifecycle events %v, want submitted, started, finished", got)
	}
	if last := hooks.events[2]; last.Job != "j1" || last.Tenant != "t1" || last.State != cluster.StateSucceeded ||
		last.ExitCode == nil || *last.ExitCode != 0 || last.Labels[p50Label] != "1200" || last.Attempt != 1 {
		t.Errorf("finished event %+v", last)
	}
	if ps, _ := e.store.Placements(e.ctx); len(ps) != 0 {
		t.Errorf("placements after the end: %+v", ps)
	}
}

func TestAFailedExitRecordsTheCodeAndReason(t *testing.T) {
	e := newEnv(t, fleetOf(1, 8), nil)
	e.submit("j1", spec(1, time.Minute))
	e.plane.cycle(e.ctx)
	e.event(executor.JobEvent{Type: executor.JobExited, Job: "j1", Attempt: 1, ExitCode: 3, Message: "CUDA out of memory"})
	j := e.job("j1")
	if j.State != cluster.StateFailed || j.Outcome.ExitCode != 3 {
		t.Errorf("job %s exit %d, want failed with 3", j.State, j.Outcome.ExitCode)
	}
	evs, _ := e.store.Events(e.ctx, "j1")
	if last := evs[len(evs)-1]; last.Message != "exited with code 3: CUDA out of memory" {
		t.Errorf("failure reason %q", last.Message)
	}
}

func TestTheAdvisorRecordsRecommendationsAndStartsNothing(t *testing.T) {
	e := newEnv(t, fleetOf(1, 8), func(c *Config) { c.Mode = service.ModeAdvisor })
	e.submit("a", spec(4, time.Hour))
	e.submit("b", spec(4, time.Hour))
	e.submit("c", spec(4, time.Hour)) // does not fit beside a and b
	for range 3 {
		e.plane.cycle(e.ctx)
		e.clock.Advance(time.Minute)
	}
	if calls := e.backend.of("start"); len(calls) != 0 {
		t.Fatalf("the advisor started %+v", calls)
	}
	for _, id := range []string{"a", "b", "c"} {
		if j := e.job(id); j.State != cluster.StateQueued {
			t.Errorf("%s is %s, want queued", id, j.State)
		}
	}
	recs, err := e.plane.Recommendations(e.ctx, time.Time{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 {
		t.Fatalf("recommendations %+v, want one start each for a and b, not repeated", recs)
	}
	for _, r := range recs {
		if r.Kind != "start" || r.Reason == "" || r.Status != "open" || r.Details["placement"] == nil || r.Details["duration_p50_s"] != 3600.0 {
			t.Errorf("recommendation %+v: want a start with reason, placement and forecast", r)
		}
	}
	// A restarted advisor does not repeat them either.
	e.restart()
	e.plane.cycle(e.ctx)
	if recs, _ := e.plane.Recommendations(e.ctx, time.Time{}, 0); len(recs) != 2 {
		t.Errorf("%d recommendations after a restart, want 2", len(recs))
	}
	// Once a is cancelled, its recommendation is dismissed and c is
	// recommended instead.
	if _, err := e.plane.Cancel(e.ctx, "a"); err != nil {
		t.Fatal(err)
	}
	e.plane.cycle(e.ctx)
	recs, _ = e.plane.Recommendations(e.ctx, time.Time{}, 0)
	open := map[cluster.JobID]int{}
	for _, r := range recs {
		if r.Status == "open" {
			open[r.Job]++
		}
	}
	if recs[0].Job != "a" || recs[0].Status != "dismissed" || open["a"] != 0 || open["b"] != 1 || open["c"] != 1 {
		t.Errorf("recommendations after a's cancellation: %+v; want a's dismissed, one open each for b and c", recs)
	}
	// Switched to autopilot, the plan is carried out.
	if err := e.plane.SetMode(e.ctx, service.ModeAutopilot); err != nil {
		t.Fatal(err)
	}
	e.plane.cycle(e.ctx)
	if n := len(e.backend.of("start")); n != 2 {
		t.Errorf("%d starts in autopilot, want 2", n)
	}
	if err := e.plane.SetMode(e.ctx, "yolo"); !errors.Is(err, service.ErrInvalid) {
		t.Errorf("SetMode(yolo) = %v, want ErrInvalid", err)
	}
}

// preemptionEnv runs a checkpointable standard job "low" on all 8 GPUs of
// the only node for 20 minutes, then submits a production job "high".
func preemptionEnv(t *testing.T) *env {
	e := newEnv(t, fleetOf(1, 8), nil)
	low := spec(8, 10*time.Hour)
	low.Checkpointable, low.CheckpointCost = true, time.Minute
	e.submit("low", low)
	e.plane.cycle(e.ctx)
	e.event(executor.JobEvent{Type: executor.JobStarted, Job: "low", Attempt: 1, Node: "n0"})
	e.clock.Advance(20 * time.Minute)
	high := spec(8, time.Hour)
	high.Tier = cluster.TierProduction
	e.submit("high", high)
	e.plane.cycle(e.ctx)
	return e
}

func TestPreemptionCheckpointsFirstThenStopsAndResumes(t *testing.T) {
	e := preemptionEnv(t)
	if cps := e.backend.of("checkpoint"); len(cps) != 1 || cps[0].job != "low" {
		t.Fatalf("checkpoint requests %+v, want one for low", cps)
	}
	if n := len(e.backend.of("stop")); n != 0 {
		t.Fatalf("%d stops before the checkpoint landed", n)
	}
	if j := e.job("low"); j.State != cluster.StateCheckpointing {
		t.Fatalf("low is %s, want checkpointing", j.State)
	}
	if n := len(e.backend.of("start")); n != 1 {
		t.Fatalf("%d starts while low still holds the GPUs, want 1 (low's)", n)
	}
	e.clock.Advance(time.Minute)
	cp := &cluster.Checkpoint{Time: e.clock.Now(), Step: 1200, Path: "/ckpt/low/1200"}
	e.event(executor.JobEvent{Type: executor.JobCheckpointed, Job: "low", Attempt: 1, Checkpoint: cp})
	if stops := e.backend.of("stop"); len(stops) != 1 || stops[0].job != "low" {
		t.Fatalf("stops %+v after the checkpoint, want low's", stops)
	}
	e.event(executor.JobEvent{Type: executor.JobExited, Job: "low", Attempt: 1, Stopped: true, ExitCode: -1})
	if j := e.job("low"); j.State != cluster.StateQueued || j.LastCheckpoint == nil || j.LastCheckpoint.Step != 1200 {
		t.Fatalf("low %s with checkpoint %+v, want queued with step 1200", j.State, j.LastCheckpoint)
	}
	e.plane.cycle(e.ctx)
	starts := e.backend.of("start")
	if len(starts) != 2 || starts[1].job != "high" {
		t.Fatalf("starts %+v, want high after low", starts)
	}
	e.event(executor.JobEvent{Type: executor.JobExited, Job: "high", Attempt: 1})
	e.plane.cycle(e.ctx)
	starts = e.backend.of("start")
	if len(starts) != 3 || starts[2].job != "low" || starts[2].attempt != 2 || starts[2].a.Resume == nil || starts[2].a.Resume.Step != 1200 {
		t.Fatalf("starts %+v, want low's attempt 2 resuming from step 1200", starts)
	}
	e.wantEvents("low", store.EventSubmitted, store.EventStarted, store.EventCheckpointRequested, store.EventCheckpointed,
		store.EventPreempted, store.EventStarted)
}

func TestAPreemptedJobWhoseCheckpointNeverLandsIsStoppedAtStopBy(t *testing.T) {
	e := preemptionEnv(t)
	pl, err := e.store.GetPlacement(e.ctx, "low")
	if err != nil || !pl.Stopping() {
		t.Fatalf("low's placement %+v, %v: want stopping", pl, err)
	}
	e.plane.cycle(e.ctx)
	if n := len(e.backend.of("stop")); n != 0 {
		t.Fatalf("stopped before StopBy")
	}
	e.clock.Advance(pl.StopBy.Sub(e.clock.Now()))
	e.plane.cycle(e.ctx)
	if n := len(e.backend.of("stop")); n != 1 {
		t.Fatalf("%d stops at StopBy, want 1", n)
	}
	e.event(executor.JobEvent{Type: executor.JobExited, Job: "low", Attempt: 1, Stopped: true, ExitCode: -1})
	if j := e.job("low"); j.State != cluster.StateQueued {
		t.Errorf("low is %s, want queued", j.State)
	}
}

func TestARestartBetweenRecordingAStartAndSendingItStartsTheJobOnce(t *testing.T) {
	e := newEnv(t, fleetOf(1, 8), nil)
	e.submit("j1", spec(1, time.Hour))
	e.submit("j2", spec(1, time.Hour))
	// The process dies in the backend call: the start of j1 is recorded,
	// never sent.
	crashCtx, crash := context.WithCancel(e.ctx)
	e.backend.onStart = func(a executor.Assignment) error {
		if a.Job.ID == "j1" {
			crash()
			return crashCtx.Err()
		}
		return nil
	}
	e.plane.cycle(crashCtx)
	if j := e.job("j1"); j.State != cluster.StateRunning {
		t.Fatalf("j1 is %s after the crash, want running (recorded before the call)", j.State)
	}
	e.backend.onStart = nil
	e.restart()
	starts := e.backend.of("start")
	var j1 []call
	for _, c := range starts {
		if c.job == "j1" {
			j1 = append(j1, c)
		}
	}
	if len(j1) != 1 || j1[0].attempt != 1 {
		t.Fatalf("starts of j1 after the restart %+v, want attempt 1 resent once", j1)
	}
	e.event(executor.JobEvent{Type: executor.JobStarted, Job: "j1", Attempt: 1, Node: "n0"})
	e.plane.cycle(e.ctx)
	e.restart() // a confirmed start is not resent
	e.plane.cycle(e.ctx)
	for _, c := range e.backend.of("start") {
		if c.job == "j1" && c.attempt != 1 {
			t.Errorf("j1 started as attempt %d", c.attempt)
		}
	}
	n := 0
	for _, c := range e.backend.of("start") {
		if c.job == "j1" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("j1 sent %d starts, want 1", n)
	}
	for _, id := range []string{"j1", "j2"} {
		if j := e.job(id); j.State != cluster.StateRunning || j.Attempts != 1 {
			t.Errorf("%s: %s after %d attempts, want running after 1", id, j.State, j.Attempts)
		}
	}
}

func TestNodeSyncedReconcilesWithTheNodesList(t *testing.T) {
	e := newEnv(t, fleetOf(2, 8), nil)
	e.submit("a", spec(8, time.Hour))
	e.submit("b", spec(8, time.Hour))
	e.plane.cycle(e.ctx)
	pa, _ := e.store.GetPlacement(e.ctx, "a")
	pb, _ := e.store.GetPlacement(e.ctx, "b")
	nodeA, nodeB := pa.Allocations[0].GPU.Node, pb.Allocations[0].GPU.Node
	if nodeA == nodeB {
		t.Fatalf("a and b on one node %s", nodeA)
	}
	e.event(executor.JobEvent{Type: executor.JobStarted, Job: "a", Attempt: 1, Node: nodeA})
	// a's node says it runs a and a stranger; b's node says it runs nothing.
	e.event(executor.JobEvent{Type: executor.NodeSynced, Node: nodeA,
		Running: []executor.RunningAttempt{{Job: "a", Attempt: 1}, {Job: "stranger", Attempt: 4}}})
	e.event(executor.JobEvent{Type: executor.NodeSynced, Node: nodeB})
	if j := e.job("a"); j.State != cluster.StateRunning {
		t.Errorf("a is %s, want running (its node lists it)", j.State)
	}
	if j := e.job("b"); j.State != cluster.StateQueued || j.Attempts != 1 {
		t.Errorf("b is %s after %d attempts, want requeued", j.State, j.Attempts)
	}
	stops := e.backend.of("stop")
	if len(stops) != 1 || stops[0].job != "stranger" {
		t.Errorf("stops %+v, want the stranger stopped", stops)
	}
	e.wantEvents("b", store.EventSubmitted, store.EventStarted, store.EventRequeued)
	// A stale event of b's first attempt changes nothing once attempt 2 runs.
	e.plane.cycle(e.ctx)
	e.event(executor.JobEvent{Type: executor.JobExited, Job: "b", Attempt: 1, ExitCode: 0})
	if j := e.job("b"); j.State != cluster.StateRunning || j.Attempts != 2 {
		t.Errorf("b is %s after %d attempts, want attempt 2 running", j.State, j.Attempts)
	}
}

// An agent registers (its list is taken), a plan starts a job on its node,
// then the plane reads the node's NodeSynced: the start is not in the list
// because it came later, and the job is not lost. A list taken after the
// start that lacks it is.
func TestNodeSyncedTakenBeforeAStartDoesNotLoseIt(t *testing.T) {
	e := newEnv(t, fleetOf(1, 8), nil)
	listTaken := e.clock.Now()
	e.clock.Advance(time.Second)
	e.submit("a", spec(8, time.Hour))
	e.plane.cycle(e.ctx)
	e.event(executor.JobEvent{Type: executor.NodeSynced, Node: "n0", Time: listTaken})
	if j := e.job("a"); j.State != cluster.StateRunning || j.Attempts != 1 {
		t.Fatalf("a is %s after %d attempts, want attempt 1 running: the list predates its start", j.State, j.Attempts)
	}
	e.clock.Advance(time.Second)
	e.event(executor.JobEvent{Type: executor.NodeSynced, Node: "n0"})
	if j := e.job("a"); j.State != cluster.StateQueued {
		t.Errorf("a is %s, want requeued: a list taken after its start lacks it", j.State)
	}
}

func TestALostJobIsRequeued(t *testing.T) {
	e := newEnv(t, fleetOf(1, 8), nil)
	e.submit("a", spec(8, time.Hour))
	e.plane.cycle(e.ctx)
	e.event(executor.JobEvent{Type: executor.JobLost, Job: "a", Attempt: 1, Node: "n0", Message: "GPU fell off the bus"})
	if j := e.job("a"); j.State != cluster.StateQueued {
		t.Errorf("a is %s, want queued", j.State)
	}
}

func TestCancel(t *testing.T) {
	e := newEnv(t, fleetOf(1, 8), nil)
	e.submit("q", spec(8, time.Hour))
	e.submit("r", spec(8, time.Hour))
	e.plane.cycle(e.ctx) // one of them runs
	running := "q"
	if e.job("q").State == cluster.StateQueued {
		running = "r"
	}
	queued := map[string]string{"q": "r", "r": "q"}[running]
	st, err := e.plane.Cancel(e.ctx, cluster.JobID(queued))
	if err != nil || st.State != cluster.StateCancelled {
		t.Fatalf("cancel of the queued job: %+v, %v", st, err)
	}
	st, err = e.plane.Cancel(e.ctx, cluster.JobID(running))
	if err != nil || st.State != cluster.StateRunning {
		t.Fatalf("cancel of the running job: %+v, %v; want it running until it exits", st, err)
	}
	if stops := e.backend.of("stop"); len(stops) != 1 || string(stops[0].job) != running {
		t.Fatalf("stops %+v", stops)
	}
	e.event(executor.JobEvent{Type: executor.JobExited, Job: cluster.JobID(running), Attempt: 1, Stopped: true, ExitCode: -1})
	if j := e.job(running); j.State != cluster.StateCancelled {
		t.Errorf("%s is %s after its exit, want cancelled", running, j.State)
	}
	if _, err := e.plane.Cancel(e.ctx, cluster.JobID(running)); !errors.Is(err, service.ErrConflict) {
		t.Errorf("second cancel: %v, want ErrConflict", err)
	}
	if _, err := e.plane.Cancel(e.ctx, "nope"); !errors.Is(err, service.ErrNotFound) {
		t.Errorf("cancel of a missing job: %v, want ErrNotFound", err)
	}
}

func TestSubmitValidatesAndIsIdempotent(t *testing.T) {
	e := newEnv(t, fleetOf(1, 8), nil)
	bad := spec(1, time.Hour)
	bad.Tenant = ""
	if _, err := e.plane.Submit(e.ctx, service.SubmitRequest{Spec: bad}); !errors.Is(err, service.ErrInvalid) {
		t.Errorf("no tenant: %v, want ErrInvalid", err)
	}
	if _, err := e.plane.Submit(e.ctx, service.SubmitRequest{Spec: spec(9, time.Hour)}); !errors.Is(err, service.ErrInvalid) {
		t.Errorf("9 GPUs on an 8-GPU fleet: %v, want ErrInvalid", err)
	}
	s := spec(2, time.Hour)
	s.GPUMilli = 0 // filled in
	first, err := e.plane.Submit(e.ctx, service.SubmitRequest{ID: "j1", Spec: s, Command: []string{"train.py"}})
	if err != nil || first.GPUMilli != cluster.MilliGPU {
		t.Fatalf("Submit: %+v, %v", first, err)
	}
	again, err := e.plane.Submit(e.ctx, service.SubmitRequest{ID: "j1", Spec: s, Command: []string{"train.py"}})
	if err != nil || again.ID != "j1" || !again.SubmitTime.Equal(first.SubmitTime) {
		t.Errorf("same submission again: %+v, %v; want the stored job", again, err)
	}
	if _, err := e.plane.Submit(e.ctx, service.SubmitRequest{ID: "j1", Spec: spec(3, time.Hour)}); !errors.Is(err, service.ErrConflict) {
		t.Errorf("another spec under the same ID: %v, want ErrConflict", err)
	}
	anon, err := e.plane.Submit(e.ctx, service.SubmitRequest{Spec: spec(1, time.Hour)})
	if err != nil || anon.ID == "" {
		t.Errorf("submission without an ID: %+v, %v", anon, err)
	}
	// The command reaches the backend.
	e.plane.cycle(e.ctx)
	for _, c := range e.backend.of("start") {
		if c.job == "j1" && (len(c.a.Command) != 1 || c.a.Command[0] != "train.py") {
			t.Errorf("j1 started with command %v", c.a.Command)
		}
	}
}

func TestDeadlineFeasibilityAtSubmit(t *testing.T) {
	e := newEnv(t, fleetOf(1, 8), nil)
	e.submit("busy", spec(8, 2*time.Hour)) // P90 3h
	e.plane.cycle(e.ctx)
	soon := spec(1, 30*time.Minute) // P90 45m
	soon.Deadline = t0.Add(time.Hour)
	st := e.submit("soon", soon)
	if st.DeadlineFeasible == nil || *st.DeadlineFeasible {
		t.Errorf("deadline in 1h behind 3h of work: feasible %v, want false", st.DeadlineFeasible)
	}
	later := spec(1, 30*time.Minute)
	later.Deadline = t0.Add(5 * time.Hour)
	st = e.submit("later", later)
	if st.DeadlineFeasible == nil || !*st.DeadlineFeasible || st.LatestStart == nil || !st.LatestStart.Equal(t0.Add(5*time.Hour-45*time.Minute)) {
		t.Errorf("deadline in 5h: feasible %v latest start %v, want feasible, latest at 4h15m", st.DeadlineFeasible, st.LatestStart)
	}
	none := e.submit("none", spec(1, time.Minute))
	if none.DeadlineFeasible != nil {
		t.Errorf("a job without a deadline has feasibility %v", *none.DeadlineFeasible)
	}
}

func TestJobsFiltersByTenantStateAndLabels(t *testing.T) {
	e := newEnv(t, fleetOf(1, 8), nil)
	a := spec(1, time.Hour)
	a.Labels["experiment"] = "e1"
	e.submit("a", a)
	b := spec(1, time.Hour)
	b.Tenant = "t2"
	e.submit("b", b)
	e.submit("c", spec(1, time.Hour))
	got, err := e.plane.Jobs(e.ctx, service.JobQuery{Labels: map[string]string{"experiment": "e1"}})
	if err != nil || len(got) != 1 || got[0].ID != "a" {
		t.Errorf("by label: %+v, %v", got, err)
	}
	got, _ = e.plane.Jobs(e.ctx, service.JobQuery{Tenant: "t2"})
	if len(got) != 1 || got[0].ID != "b" {
		t.Errorf("by tenant: %+v", got)
	}
	got, _ = e.plane.Jobs(e.ctx, service.JobQuery{Limit: 2, States: []cluster.JobState{cluster.StateQueued}})
	if len(got) != 2 {
		t.Errorf("limit 2: %d jobs", len(got))
	}
	if _, err := e.plane.Jobs(e.ctx, service.JobQuery{States: []cluster.JobState{"sleeping"}}); !errors.Is(err, service.ErrInvalid) {
		t.Errorf("unknown state: %v, want ErrInvalid", err)
	}
}

func TestAJobThatFinishesWhileBeingPreemptedSucceeds(t *testing.T) {
	e := preemptionEnv(t)
	e.event(executor.JobEvent{Type: executor.JobExited, Job: "low", Attempt: 1, ExitCode: 0})
	if j := e.job("low"); j.State != cluster.StateSucceeded {
		t.Errorf("low is %s after exiting 0 on its own, want succeeded", j.State)
	}
}

// After a restart the agents register again only after a while: a start
// recorded but not confirmed before the restart waits for its node instead
// of being requeued (the job may run there), is resent once the node is
// ready, and is requeued only if the node stays away past NodeSyncTimeout.
func TestARestartWaitsForTheNodeOfAnUnconfirmedStart(t *testing.T) {
	e := newEnv(t, fleetOf(1, 8), nil)
	e.submit("j1", spec(1, time.Hour))
	e.submit("j2", spec(1, time.Hour))
	e.plane.cycle(e.ctx) // both recorded and sent, neither confirmed
	notReady := fmt.Errorf("start: node n0: %w", executor.ErrNodeNotReady)
	e.backend.onStart = func(executor.Assignment) error { return notReady }
	e.restart()
	for _, id := range []string{"j1", "j2"} {
		if j := e.job(id); j.State != cluster.StateRunning || j.Attempts != 1 {
			t.Fatalf("%s is %s after %d attempts right after the restart; want still running attempt 1", id, j.State, j.Attempts)
		}
	}
	// j1's node comes back and lists j1: confirmed, not resent.
	e.event(executor.JobEvent{Type: executor.NodeSynced, Node: "n0", Running: []executor.RunningAttempt{{Job: "j1", Attempt: 1}, {Job: "j2", Attempt: 1}}})
	before := len(e.backend.of("start"))
	e.plane.resendUnsent(e.ctx)
	if n := len(e.backend.of("start")) - before; n != 0 {
		t.Errorf("%d starts resent for attempts the node confirmed", n)
	}
	// Another restart with the node away for good: requeued after the timeout.
	e.restart()
	e.clock.Advance(DefaultNodeSyncTimeout / 2)
	e.plane.resendUnsent(e.ctx)
	if j := e.job("j1"); j.State != cluster.StateRunning {
		t.Fatalf("j1 is %s before the timeout", j.State)
	}
	e.clock.Advance(DefaultNodeSyncTimeout)
	e.plane.resendUnsent(e.ctx)
	if j := e.job("j1"); j.State != cluster.StateRunning {
		// confirmed placements are not waited for: only unconfirmed ones are
		t.Fatalf("j1 (confirmed) is %s", j.State)
	}
	e.submit("j3", spec(1, time.Hour))
	e.backend.onStart = nil
	e.plane.cycle(e.ctx)
	e.backend.onStart = func(executor.Assignment) error { return notReady }
	e.restart()
	e.clock.Advance(DefaultNodeSyncTimeout + time.Second)
	e.plane.resendUnsent(e.ctx)
	if j := e.job("j3"); j.State != cluster.StateQueued {
		t.Errorf("j3 is %s after its node stayed away past the timeout; want queued", j.State)
	}
}

// A node whose agent went silent keeps its jobs for NodeLostAfter (they
// may still run); then they go back to the queue. A node that syncs in
// time keeps them.
func TestJobsOfANodeSilentTooLongAreRequeued(t *testing.T) {
	e := newEnv(t, fleetOf(2, 8), nil)
	e.submit("a", spec(8, time.Hour))
	e.submit("b", spec(8, time.Hour))
	e.plane.cycle(e.ctx)
	pa, _ := e.store.GetPlacement(e.ctx, "a")
	pb, _ := e.store.GetPlacement(e.ctx, "b")
	nodeA, nodeB := pa.Allocations[0].GPU.Node, pb.Allocations[0].GPU.Node
	e.event(executor.JobEvent{Type: executor.JobStarted, Job: "a", Attempt: 1, Node: nodeA})
	e.event(executor.JobEvent{Type: executor.JobStarted, Job: "b", Attempt: 1, Node: nodeB})
	e.event(executor.JobEvent{Type: executor.NodeSilent, Node: nodeA})
	e.event(executor.JobEvent{Type: executor.NodeSilent, Node: nodeB})
	e.clock.Advance(DefaultNodeLostAfter / 2)
	e.event(executor.JobEvent{Type: executor.NodeSynced, Node: nodeB, Running: []executor.RunningAttempt{{Job: "b", Attempt: 1}}})
	e.plane.requeueSilentNodes(e.ctx)
	if j := e.job("a"); j.State != cluster.StateRunning {
		t.Fatalf("a is %s before its node was silent for NodeLostAfter", j.State)
	}
	e.clock.Advance(DefaultNodeLostAfter)
	e.plane.requeueSilentNodes(e.ctx)
	if j := e.job("a"); j.State != cluster.StateQueued {
		t.Errorf("a is %s after its node stayed silent; want queued", j.State)
	}
	if j := e.job("b"); j.State != cluster.StateRunning {
		t.Errorf("b is %s; its node came back in time", j.State)
	}
}

// A replica that takes over with a store of its own (Kubernetes: the API
// server is the truth of what runs where) adopts the attempts a node runs
// of jobs it has queued, with the GPUs they hold, instead of stopping them.
func TestNodeSyncedAdoptsWhatABackendSaysRunsOfItsQueuedJobs(t *testing.T) {
	e := newEnv(t, fleetOf(1, 8), nil)
	e.submit("a", spec(4, time.Hour))
	e.submit("b", spec(8, time.Hour))
	on := func(job cluster.JobID, node string, gpus ...int) []cluster.Allocation {
		var out []cluster.Allocation
		for _, g := range gpus {
			out = append(out, cluster.Allocation{Job: job, GPU: cluster.GPURef{Node: node, Index: g}, Milli: cluster.MilliGPU})
		}
		return out
	}
	a, stranger, elsewhere := executor.RunningAttempt{Job: "a", Attempt: 3}, executor.RunningAttempt{Job: "stranger", Attempt: 1},
		executor.RunningAttempt{Job: "b", Attempt: 2}
	e.event(executor.JobEvent{Type: executor.NodeSynced, Node: "n0", Running: []executor.RunningAttempt{a, stranger, elsewhere},
		Holdings: map[executor.RunningAttempt][]cluster.Allocation{a: on("a", "n0", 0, 1, 2, 3), stranger: on("stranger", "n0", 4),
			elsewhere: on("b", "n9", 0)}})
	if j := e.job("a"); j.State != cluster.StateRunning || j.Attempts != 3 {
		t.Fatalf("a is %s after %d attempts; want attempt 3 adopted and running", j.State, j.Attempts)
	}
	pl, err := e.store.GetPlacement(e.ctx, "a")
	if err != nil || !pl.Confirmed || len(pl.Allocations) != 4 {
		t.Fatalf("a's placement %+v (%v); want its 4 GPUs, confirmed", pl, err)
	}
	stops := e.backend.of("stop")
	if len(stops) != 2 || stops[0].job != "stranger" || stops[1].job != "b" {
		t.Errorf("stops %+v; want the job the store lacks and the one on a node the plane does not know stopped", stops)
	}
	// The next plan counts a's GPUs as taken and starts it nowhere else.
	e.plane.cycle(e.ctx)
	if j := e.job("b"); j.State != cluster.StateQueued {
		t.Errorf("b is %s; want queued: a holds half the node", j.State)
	}
	if starts := e.backend.of("start"); len(starts) != 0 {
		t.Errorf("starts %+v; want none", starts)
	}
	e.wantEvents("a", store.EventSubmitted, store.EventStarted)
}

// A job its backend cannot start yet (its pods do not all exist) is left
// out of the plan: no attempt is spent on a start that must fail.
func TestJobsTheBackendWaitsForAreNotStarted(t *testing.T) {
	e := newEnv(t, fleetOf(1, 8), nil)
	e.submit("a", spec(4, time.Hour))
	e.backend.mu.Lock()
	e.backend.waiting = map[cluster.JobID]bool{"a": true}
	e.backend.mu.Unlock()
	e.plane.cycle(e.ctx)
	if j := e.job("a"); j.State != cluster.StateQueued || j.Attempts != 0 {
		t.Fatalf("a is %s after %d attempts; want queued, untried", j.State, j.Attempts)
	}
	e.backend.mu.Lock()
	e.backend.waiting = nil
	e.backend.mu.Unlock()
	e.plane.cycle(e.ctx)
	if j := e.job("a"); j.State != cluster.StateRunning || j.Attempts != 1 {
		t.Errorf("a is %s after %d attempts; want attempt 1 running once its backend can start it", j.State, j.Attempts)
	}
}

// A gang that runs on two nodes is adopted whole at the first node's sync
// (Run merges the holdings of a backend's initial syncs), and a later
// attempt the backend runs supersedes the earlier one the store runs.
func TestAnAttemptOnSeveralNodesIsAdoptedWhole(t *testing.T) {
	e := newEnv(t, fleetOf(2, 8), nil)
	e.submit("g", spec(16, time.Hour))
	on := func(node string, n int) []cluster.Allocation {
		var out []cluster.Allocation
		for g := range n {
			out = append(out, cluster.Allocation{Job: "g", GPU: cluster.GPURef{Node: node, Index: g}, Milli: cluster.MilliGPU})
		}
		return out
	}
	g2 := executor.RunningAttempt{Job: "g", Attempt: 2}
	e.plane.syncHoldings = map[executor.RunningAttempt][]cluster.Allocation{g2: append(on("n0", 8), on("n1", 8)...)}
	e.event(executor.JobEvent{Type: executor.NodeSynced, Node: "n0", Running: []executor.RunningAttempt{g2},
		Holdings: map[executor.RunningAttempt][]cluster.Allocation{g2: on("n0", 8)}})
	e.event(executor.JobEvent{Type: executor.NodeSynced, Node: "n1", Running: []executor.RunningAttempt{g2},
		Holdings: map[executor.RunningAttempt][]cluster.Allocation{g2: on("n1", 8)}})
	e.plane.syncHoldings = nil
	if pl, err := e.store.GetPlacement(e.ctx, "g"); err != nil || len(pl.Allocations) != 16 || pl.Attempt != 2 {
		t.Fatalf("g's placement %+v (%v); want attempt 2 on both nodes' 16 GPUs", pl, err)
	}
	if stops := e.backend.of("stop"); len(stops) != 0 {
		t.Errorf("stops %+v; want none", stops)
	}
	// The backend later says attempt 3 runs: the store's attempt 2 is
	// superseded.
	g3 := executor.RunningAttempt{Job: "g", Attempt: 3}
	e.event(executor.JobEvent{Type: executor.NodeSynced, Node: "n0", Running: []executor.RunningAttempt{g3},
		Holdings: map[executor.RunningAttempt][]cluster.Allocation{g3: on("n0", 8)}})
	if j := e.job("g"); j.State != cluster.StateRunning || j.Attempts != 3 {
		t.Errorf("g is %s after %d attempts; want attempt 3 adopted", j.State, j.Attempts)
	}
}
