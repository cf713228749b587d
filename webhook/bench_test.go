package webhook_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prescient-sched/prescient/webhook"
)

// BenchmarkNotify is what the control plane pays per event with three
// hooks (one filtered out by tenant): an ID, the filters and the queue
// sends. Events arrive far faster than local receivers take them, so most
// are dropped (reported as "dropped"): Notify does not wait for senders.
func BenchmarkNotify(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) }))
	defer srv.Close()
	other := hook("other-tenant", srv.URL)
	other.Tenants = []string{"vision"}
	n, err := webhook.New(webhook.Config{Hooks: []webhook.Hook{hook("a", srv.URL), hook("b", srv.URL), other}},
		webhook.Options{QueueSize: 1 << 16, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	e := event("started", "bert-7", "ml")
	for b.Loop() {
		n.Notify(ctx, e)
	}
	b.StopTimer()
	_ = n.Close(ctx)
	s := n.Stats()
	b.ReportMetric(float64(s.Dropped), "dropped")
}
