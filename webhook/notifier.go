package webhook

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/prescient-sched/prescient/service"
	"github.com/prescient-sched/prescient/store"
)

// Payload is the JSON body of a delivery: the event and an ID that stays
// the same across retries, so that a receiver can drop duplicates.
type Payload struct {
	ID string `json:"id"`
	service.LifecycleEvent
}

// Options tune a Notifier; zero fields take the defaults.
type Options struct {
	// QueueSize bounds each hook's queue of undelivered events (default
	// 1000); an event that finds it full is dropped.
	QueueSize int
	// MaxAttempts is how often one delivery is tried (default 6).
	MaxAttempts int
	// BaseDelay is the backoff before the first retry (default 1 s); it
	// doubles with each retry up to MaxDelay (default 1 min), and each
	// wait is drawn from [d/2, d].
	BaseDelay, MaxDelay time.Duration
	Client              *http.Client
	Logger              *slog.Logger
	// Rand draws the backoff jitter (default a randomly seeded source).
	Rand *mrand.Rand
	// Registerer, when set, gets the delivery counters.
	Registerer prometheus.Registerer
	// Outbox, when set, keeps each event until its hook acknowledged it
	// or the notifier gave up on it, so that a control plane that stops
	// while a receiver is down sends it when it starts again (New reads
	// what is left). *store.Store is one.
	Outbox Outbox
}

// Outbox is durable storage of the deliveries not done yet.
type Outbox interface {
	AddWebhookDelivery(ctx context.Context, d store.WebhookDelivery) error
	DeleteWebhookDelivery(ctx context.Context, hook, id string) error
	WebhookDeliveries(ctx context.Context) ([]store.WebhookDelivery, error)
}

// Stats count what a Notifier did, over all hooks.
type Stats struct {
	Delivered int64 // deliveries a receiver acknowledged (2xx)
	Failed    int64 // deliveries given up on after retries or a 4xx
	Dropped   int64 // events not queued: a queue was full or the notifier closed
	Retries   int64 // attempts after the first
}

// Notifier delivers lifecycle events to the hooks. It implements
// service.Notifier.
type Notifier struct {
	opts    Options
	log     *slog.Logger
	senders []*sender
	// mu makes Close's closing of the queues wait for Notify's sends.
	mu     sync.RWMutex
	closed bool
	// stopped ends when Close gives up waiting: attempts in flight are
	// cancelled and backoffs cut short.
	stopped context.Context
	stop    context.CancelFunc
	wg      sync.WaitGroup
	rmu     sync.Mutex // guards opts.Rand
	stats   struct{ delivered, failed, dropped, retries atomic.Int64 }
	metrics *prometheus.CounterVec
}

var _ service.Notifier = (*Notifier)(nil)

// item is one event for one hook; body is set for a delivery read back
// from the outbox (already stored, sent as it was first encoded).
type item struct {
	p    Payload
	body []byte
}

// sender is one hook's queue and the goroutine that empties it.
type sender struct {
	hook        Hook
	queue       chan item
	lastDropLog atomic.Int64 // unix nanoseconds
	dropsSince  atomic.Int64
}

