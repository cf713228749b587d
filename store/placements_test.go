package store

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
)

func allocsOn(job cluster.JobID, node string, gpus ...int) []cluster.Allocation {
	out := make([]cluster.Allocation, len(gpus))
	for i, g := range gpus {
		out[i] = cluster.Allocation{Job: job, GPU: cluster.GPURef{Node: node, Index: g}, Milli: cluster.MilliGPU}
	}
	return out
}

func TestStartJobStoresThePlacementWithTheAttempt(t *testing.T) {
	ctx := context.Background()
	c := &clock{now: t0.Add(time.Hour)}
	s, path := openTest(t, WithClock(c.Now))
	mustSubmit(t, s, testJob("j1").GPUs(2).Obj())
	allocs := allocsOn("j1", "n1", 2, 3)
	job, p, err := s.StartJob(ctx, "j1", allocs, 20*time.Minute, "fits on n1", WithPowerLimit(0.8))
	if err != nil {
		t.Fatalf("StartJob: %v", err)
	}
	if job.State != cluster.StateRunning || job.Attempts != 1 || p.Attempt != 1 {
		t.Errorf("job %s attempts %d, placement attempt %d; want running, 1, 1", job.State, job.Attempts, p.Attempt)
	}
	// It survives a reopen of the file.
	s2, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	got, err := s2.GetPlacement(ctx, "j1")
	if err != nil {
		t.Fatalf("GetPlacement: %v", err)
	}
	want := Placement{Job: "j1", Attempt: 1, Allocations: allocs, CheckpointEvery: 20 * time.Minute, PowerLimitFraction: 0.8}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("placement\n got %+v\nwant %+v", got, want)
	}
	evs, err := s2.Events(ctx, "j1")
	if err != nil {
		t.Fatal(err)
	}
	if last := evs[len(evs)-1]; last.Type != EventStarted || last.Message != "fits on n1" {
		t.Errorf("last event %+v, want started with the reason", last)
	}
}

func TestStartJobRefusesAJobThatIsNotQueued(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	mustSubmit(t, s, testJob("j1").Obj())
	if _, _, err := s.StartJob(ctx, "j1", allocsOn("j1", "n1", 0), 0, ""); err != nil {
		t.Fatal(err)
	}
	_, _, err := s.StartJob(ctx, "j1", allocsOn("j1", "n1", 1), 0, "")
	if !errors.Is(err, cluster.ErrInvalidTransition) {
		t.Errorf("second start: %v, want a transition error", err)
	}
	p, err := s.GetPlacement(ctx, "j1")
	if err != nil || p.Allocations[0].GPU.Index != 0 {
		t.Errorf("placement after the refused start: %+v, %v; want the first one kept", p, err)
	}
	if _, _, err := s.StartJob(ctx, "nope", allocsOn("nope", "n1", 0), 0, ""); !errors.Is(err, ErrNotFound) {
		t.Errorf("start of a missing job: %v, want ErrNotFound", err)
	}
	mustSubmit(t, s, testJob("j2").Obj())
	if _, _, err := s.StartJob(ctx, "j2", nil, 0, ""); err == nil {
		t.Error("start without allocations: no error")
	}
	if j, _ := s.GetJob(ctx, "j2"); j.State != cluster.StateQueued {
		t.Errorf("j2 is %s after a refused start, want queued", j.State)
	}
}

