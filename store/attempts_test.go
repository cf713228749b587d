package store

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
)

func TestAttemptsKeepWhereEachAttemptRanAfterItEnds(t *testing.T) {
	ctx := context.Background()
	c := &clock{now: t0.Add(time.Hour)}
	s, path := openTest(t, WithClock(c.Now))
	mustSubmit(t, s, testJob("j1").GPUs(2).Obj())
	first := allocsOn("j1", "n1", 2, 3)
	if _, _, err := s.StartJob(ctx, "j1", first, 0, "fits on n1"); err != nil {
		t.Fatal(err)
	}
	c.Advance(10 * time.Minute)
	if _, err := s.UpdateJob(ctx, "j1", func(j *cluster.Job) (EventType, string, error) {
		return EventRequeued, "node n1 lost", j.Transition(cluster.StateQueued, c.Now())
	}); err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Minute)
	second := []cluster.Allocation{{Job: "j1", GPU: cluster.GPURef{Node: "n2", Index: 0}, Milli: 500}}
	if _, err := s.AdoptJob(ctx, "j1", 3, second, "found running on n2"); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, s, path)
	evs, err := s.Events(ctx, "j1")
	if err != nil {
		t.Fatal(err)
	}
	got, err := Attempts(evs)
	if err != nil {
		t.Fatal(err)
	}
	start := t0.Add(time.Hour)
	want := []Attempt{
		{Number: 1, Allocations: first, Start: start, End: start.Add(10 * time.Minute), EndedBy: EventRequeued, Message: "node n1 lost"},
		{Number: 3, Allocations: second, Start: start.Add(11 * time.Minute)},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("attempts\n got %+v\nwant %+v", got, want)
	}
	if got[0].Running() || !got[1].Running() {
		t.Errorf("running: %v %v, want false true", got[0].Running(), got[1].Running())
	}
}

func TestAttemptsOfEventsWithoutDetailsAreNumberedInOrder(t *testing.T) {
	at := t0
	ev := func(typ EventType, from, to cluster.JobState) Event {
		at = at.Add(time.Minute)
		return Event{JobID: "j", Time: at, Type: typ, From: from, To: to}
	}
	evs := []Event{
		ev(EventSubmitted, "", cluster.StateQueued),
		ev(EventStarted, cluster.StateQueued, cluster.StateRunning),
		ev(EventCheckpointRequested, cluster.StateRunning, cluster.StateCheckpointing),
		ev(EventPreempted, cluster.StateCheckpointing, cluster.StateQueued),
		ev(EventStarted, cluster.StateQueued, cluster.StateRunning),
		ev(EventFinished, cluster.StateRunning, cluster.StateSucceeded),
	}
	got, err := Attempts(evs)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Number != 1 || got[0].EndedBy != EventPreempted || got[1].Number != 2 ||
		got[1].EndedBy != EventFinished || !got[1].End.Equal(evs[5].Time) || got[0].Allocations != nil {
		t.Errorf("attempts %+v", got)
	}
	evs[1].Details = []byte("{")
	if _, err := Attempts(evs); err == nil {
		t.Error("unreadable details: no error")
	}
}