// New validates the hooks and starts one sender per hook. Close stops them.
func New(cfg Config, opts Options) (*Notifier, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("webhook: %w", err)
	}
	if opts.QueueSize <= 0 {
		opts.QueueSize = 1000
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = 6
	}
	if opts.BaseDelay <= 0 {
		opts.BaseDelay = time.Second
	}
	if opts.MaxDelay <= 0 {
		opts.MaxDelay = time.Minute
	}
	if opts.Client == nil {
		opts.Client = &http.Client{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Rand == nil {
		opts.Rand = mrand.New(mrand.NewPCG(mrand.Uint64(), mrand.Uint64()))
	}
	n := &Notifier{opts: opts, log: opts.Logger.With("component", "webhook")}
	n.stopped, n.stop = context.WithCancel(context.Background())
	if opts.Registerer != nil {
		n.metrics = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "prescient_webhook_deliveries_total",
			Help: "Webhook deliveries by hook and result: delivered, failed (given up), dropped (queue full), retried (an attempt after the first).",
		}, []string{"hook", "result"})
		if err := opts.Registerer.Register(n.metrics); err != nil {
			return nil, fmt.Errorf("webhook: metrics: %w", err)
		}
	}
	// What an earlier run left undelivered goes first, in its order.
	left := map[string][]store.WebhookDelivery{}
	if opts.Outbox != nil {
		ds, err := opts.Outbox.WebhookDeliveries(context.Background())
		if err != nil {
			return nil, fmt.Errorf("webhook: outbox: %w", err)
		}
		for _, d := range ds {
			left[d.Hook] = append(left[d.Hook], d)
		}
	}
	for _, h := range cfg.Hooks {
		if h.Timeout == 0 {
			h.Timeout = DefaultTimeout
		}
		pending := left[h.Name]
		delete(left, h.Name)
		s := &sender{hook: h, queue: make(chan item, opts.QueueSize+len(pending))}
		for _, d := range pending {
			var p Payload
			if err := json.Unmarshal(d.Body, &p); err != nil {
				n.log.Warn("webhook: an undelivered event does not decode; dropped", "hook", h.Name, "id", d.ID, "err", err)
				n.forget(h.Name, d.ID)
				continue
			}
			s.queue <- item{p: p, body: d.Body}
		}
		if len(pending) > 0 {
			n.log.Info("webhook: sending the events an earlier run left undelivered", "hook", h.Name, "events", len(pending))
		}
		n.senders = append(n.senders, s)
		n.wg.Add(1)
		go n.run(s)
	}
	for hook, ds := range left {
		n.log.Warn("webhook: undelivered events of a hook no longer configured; dropped", "hook", hook, "events", len(ds))
		for _, d := range ds {
			n.forget(hook, d.ID)
		}
	}
	return n, nil
}

// Notify queues the event for every hook that takes it. It never blocks:
// an event that finds a hook's queue full is dropped and counted.
func (n *Notifier) Notify(_ context.Context, e service.LifecycleEvent) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	if n.closed {
		n.count(nil, "dropped")
		return
	}
	p := Payload{ID: newID(), LifecycleEvent: e}
	for _, s := range n.senders {
		if !s.takes(e) {
			continue
		}
		select {
		case s.queue <- item{p: p}:
		default:
			n.count(s, "dropped")
			n.logDrop(s)
		}
	}
}

func (s *sender) takes(e service.LifecycleEvent) bool {
	return (len(s.hook.Events) == 0 || slices.Contains(s.hook.Events, e.Type)) &&
		(len(s.hook.Tenants) == 0 || slices.Contains(s.hook.Tenants, e.Tenant))
}

// logDrop logs drops at most every ten seconds per hook, with how many.
func (n *Notifier) logDrop(s *sender) {
	s.dropsSince.Add(1)
	now := time.Now().UnixNano()
	last := s.lastDropLog.Load()
	if now-last < int64(10*time.Second) || !s.lastDropLog.CompareAndSwap(last, now) {
		return
	}
	n.log.Warn("webhook queue full: events dropped", "hook", s.hook.Name, "dropped", s.dropsSince.Swap(0), "queue", cap(s.queue))
}

// Close stops taking events and waits until the queued ones are delivered
// or ctx ends; what is still queued then is dropped and counted, or, with
// an Outbox, kept there for the next run.
func (n *Notifier) Close(ctx context.Context) error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	for _, s := range n.senders {
		close(s.queue)
	}
	n.mu.Unlock()
	done := make(chan struct{})
	go func() { n.wg.Wait(); close(done) }()
	select {
	case <-done:
		n.stop()
		return nil
	case <-ctx.Done():
		n.stop()
		<-done
		return fmt.Errorf("webhook: close: %w", ctx.Err())
	}
}

// Stats returns the counts so far.
func (n *Notifier) Stats() Stats {
	return Stats{
		Delivered: n.stats.delivered.Load(), Failed: n.stats.failed.Load(),
		Dropped: n.stats.dropped.Load(), Retries: n.stats.retries.Load(),
	}
}

// run delivers one hook's events in order. With an outbox, an event is
// stored before its first attempt and forgotten once done; what Close
// leaves (queued, or cut short) stays stored for the next run.
func (n *Notifier) run(s *sender) {
	defer n.wg.Done()
	for it := range s.queue {
		body := it.body
		if body == nil {
			b, err := json.Marshal(it.p)
			if err != nil {
				n.count(s, "failed")
				n.log.Error("webhook: event does not encode", "hook", s.hook.Name, "job", it.p.Job, "err", err)
				continue
			}
			body = b
			if n.opts.Outbox != nil {
				d := store.WebhookDelivery{Hook: s.hook.Name, ID: it.p.ID, Body: body, Created: time.Now()}
				if err := n.opts.Outbox.AddWebhookDelivery(context.Background(), d); err != nil {
					n.log.Warn("webhook: event not stored; it is sent, but lost if this process stops first", "hook", s.hook.Name, "id", it.p.ID, "err", err)
				}
			}
		}
		if n.stopped.Err() != nil {
			if n.opts.Outbox == nil {
				n.count(s, "dropped")
			}
			continue
		}
		if n.deliver(s, it.p, body) {
			n.forget(s.hook.Name, it.p.ID)
		}
	}
}

