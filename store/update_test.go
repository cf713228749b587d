package store

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
)

// to returns an UpdateFunc that moves the job to state at the clock's time
// and reports an event of type typ.
func to(c *clock, state cluster.JobState, typ EventType) UpdateFunc {
	return func(j *cluster.Job) (EventType, string, error) {
		return typ, "to " + string(state), j.Transition(state, c.Now())
	}
}

// checkpointAt returns an UpdateFunc that reports a checkpoint of step.
func checkpointAt(c *clock, step int64) UpdateFunc {
	return func(j *cluster.Job) (EventType, string, error) {
		cp := cluster.Checkpoint{Time: c.Now(), Step: step, Path: "/ckpt/" + string(j.ID)}
		return EventCheckpointed, "", j.Checkpointed(cp)
	}
}

func TestUpdateJobWalksTheLifeOfAJob(t *testing.T) {
	ctx := context.Background()
	c := &clock{now: t0.Add(time.Hour)}
	s, _ := openTest(t, WithClock(c.Now))
	mustSubmit(t, s, testJob("j1").Obj())
	steps := []struct {
		fn   UpdateFunc
		typ  EventType
		from cluster.JobState
		to   cluster.JobState
	}{
		{to(c, cluster.StateRunning, EventStarted), EventStarted, cluster.StateQueued, cluster.StateRunning},
		{to(c, cluster.StateCheckpointing, EventCheckpointRequested), EventCheckpointRequested, cluster.StateRunning, cluster.StateCheckpointing},
		{checkpointAt(c, 100), EventCheckpointed, cluster.StateCheckpointing, cluster.StateRunning},
		{checkpointAt(c, 200), EventCheckpointed, cluster.StateRunning, cluster.StateRunning},
		{to(c, cluster.StateCheckpointing, EventCheckpointRequested), EventCheckpointRequested, cluster.StateRunning, cluster.StateCheckpointing},
		{to(c, cluster.StateRunning, EventCheckpointAbandoned), EventCheckpointAbandoned, cluster.StateCheckpointing, cluster.StateRunning},
		{to(c, cluster.StateQueued, EventPreempted), EventPreempted, cluster.StateRunning, cluster.StateQueued},
		{to(c, cluster.StateRunning, EventStarted), EventStarted, cluster.StateQueued, cluster.StateRunning},
		{to(c, cluster.StateSucceeded, EventFinished), EventFinished, cluster.StateRunning, cluster.StateSucceeded},
	}
	want := []Event{{JobID: "j1", Time: t0, Type: EventSubmitted, To: cluster.StateQueued}}
	for _, st := range steps {
		c.Advance(10 * time.Minute)
		if _, err := s.UpdateJob(ctx, "j1", st.fn); err != nil {
			t.Fatalf("UpdateJob (%s): %v", st.typ, err)
		}
		want = append(want, Event{JobID: "j1", Time: c.Now(), Type: st.typ, From: st.from, To: st.to})
	}
	checkEvents(t, s, "j1", want)
	got, err := s.GetJob(ctx, "j1")
	if err != nil {
		t.Fatal(err)
	}
	if got.State != cluster.StateSucceeded || got.Attempts != 2 || got.LastCheckpoint.Step != 200 ||
		!got.EndTime.Equal(c.Now()) || got.Outcome.RunTime != 70*time.Minute {
		t.Errorf("job after its life = %+v", got)
	}
}

