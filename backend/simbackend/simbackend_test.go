package simbackend

import (
	"context"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
)

func assignment(id string, attempt int, node string) executor.Assignment {
	j := cluster.NewJob(cluster.JobID(id), cluster.JobSpec{Tenant: "t", GPUs: 1, GPUMilli: cluster.MilliGPU}, time.Now())
	return executor.Assignment{Job: j, Attempt: attempt,
		Allocations: []cluster.Allocation{{Job: j.ID, GPU: cluster.GPURef{Node: node}, Milli: cluster.MilliGPU}}}
}

func newBackend(t *testing.T, d time.Duration) (*Backend, <-chan executor.JobEvent) {
	t.Helper()
	b, err := New(Config{Duration: func(*cluster.Job) time.Duration { return d }, CheckpointCost: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ch, err := b.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return b, ch
}

func next(t *testing.T, ch <-chan executor.JobEvent) executor.JobEvent {
	t.Helper()
	select {
	case e := <-ch:
		return e
	case <-time.After(5 * time.Second):
		t.Fatal("no event within 5s")
	}
	return executor.JobEvent{}
}

func TestAJobStartsAndExitsOnceHoweverOftenItIsStarted(t *testing.T) {
	b, ch := newBackend(t, 50*time.Millisecond)
	ctx := context.Background()
	for range 3 {
		if err := b.Start(ctx, assignment("j1", 1, "n1")); err != nil {
			t.Fatal(err)
		}
	}
	if e := next(t, ch); e.Type != executor.JobStarted || e.Job != "j1" || e.Attempt != 1 || e.Node != "n1" {
		t.Errorf("first event %+v, want j1 started on n1", e)
	}
	if e := next(t, ch); e.Type != executor.JobExited || e.ExitCode != 0 || e.Stopped {
		t.Errorf("second event %+v, want a clean exit", e)
	}
	select {
	case e := <-ch:
		t.Errorf("unexpected event %+v: the repeated starts ran the job again", e)
	case <-time.After(100 * time.Millisecond):
	}
	// The same attempt after it ended is still not run again.
	if err := b.Start(ctx, assignment("j1", 1, "n1")); err != nil {
		t.Fatal(err)
	}
	if got := b.Running("n1"); len(got) != 0 {
		t.Errorf("running after a repeated start of an ended attempt: %v", got)
	}
}

func TestCheckpointThenStopThenResume(t *testing.T) {
	b, ch := newBackend(t, time.Hour)
	ctx := context.Background()
	if err := b.Start(ctx, assignment("j1", 1, "n1")); err != nil {
		t.Fatal(err)
	}
	next(t, ch)
	time.Sleep(30 * time.Millisecond)
	if err := b.Checkpoint(ctx, "j1"); err != nil {
		t.Fatal(err)
	}
	e := next(t, ch)
	if e.Type != executor.JobCheckpointed || e.Checkpoint == nil || e.Checkpoint.Step < 30 {
		t.Fatalf("event %+v, want a checkpoint of at least 30ms of work", e)
	}
	if err := b.Stop(ctx, "j1", time.Second); err != nil {
		t.Fatal(err)
	}
	if e := next(t, ch); e.Type != executor.JobExited || !e.Stopped {
		t.Errorf("event %+v, want a stopped exit", e)
	}
	// Attempt 2 resumes: a job needing 1h that had done all but 20ms ends soon.
	a := assignment("j1", 2, "n2")
	a.Resume = &cluster.Checkpoint{Step: (time.Hour - 20*time.Millisecond).Milliseconds()}
	if err := b.Start(ctx, a); err != nil {
		t.Fatal(err)
	}
	if e := next(t, ch); e.Type != executor.JobStarted || e.Attempt != 2 {
		t.Errorf("event %+v, want attempt 2 started", e)
	}
	if e := next(t, ch); e.Type != executor.JobExited || e.Stopped {
		t.Errorf("event %+v, want attempt 2 to finish from its checkpoint", e)
	}
}

func TestSyncAndLoseNode(t *testing.T) {
	b, ch := newBackend(t, time.Hour)
	ctx := context.Background()
	for _, a := range []executor.Assignment{assignment("a", 1, "n1"), assignment("b", 3, "n1"), assignment("c", 1, "n2")} {
		if err := b.Start(ctx, a); err != nil {
			t.Fatal(err)
		}
		next(t, ch)
	}
	b.Sync("n1")
	e := next(t, ch)
	want := []executor.RunningAttempt{{Job: "a", Attempt: 1}, {Job: "b", Attempt: 3}}
	if e.Type != executor.NodeSynced || len(e.Running) != 2 || e.Running[0] != want[0] || e.Running[1] != want[1] {
		t.Errorf("sync %+v, want %v", e, want)
	}
	b.LoseNode("n1")
	for _, id := range []cluster.JobID{"a", "b"} {
		if e := next(t, ch); e.Type != executor.JobLost || e.Job != id {
			t.Errorf("event %+v, want %s lost", e, id)
		}
	}
	if got := b.Running("n2"); len(got) != 1 {
		t.Errorf("n2 runs %v, want c", got)
	}
}

func TestEventsWaitForTheNextWatcher(t *testing.T) {
	b, err := New(Config{Duration: func(*cluster.Job) time.Duration { return time.Millisecond }})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(context.Background(), assignment("j1", 1, "n1")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.Watch(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	b.Rewatch()
	ch, err := b.Watch(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if e := next(t, ch); e.Type != executor.JobStarted {
		t.Errorf("first event %+v, want started", e)
	}
	if e := next(t, ch); e.Type != executor.JobExited {
		t.Errorf("second event %+v, want exited", e)
	}
}

func TestConfigIsValidated(t *testing.T) {
	if _, err := New(Config{}); err == nil {
		t.Error("no Duration: no error")
	}
	if _, err := New(Config{Duration: func(*cluster.Job) time.Duration { return 0 }, CheckpointCost: -1}); err == nil {
		t.Error("negative checkpoint cost: no error")
	}
}

func TestPeriodicCheckpoints(t *testing.T) {
	b, ch := newBackend(t, time.Hour)
	a := assignment("j1", 1, "n1")
	a.CheckpointEvery = 20 * time.Millisecond
	if err := b.Start(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	next(t, ch)
	var last int64
	for range 3 {
		e := next(t, ch)
		if e.Type != executor.JobCheckpointed || e.Checkpoint.Step <= last {
			t.Fatalf("event %+v, want a checkpoint past step %d", e, last)
		}
		last = e.Checkpoint.Step
	}
	if err := b.Stop(context.Background(), "j1", 0); err != nil {
		t.Fatal(err)
	}
	for {
		e := next(t, ch)
		if e.Type == executor.JobExited {
			break
		}
	}
	select {
	case e := <-ch:
		t.Errorf("event after the stop: %+v", e)
	case <-time.After(60 * time.Millisecond):
	}
}
