package webhook_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/service"
	"github.com/prescient-sched/prescient/webhook"
)

const secret = "a-shared-secret-of-the-tracker"

// receiver is an httptest server that records what it gets and answers
// with the statuses it is given, then 200.
type receiver struct {
	t        *testing.T
	srv      *httptest.Server
	mu       sync.Mutex
	got      []delivery
	statuses []int
	block    chan struct{} // when set, each request waits for it to close
	arrived  chan struct{} // gets a value as each request arrives
}

type delivery struct {
	header http.Header
	body   []byte
	sigOK  bool
}

func newReceiver(t *testing.T, statuses ...int) *receiver {
	r := &receiver{t: t, statuses: statuses, arrived: make(chan struct{}, 1000)}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.arrived <- struct{}{}
		if r.block != nil {
			<-r.block
		}
		r.mu.Lock()
		r.got = append(r.got, delivery{header: req.Header.Clone(), body: body, sigOK: webhook.Verify([]byte(secret), body, req.Header.Get(webhook.SignatureHeader))})
		status := http.StatusOK
		if len(r.statuses) > 0 {
			status, r.statuses = r.statuses[0], r.statuses[1:]
		}
		r.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) deliveries() []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]delivery(nil), r.got...)
}

func newNotifier(t *testing.T, hooks []webhook.Hook, opts webhook.Options) *webhook.Notifier {
	t.Helper()
	opts.BaseDelay = time.Millisecond
	opts.MaxDelay = 4 * time.Millisecond
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	n, err := webhook.New(webhook.Config{Hooks: hooks}, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	return n
}

func hook(name, url string) webhook.Hook {
	return webhook.Hook{Name: name, URL: url, Secret: []byte(secret)}
}

func event(typ, job, tenant string) service.LifecycleEvent {
	code := 0
	return service.LifecycleEvent{
		Type: typ, Time: time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC), Job: cluster.JobID(job), Tenant: tenant,
		State: cluster.StateSucceeded, Attempt: 1, Labels: map[string]string{"experiment": "e1", "run": "7"}, ExitCode: &code,
	}
}

// closeAll closes the notifier, which waits until the queue is delivered.
func closeAll(t *testing.T, n *webhook.Notifier) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestDeliveryIsSignedAndCarriesTheEventWithLabels(t *testing.T) {
	r := newReceiver(t)
	n := newNotifier(t, []webhook.Hook{hook("tracker", r.srv.URL)}, webhook.Options{})
	n.Notify(context.Background(), event("finished", "bert-7", "ml"))
	closeAll(t, n)
	got := r.deliveries()
	if len(got) != 1 {
		t.Fatalf("%d deliveries, want 1", len(got))
	}
	d := got[0]
	if !d.sigOK {
		t.Fatalf("signature %q does not verify over %s", d.header.Get(webhook.SignatureHeader), d.body)
	}
	if d.header.Get("Content-Type") != "application/json" || d.header.Get("X-Prescient-Event") != "finished" || d.header.Get("X-Prescient-Delivery") == "" {
		t.Fatalf("headers: %v", d.header)
	}
	var p webhook.Payload
	if err := json.Unmarshal(d.body, &p); err != nil {
		t.Fatal(err)
	}
	if p.ID != d.header.Get("X-Prescient-Delivery") || p.Type != "finished" || p.Job != "bert-7" || p.Labels["run"] != "7" || p.ExitCode == nil || *p.ExitCode != 0 {
		t.Fatalf("payload %s", d.body)
	}
	if s := n.Stats(); s.Delivered != 1 || s.Failed != 0 || s.Dropped != 0 {
		t.Fatalf("stats %+v", s)
	}
}

func TestRetriesAfter500sWithTheSameDeliveryID(t *testing.T) {
	r := newReceiver(t, 500, 503, 429)
	n := newNotifier(t, []webhook.Hook{hook("tracker", r.srv.URL)}, webhook.Options{})
	n.Notify(context.Background(), event("started", "j1", "ml"))
	closeAll(t, n)
	got := r.deliveries()
	if len(got) != 4 {
		t.Fatalf("%d attempts, want 4 (three refused, one taken)", len(got))
	}
	for _, d := range got {
		if d.header.Get("X-Prescient-Delivery") != got[0].header.Get("X-Prescient-Delivery") || !d.sigOK {
			t.Fatal("a retry changed the delivery ID or the signature")
		}
	}
	if s := n.Stats(); s.Delivered != 1 || s.Retries != 3 || s.Failed != 0 {
		t.Fatalf("stats %+v", s)
	}
}

func TestA4xxIsNotRetriedAndRetriesEnd(t *testing.T) {
	bad := newReceiver(t, 400)
	down := newReceiver(t, 500, 500, 500, 500, 500, 500)
	reg := prometheus.NewRegistry()
	n := newNotifier(t, []webhook.Hook{hook("bad", bad.srv.URL), hook("down", down.srv.URL)}, webhook.Options{MaxAttempts: 3, Registerer: reg})
	n.Notify(context.Background(), event("failed", "j1", "ml"))
	closeAll(t, n)
	if len(bad.deliveries()) != 1 || len(down.deliveries()) != 3 {
		t.Fatalf("attempts: %d to the 400 hook (want 1), %d to the 500 hook (want 3)", len(bad.deliveries()), len(down.deliveries()))
	}
	if s := n.Stats(); s.Failed != 2 || s.Delivered != 0 {
		t.Fatalf("stats %+v", s)
	}
	failed, err := testutil.GatherAndCount(reg, "prescient_webhook_deliveries_total")
	if err != nil || failed == 0 {
		t.Fatalf("no delivery metrics: %d, %v", failed, err)
	}
}