func TestPlacementIsDroppedWhenTheJobStopsRunning(t *testing.T) {
	ctx := context.Background()
	c := &clock{now: t0.Add(time.Hour)}
	s, _ := openTest(t, WithClock(c.Now))
	mustSubmit(t, s, testJob("j1").Obj(), testJob("j2").Obj())
	for _, id := range []cluster.JobID{"j1", "j2"} {
		if _, _, err := s.StartJob(ctx, id, allocsOn(id, "n1", 0), 0, ""); err != nil {
			t.Fatal(err)
		}
	}
	c.Advance(time.Minute)
	if _, err := s.UpdateJob(ctx, "j1", to(c, cluster.StateSucceeded, EventFinished)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetPlacement(ctx, "j1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("placement of a finished job: %v, want ErrNotFound", err)
	}
	ps, err := s.Placements(ctx)
	if err != nil || len(ps) != 1 || ps[0].Job != "j2" {
		t.Errorf("Placements = %+v, %v; want j2's only", ps, err)
	}
	// A checkpoint keeps it; a preemption back to the queue drops it.
	if _, err := s.UpdateJob(ctx, "j2", checkpointAt(c, 10)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetPlacement(ctx, "j2"); err != nil {
		t.Errorf("placement after a checkpoint: %v", err)
	}
	if _, err := s.UpdateJob(ctx, "j2", to(c, cluster.StateQueued, EventPreempted)); err != nil {
		t.Fatal(err)
	}
	if ps, _ := s.Placements(ctx); len(ps) != 0 {
		t.Errorf("placements after a preemption: %+v, want none", ps)
	}
	// The next attempt is attempt 2.
	_, p, err := s.StartJob(ctx, "j2", allocsOn("j2", "n2", 1), 0, "")
	if err != nil || p.Attempt != 2 {
		t.Errorf("restart: attempt %d, %v; want 2", p.Attempt, err)
	}
}

func TestConfirmAndRequestStop(t *testing.T) {
	ctx := context.Background()
	c := &clock{now: t0.Add(time.Hour)}
	s, _ := openTest(t, WithClock(c.Now))
	mustSubmit(t, s, testJob("j1").Obj(), testJob("j2").Obj())
	if _, _, err := s.StartJob(ctx, "j1", allocsOn("j1", "n1", 0), 0, ""); err != nil {
		t.Fatal(err)
	}
	if err := s.ConfirmPlacement(ctx, "j1", 2); !errors.Is(err, ErrNotFound) {
		t.Errorf("confirm of another attempt: %v, want ErrNotFound", err)
	}
	if err := s.ConfirmPlacement(ctx, "j1", 1); err != nil {
		t.Fatal(err)
	}
	stopBy := c.Now().Add(5 * time.Minute)
	job, err := s.RequestStop(ctx, "j1", stopBy, "make room for j9", true)
	if err != nil {
		t.Fatal(err)
	}
	if job.State != cluster.StateCheckpointing {
		t.Errorf("state %s after a stop with checkpoint, want checkpointing", job.State)
	}
	p, err := s.GetPlacement(ctx, "j1")
	if err != nil {
		t.Fatal(err)
	}
	if !p.Confirmed || !p.StopBy.Equal(stopBy) || p.StopReason != "make room for j9" || !p.Stopping() {
		t.Errorf("placement %+v: want confirmed, stopping by %s with the reason", p, stopBy)
	}
	if _, err := s.RequestStop(ctx, "j2", stopBy, "x", false); !errors.Is(err, ErrNotFound) {
		t.Errorf("stop of a queued job: %v, want ErrNotFound", err)
	}
}

func TestAdoptJobRunsTheBackendsAttempt(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	mustSubmit(t, s, testJob("j1").GPUs(2).Obj())
	allocs := allocsOn("j1", "n1", 0, 1)
	if _, err := s.AdoptJob(ctx, "j1", 0, allocs, "adopted"); err == nil {
		t.Error("attempt 0 adopted")
	}
	job, err := s.AdoptJob(ctx, "j1", 4, allocs, "adopted")
	if err != nil {
		t.Fatal(err)
	}
	if job.State != cluster.StateRunning || job.Attempts != 4 {
		t.Errorf("job %s after %d attempts; want running attempt 4", job.State, job.Attempts)
	}
	p, err := s.GetPlacement(ctx, "j1")
	if err != nil || !p.Confirmed || p.Attempt != 4 || !reflect.DeepEqual(p.Allocations, allocs) {
		t.Errorf("placement %+v (%v); want attempt 4 on the allocations, confirmed", p, err)
	}
	var te *cluster.TransitionError
	if _, err := s.AdoptJob(ctx, "j1", 5, allocs, "again"); !errors.As(err, &te) {
		t.Errorf("adopting a running job: %v; want a transition error", err)
	}
}