// checkEvents compares a job's events with want, ignoring IDs and, but for
// checkpoints, details.
func checkEvents(t *testing.T, s *Store, id cluster.JobID, want []Event) {
	t.Helper()
	events, err := s.Events(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != len(want) {
		t.Fatalf("%d events, want %d: %+v", len(events), len(want), events)
	}
	for i, ev := range events {
		if i > 0 && ev.ID <= events[i-1].ID {
			t.Errorf("event %d has ID %d, not above the one before", i, ev.ID)
		}
		w := want[i]
		if ev.JobID != w.JobID || !ev.Time.Equal(w.Time) || ev.Type != w.Type || ev.From != w.From || ev.To != w.To {
			t.Errorf("event %d = %+v, want %+v", i, ev, w)
		}
		checkDetails(t, ev)
	}
}

// checkDetails checks that a checkpointed event carries its checkpoint.
func checkDetails(t *testing.T, ev Event) {
	t.Helper()
	if ev.Type != EventCheckpointed {
		if ev.Details != nil {
			t.Errorf("%s event has details %s", ev.Type, ev.Details)
		}
		return
	}
	var d eventDetails
	if err := json.Unmarshal(ev.Details, &d); err != nil || d.Checkpoint == nil ||
		!fromNanos(d.Checkpoint.TimeUnixNs).Equal(ev.Time) {
		t.Errorf("checkpointed event details %s (%v), want its checkpoint at %s", ev.Details, err, ev.Time)
	}
}

func TestUpdateJobWritesNothingWhenItFails(t *testing.T) {
	errAgentGone := errors.New("agent gone")
	c := &clock{now: t0.Add(time.Hour)}
	tests := []struct {
		name string
		job  cluster.JobID
		fn   UpdateFunc
		is   error
	}{
		{"fn's own error", "queued", func(j *cluster.Job) (EventType, string, error) {
			_ = j.Transition(cluster.StateRunning, c.Now())
			return EventStarted, "", errAgentGone
		}, errAgentGone},
		{"a transition the state machine forbids", "done", to(c, cluster.StateRunning, EventStarted), cluster.ErrInvalidTransition},
		{"a state set around the state machine", "queued", func(j *cluster.Job) (EventType, string, error) {
			j.State = cluster.StateSucceeded
			return EventFinished, "", nil
		}, cluster.ErrInvalidTransition},
		{"an event type that names another state", "queued", to(c, cluster.StateRunning, EventFinished), nil},
		{"an event without a change of state", "queued", func(*cluster.Job) (EventType, string, error) {
			return EventRequeued, "", nil
		}, nil},
		{"a checkpointed event without a new checkpoint", "running", func(*cluster.Job) (EventType, string, error) {
			return EventCheckpointed, "", nil
		}, nil},
		{"a submitted event", "queued", to(c, cluster.StateCancelled, EventSubmitted), nil},
		{"an unknown event type", "queued", to(c, cluster.StateRunning, "exploded"), nil},
		{"a changed ID", "queued", func(j *cluster.Job) (EventType, string, error) {
			j.ID = "other"
			return EventStarted, "", j.Transition(cluster.StateRunning, c.Now())
		}, nil},
		{"a changed submit time", "queued", func(j *cluster.Job) (EventType, string, error) {
			j.SubmitTime = j.SubmitTime.Add(time.Second)
			return EventStarted, "", j.Transition(cluster.StateRunning, c.Now())
		}, nil},
		{"an invalid job", "queued", func(j *cluster.Job) (EventType, string, error) {
			j.Spec.GPUs = -1
			return EventStarted, "", j.Transition(cluster.StateRunning, c.Now())
		}, nil},
		{"a job that is not stored", "nope", to(c, cluster.StateRunning, EventStarted), ErrNotFound},
	}
	s, _ := openTest(t, WithClock(c.Now))
	mustSubmit(t, s, testJob("queued").Obj(), testJob("running").Obj(), testJob("done").Obj())
	for _, u := range []struct {
		id cluster.JobID
		fn UpdateFunc
	}{
		{"running", to(c, cluster.StateRunning, EventStarted)},
		{"running", checkpointAt(c, 1)},
		{"done", to(c, cluster.StateCancelled, EventCancelled)},
	} {
		if _, err := s.UpdateJob(context.Background(), u.id, u.fn); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkUnchanged(t, s, func() {
				_, err := s.UpdateJob(context.Background(), tt.job, tt.fn)
				if err == nil || (tt.is != nil && !errors.Is(err, tt.is)) {
					t.Errorf("UpdateJob: %v, want an error wrapping %v", err, tt.is)
				}
				t.Logf("error: %v", err)
			})
		})
	}
}

// checkUnchanged runs f and checks that it changed no stored job or event.
func checkUnchanged(t *testing.T, s *Store, f func()) {
	t.Helper()
	ctx := context.Background()
	before, err := s.ListJobs(ctx, JobFilter{})
	if err != nil {
		t.Fatal(err)
	}
	events := count(t, s, "SELECT COUNT(*) FROM job_events")
	f()
	after, err := s.ListJobs(ctx, JobFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(after, before) {
		t.Errorf("jobs changed:\n%+v\nwere\n%+v", after, before)
	}
	if n := count(t, s, "SELECT COUNT(*) FROM job_events"); n != events {
		t.Errorf("%d events, were %d", n, events)
	}
}

func TestUpdateJobIsAllOrNothing(t *testing.T) {
	c := &clock{now: t0.Add(time.Hour)}
	s, _ := openTest(t, WithClock(c.Now))
	mustSubmit(t, s, testJob("j1").Obj())
	// The job's row is updated before its event is inserted; make the insert
	// fail, as a full disk would, and the update must go too.
	_, err := s.w.Exec(`CREATE TRIGGER fail_event BEFORE INSERT ON job_events WHEN NEW.message = 'boom'
		BEGIN SELECT RAISE(ABORT, 'injected failure'); END`)
	if err != nil {
		t.Fatal(err)
	}
	checkUnchanged(t, s, func() {
		_, err := s.UpdateJob(context.Background(), "j1", func(j *cluster.Job) (EventType, string, error) {
			return EventStarted, "boom", j.Transition(cluster.StateRunning, c.Now())
		})
		if err == nil {
			t.Error("UpdateJob succeeded although its event could not be stored")
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	checkUnchanged(t, s, func() {
		if _, err := s.UpdateJob(ctx, "j1", to(c, cluster.StateRunning, EventStarted)); !errors.Is(err, context.Canceled) {
			t.Errorf("UpdateJob with a cancelled context: %v, want context.Canceled", err)
		}
	})
}

func TestUpdateJobSurvivesAPanickingUpdateFunc(t *testing.T) {
	c := &clock{now: t0.Add(time.Hour)}
	s, _ := openTest(t, WithClock(c.Now))
	mustSubmit(t, s, testJob("j1").Obj())
	func() {
		defer func() { _ = recover() }()
		_, _ = s.UpdateJob(context.Background(), "j1", func(*cluster.Job) (EventType, string, error) { panic("bug") })
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := s.UpdateJob(ctx, "j1", to(c, cluster.StateRunning, EventStarted)); err != nil {
		t.Fatalf("UpdateJob after a panic: %v (the writer connection was not given back)", err)
	}
}