func TestAFullQueueDropsAndNeverBlocks(t *testing.T) {
	r := newReceiver(t)
	r.block = make(chan struct{})
	n := newNotifier(t, []webhook.Hook{hook("slow", r.srv.URL)}, webhook.Options{QueueSize: 2})
	ctx := context.Background()
	n.Notify(ctx, event("started", "first", "ml"))
	<-r.arrived // the sender holds "first" at the stuck receiver
	done := make(chan struct{})
	go func() {
		for i := range 100 {
			n.Notify(ctx, event("started", "j"+strings.Repeat("x", i), "ml"))
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Notify blocked on a stuck receiver")
	}
	if s := n.Stats(); s.Dropped != 98 {
		t.Fatalf("dropped %d, want 98 (two fit the queue)", s.Dropped)
	}
	close(r.block)
	closeAll(t, n)
	if s := n.Stats(); s.Delivered != 3 {
		t.Fatalf("delivered %d, want 3", s.Delivered)
	}
}

func TestHooksTakeOnlyTheirEventsAndTenants(t *testing.T) {
	all := newReceiver(t)
	ends := newReceiver(t)
	mine := newReceiver(t)
	h2 := hook("ends", ends.srv.URL)
	h2.Events = []string{"finished", "failed"}
	h3 := hook("ml-only", mine.srv.URL)
	h3.Tenants = []string{"ml"}
	n := newNotifier(t, []webhook.Hook{hook("all", all.srv.URL), h2, h3}, webhook.Options{})
	ctx := context.Background()
	n.Notify(ctx, event("started", "j1", "ml"))
	n.Notify(ctx, event("finished", "j1", "ml"))
	n.Notify(ctx, event("failed", "j2", "vision"))
	closeAll(t, n)
	if a, e, m := len(all.deliveries()), len(ends.deliveries()), len(mine.deliveries()); a != 3 || e != 2 || m != 2 {
		t.Fatalf("deliveries: all %d (want 3), ends %d (want 2), ml-only %d (want 2)", a, e, m)
	}
	// Each hook gets its events in order.
	var p webhook.Payload
	if err := json.Unmarshal(all.deliveries()[0].body, &p); err != nil || p.Type != "started" {
		t.Fatalf("first delivery %s", all.deliveries()[0].body)
	}
}

func TestAServingControllerHearsTheLoansOfItsNodes(t *testing.T) {
	serving := newReceiver(t)
	mine := newReceiver(t)
	h := hook("serving", serving.srv.URL)
	h.Events = []string{"node_lent", "node_returning", "node_serving"}
	h2 := hook("ml-only", mine.srv.URL)
	h2.Tenants = []string{"ml"}
	n := newNotifier(t, []webhook.Hook{h, h2}, webhook.Options{})
	ctx := context.Background()
	n.Notify(ctx, event("started", "j1", "ml"))
	for _, typ := range []string{"node_lent", "node_returning", "node_serving"} {
		n.Notify(ctx, service.LifecycleEvent{Type: typ, Time: time.Now(), Node: "inf-3", Pool: "inference", Message: typ})
	}
	closeAll(t, n)
	if s, m := len(serving.deliveries()), len(mine.deliveries()); s != 3 || m != 1 {
		t.Fatalf("deliveries: serving %d (want the 3 loan events), ml-only %d (want its job's 1)", s, m)
	}
	var p webhook.Payload
	if err := json.Unmarshal(serving.deliveries()[0].body, &p); err != nil || p.Type != "node_lent" || p.Node != "inf-3" || p.Pool != "inference" || p.Job != "" {
		t.Fatalf("first loan delivery %s (%v)", serving.deliveries()[0].body, err)
	}
}

func TestCloseGivesUpWhenItsContextEnds(t *testing.T) {
	r := newReceiver(t)
	r.block = make(chan struct{})
	defer close(r.block)
	n := newNotifier(t, []webhook.Hook{hook("stuck", r.srv.URL)}, webhook.Options{QueueSize: 10})
	for range 5 {
		n.Notify(context.Background(), event("started", "j", "ml"))
	}
	<-r.arrived
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := n.Close(ctx); err == nil {
		t.Fatal("Close returned nil with a receiver that never answers")
	}
	s := n.Stats()
	if s.Dropped != 4 || s.Delivered != 0 {
		t.Fatalf("stats %+v; want the 4 queued events dropped", s)
	}
	n.Notify(context.Background(), event("started", "late", "ml"))
	if n.Stats().Dropped != 5 {
		t.Fatal("an event after Close was not counted as dropped")
	}
}
