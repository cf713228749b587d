package store

import (
	"context"
	"path/filepath"
	"testing"
	"time"
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
