package webhook_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster/clustertest"
	"github.com/prescient-sched/prescient/store"
	"github.com/prescient-sched/prescient/webhook"
)

// Events a receiver did not take before the control plane stopped are in
// the store's outbox and reach the receiver when the next run starts, with
// the same ID and body; events done are not kept.
func TestUndeliveredEventsOutliveARestart(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "prescient.db")
	st, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	up := newReceiver(t)
	down := newReceiver(t, http.StatusServiceUnavailable, http.StatusServiceUnavailable, http.StatusServiceUnavailable,
		http.StatusServiceUnavailable, http.StatusServiceUnavailable, http.StatusServiceUnavailable)
	n, err := webhook.New(webhook.Config{Hooks: []webhook.Hook{hook("tracker", up.srv.URL), hook("pipeline", down.srv.URL)}},
		webhook.Options{Outbox: st, BaseDelay: time.Hour, MaxDelay: time.Hour, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	n.Notify(ctx, event("finished", "job-1", "ml"))
	n.Notify(ctx, event("started", "job-2", "ml"))
	<-down.arrived // pipeline's first attempt failed; its retry waits an hour
	eventually(t, "the tracker got both events", func() bool { return len(up.deliveries()) == 2 })
	stopCtx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if err := n.Close(stopCtx); err == nil {
		t.Fatal("Close did not give up on the retry an hour away")
	}
	left, err := st.WebhookDeliveries(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 2 || left[0].Hook != "pipeline" || left[1].Hook != "pipeline" {
		t.Fatalf("outbox after the stop: %+v; want pipeline's two events only", left)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	// The next run: the pipeline's receiver is back.
	st, err = store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	back := newReceiver(t)
	n, err = webhook.New(webhook.Config{Hooks: []webhook.Hook{hook("tracker", up.srv.URL), hook("pipeline", back.srv.URL)}},
		webhook.Options{Outbox: st, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	closeAll(t, n)
	got := back.deliveries()
	if len(got) != 2 {
		t.Fatalf("the pipeline got %d events after the restart, want 2", len(got))
	}
	for i, want := range []string{"job-1", "job-2"} {
		var p webhook.Payload
		if err := json.Unmarshal(got[i].body, &p); err != nil {
			t.Fatal(err)
		}
		if !got[i].sigOK || string(p.Job) != want || p.ID != left[i].ID {
			t.Errorf("delivery %d after the restart: job %s, id %s, signature ok %v; want %s with id %s, signed", i, p.Job, p.ID, got[i].sigOK, want, left[i].ID)
		}
	}
	if n := len(up.deliveries()); n != 2 {
		t.Errorf("the tracker got %d events in all, want its 2 once", n)
	}
	if left, _ := st.WebhookDeliveries(ctx); len(left) != 0 {
		t.Errorf("outbox after delivery: %+v; want empty", left)
	}
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// eventually polls cond for up to 10s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("%s: not within 10s", what)
}

// A receiver down for long does not let the outbox grow without end: past
// QueueSize a hook's new events are dropped, counted and logged, and the
// ones stored wait for it.
func TestTheOutboxOfAHookDownIsBounded(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "prescient.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	down := newReceiver(t, http.StatusServiceUnavailable)
	n, err := webhook.New(webhook.Config{Hooks: []webhook.Hook{hook("pipeline", down.srv.URL)}},
		webhook.Options{Outbox: st, Recorder: st, QueueSize: 5, BaseDelay: time.Hour, MaxDelay: time.Hour, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		j := clustertest.Job(fmt.Sprintf("job-%02d", i)).Tenant("ml").Submitted(time.Now()).Obj()
		if err := st.SubmitJob(ctx, j); err != nil {
			t.Fatal(err)
		}
		n.Notify(ctx, event("submitted", string(j.ID), "ml"))
	}
	stopCtx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_ = n.Close(stopCtx)
	left, err := st.WebhookDeliveries(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s := n.Stats(); len(left) != 5 || s.Dropped != 15 {
		t.Fatalf("outbox %d, dropped %d; want 5 kept and 15 dropped", len(left), s.Dropped)
	}
}
