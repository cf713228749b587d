package store

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
)

func TestWebhookDeliveriesOutliveTheStoreInOrder(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "prescient.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	for i, d := range []WebhookDelivery{
		{Hook: "tracker", ID: "b", Body: []byte(`{"id":"b"}`), Created: t0},
		{Hook: "tracker", ID: "a", Body: []byte(`{"id":"a"}`), Created: t0.Add(time.Second)},
		{Hook: "pipeline", ID: "b", Body: []byte(`{"id":"b"}`), Created: t0.Add(2 * time.Second)},
		{Hook: "tracker", ID: "b", Body: []byte(`{"id":"changed"}`), Created: t0.Add(3 * time.Second)}, // a repeat: no change
	} {
		if err := s.AddWebhookDelivery(ctx, d); err != nil {
			t.Fatalf("add %d: %v", i, err)
		}
	}
	if err := s.DeleteWebhookDelivery(ctx, "tracker", "a"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteWebhookDelivery(ctx, "tracker", "never-added"); err != nil {
		t.Fatalf("deleting a delivery that is not there: %v", err)
	}
	s = reopen(t, s, path)
	got, err := s.WebhookDeliveries(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Hook != "tracker" || got[0].ID != "b" || string(got[0].Body) != `{"id":"b"}` ||
		!got[0].Created.Equal(t0) || got[1].Hook != "pipeline" || got[1].ID != "b" {
		t.Fatalf("deliveries after a reopen: %+v; want tracker/b (its first body) then pipeline/b", got)
	}
}

// hookPerEvent is an EventOutbox with one delivery per event, to "h".
type hookPerEvent struct{}

func (hookPerEvent) Deliveries(j cluster.Job, ev Event, _ func(string) int) []WebhookDelivery {
	return []WebhookDelivery{{Hook: "h", ID: fmt.Sprintf("%s-%d", ev.Type, ev.ID), Body: []byte(string(j.ID)), Created: ev.Time}}
}

// The outbox row of a job event is written with the event, both or
// neither: an update that fails leaves no delivery behind.
func TestAJobEventsDeliveriesAreWrittenWithIt(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "prescient.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close() }()
	s.SetEventOutbox(hookPerEvent{})
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	if err := s.SubmitJob(ctx, testJob("j1").Submitted(t0).Obj()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateJob(ctx, "j1", func(j *cluster.Job) (EventType, string, error) {
		return EventStarted, "", j.Transition(cluster.StateRunning, t0)
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateJob(ctx, "j1", func(j *cluster.Job) (EventType, string, error) {
		return EventFinished, "", errors.New("refused")
	}); err == nil {
		t.Fatal("a refused update succeeded")
	}
	s.SetEventOutbox(nil)
	if err := s.SubmitJob(ctx, testJob("j2").Submitted(t0).Obj()); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, s, path)
	got, err := s.HookDeliveries(ctx, "h", 0)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := s.Events(ctx, "j1")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || len(evs) != 2 || got[0].ID != fmt.Sprintf("submitted-%d", evs[0].ID) || got[1].ID != fmt.Sprintf("started-%d", evs[1].ID) {
		t.Fatalf("deliveries %+v for events %+v; want j1's submitted and started, in order", got, evs)
	}
	if counts, err := s.WebhookDeliveryCounts(ctx); err != nil || counts["h"] != 2 || len(counts) != 1 {
		t.Errorf("counts %v (%v), want h:2", counts, err)
	}
	if got, err := s.HookDeliveries(ctx, "h", 1); err != nil || len(got) != 1 || got[0].ID != fmt.Sprintf("submitted-%d", evs[0].ID) {
		t.Errorf("the first delivery %+v (%v)", got, err)
	}
}
