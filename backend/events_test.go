package backend_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/backend"
	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
)

func job(id string) executor.JobEvent {
	return executor.JobEvent{Type: executor.JobStarted, Job: cluster.JobID(id)}
}

func next(t *testing.T, ch <-chan executor.JobEvent) executor.JobEvent {
	t.Helper()
	select {
	case e := <-ch:
		return e
	case <-time.After(5 * time.Second):
		t.Fatal("no event")
		return executor.JobEvent{}
	}
}

func TestEventsAreDeliveredInOrderAndKeptForTheNextWatcher(t *testing.T) {
	ev := backend.NewEvents("test", 0, nil)
	ev.Emit(job("a")) // before Watch: delivered first
	ctx, cancel := context.WithCancel(t.Context())
	ch, err := ev.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ev.Watch(ctx); !errors.Is(err, backend.ErrWatched) {
		t.Fatalf("a second Watch: %v, want ErrWatched", err)
	}
	ev.Emit(job("b"))
	if a, b := next(t, ch), next(t, ch); a.Job != "a" || b.Job != "b" {
		t.Fatalf("got %s, %s; want a, b", a.Job, b.Job)
	}
	cancel()
	for range ch { // closed once ctx ends
	}
	ev.Emit(job("c"))
	ev.Rewatch()
	ch, err = ev.Watch(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if c := next(t, ch); c.Job != "c" {
		t.Fatalf("after Rewatch got %s, want c: events no reader took stay queued", c.Job)
	}
}

func TestABoundedQueueDropsTheOldest(t *testing.T) {
	ev := backend.NewEvents("test", 2, nil)
	for _, id := range []string{"a", "b", "c"} {
		ev.Emit(job(id))
	}
	if n := ev.Queued(); n != 2 {
		t.Fatalf("queued %d, want 2", n)
	}
	ch, err := ev.Watch(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if b, c := next(t, ch), next(t, ch); b.Job != "b" || c.Job != "c" {
		t.Fatalf("got %s, %s; want b, c: the oldest is dropped", b.Job, c.Job)
	}
}
