package store

import (
	"context"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
)

func TestJobsAndEventsOfAWindow(t *testing.T) {
	ctx := context.Background()
	c := &clock{now: t0}
	s, _ := openTest(t, WithClock(c.Now))
	// old ends before the window; mid runs into it; late is submitted after.
	mustSubmit(t, s, testJob("old").Obj(), testJob("mid").Submitted(t0.Add(time.Minute)).Obj(),
		testJob("late").Submitted(t0.Add(5*time.Hour)).Obj())
	c.Advance(10 * time.Minute)
	for _, id := range []cluster.JobID{"old", "mid"} {
		if _, err := s.UpdateJob(ctx, id, to(c, cluster.StateRunning, EventStarted)); err != nil {
			t.Fatal(err)
		}
	}
	c.Advance(time.Hour)
	if _, err := s.UpdateJob(ctx, "old", to(c, cluster.StateSucceeded, EventFinished)); err != nil {
		t.Fatal(err)
	}
	from := c.Now().Add(time.Minute)
	c.Advance(2 * time.Hour)
	if _, err := s.UpdateJob(ctx, "mid", to(c, cluster.StateFailed, EventFailed)); err != nil {
		t.Fatal(err)
	}
	until := t0.Add(4 * time.Hour)
	jobs, err := s.JobsLiveIn(ctx, from, until)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(jobs); len(got) != 1 || got[0] != "mid" {
		t.Errorf("jobs in the window: %v, want [mid]", got)
	}
	evs, err := s.EventsIn(ctx, from, until)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].JobID != "mid" || evs[0].Type != EventFailed {
		t.Errorf("events in the window: %+v, want mid's failure", evs)
	}
}