// forget deletes a delivery that is done from the outbox.
func (n *Notifier) forget(hook, id string) {
	if n.opts.Outbox == nil {
		return
	}
	if err := n.opts.Outbox.DeleteWebhookDelivery(context.Background(), hook, id); err != nil {
		n.log.Warn("webhook: a delivery done stays stored; it may be sent again", "hook", hook, "id", id, "err", err)
	}
}

// deliver posts one event, retrying what may succeed later. It says
// whether the event is done: acknowledged or given up on, not cut short by
// Close.
func (n *Notifier) deliver(s *sender, p Payload, body []byte) bool {
	sig := Sign(s.hook.Secret, body)
	var lastErr error
	for attempt := 1; attempt <= n.opts.MaxAttempts; attempt++ {
		if attempt > 1 {
			n.count(s, "retried")
			if !n.sleep(n.backoff(attempt - 1)) {
				break
			}
		}
		retry, err := n.post(s.hook, p, body, sig)
		if err == nil {
			n.count(s, "delivered")
			return true
		}
		lastErr = err
		if !retry {
			break
		}
		n.log.Debug("webhook delivery failed; will retry", "hook", s.hook.Name, "job", p.Job, "event", p.Type, "attempt", attempt, "err", err)
	}
	if n.stopped.Err() != nil && n.opts.Outbox != nil {
		n.log.Info("webhook delivery cut short by the shutdown; kept for the next run", "hook", s.hook.Name, "job", p.Job, "event", p.Type, "id", p.ID)
		return false
	}
	n.count(s, "failed")
	n.log.Warn("webhook delivery given up", "hook", s.hook.Name, "job", p.Job, "event", p.Type, "id", p.ID, "err", lastErr)
	return true
}

// post makes one attempt. retry says whether a later attempt may succeed:
// network errors, 408, 429 and 5xx answers.
func (n *Notifier) post(h Hook, p Payload, body []byte, sig string) (retry bool, err error) {
	ctx, cancel := context.WithTimeout(n.stopped, h.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.URL, bytes.NewReader(body))
	if err != nil {
		return false, fmt.Errorf("webhook %s: %w", h.Name, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "prescient-webhook")
	req.Header.Set(SignatureHeader, sig)
	req.Header.Set("X-Prescient-Event", p.Type)
	req.Header.Set("X-Prescient-Delivery", p.ID)
	resp, err := n.opts.Client.Do(req)
	if err != nil {
		return true, fmt.Errorf("webhook %s: %w", h.Name, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	switch c := resp.StatusCode; {
	case c >= 200 && c < 300:
		return false, nil
	case c == http.StatusRequestTimeout || c == http.StatusTooManyRequests || c >= 500:
		return true, fmt.Errorf("webhook %s: %s answered %d", h.Name, h.URL, c)
	default:
		return false, fmt.Errorf("webhook %s: %s answered %d (not retried)", h.Name, h.URL, c)
	}
}

// backoff is the wait before retry r (1-based): BaseDelay doubled r-1
// times, capped at MaxDelay, drawn from [d/2, d].
func (n *Notifier) backoff(r int) time.Duration {
	d := n.opts.MaxDelay
	if r-1 < 32 {
		d = min(n.opts.MaxDelay, n.opts.BaseDelay<<(r-1))
	}
	n.rmu.Lock()
	defer n.rmu.Unlock()
	return d/2 + time.Duration(n.opts.Rand.Int64N(int64(d/2)+1))
}

// sleep waits d; false when the notifier is stopping.
func (n *Notifier) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-n.stopped.Done():
		return false
	}
}

func (n *Notifier) count(s *sender, result string) {
	switch result {
	case "delivered":
		n.stats.delivered.Add(1)
	case "failed":
		n.stats.failed.Add(1)
	case "dropped":
		n.stats.dropped.Add(1)
	case "retried":
		n.stats.retries.Add(1)
	}
	if n.metrics != nil {
		name := ""
		if s != nil {
			name = s.hook.Name
		}
		n.metrics.WithLabelValues(name, result).Inc()
	}
}

// newID is a random delivery ID.
func newID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}
