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

	"github.com/prescient-sched/prescient/cluster"
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
	// QueueSize bounds each hook's undelivered events (default 1000): its
	// in-memory queue, or with an Outbox, about how many of its rows the
	// outbox holds. An event that finds the bound reached is dropped for
	// that hook, counted and logged.
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
	// Outbox, when set, holds every event until its hook acknowledged it
	// or the notifier gave up on it, and each hook's sender reads its
	// events from there: events a stop (or a crash) leaves undelivered are
	// sent by the next run. *store.Store is one.
	Outbox Outbox
	// Recorder, with an Outbox, is the store that records the job events:
	// New has it write each job event's deliveries in the transaction that
	// records the event (store.SetEventOutbox), so that no event the store
	// accepted is lost, and Notify then only wakes the senders for job
	// events. *store.Store is one; serve passes the same store as Outbox.
	Recorder EventRecorder
	// PollInterval is how often a sender with an Outbox looks for events
	// it was not woken for (default 1 s).
	PollInterval time.Duration
}

// Outbox is durable storage of the deliveries not done yet.
type Outbox interface {
	AddWebhookDelivery(ctx context.Context, d store.WebhookDelivery) error
	DeleteWebhookDelivery(ctx context.Context, hook, id string) error
	// HookDeliveries lists up to limit of a hook's deliveries, oldest
	// first (all of them when limit is 0).
	HookDeliveries(ctx context.Context, hook string, limit int) ([]store.WebhookDelivery, error)
	WebhookDeliveryCounts(ctx context.Context) (map[string]int, error)
}

// EventRecorder records job events and writes their deliveries, as an
// EventOutbox makes them, in the same transaction.
type EventRecorder interface {
	SetEventOutbox(o store.EventOutbox)
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
	// With an Outbox: spool takes Notify's events to the outbox (those the
	// Recorder does not store), spoolDone ends when it has, and closing
	// tells the senders to end once their outbox is empty.
	spool     chan service.LifecycleEvent
	spoolDone chan struct{}
	closing   chan struct{}
	wg        sync.WaitGroup
	rmu       sync.Mutex // guards opts.Rand
	stats     struct{ delivered, failed, dropped, retries atomic.Int64 }
	metrics   *prometheus.CounterVec
}

var (
	_ service.Notifier  = (*Notifier)(nil)
	_ store.EventOutbox = (*Notifier)(nil)
)

// outboxBatch is how many deliveries a sender reads from the outbox at once.
const outboxBatch = 100

// sender is one hook's queue (without an Outbox) or its share of the
// outbox, and the goroutine that delivers them.
type sender struct {
	hook  Hook
	queue chan Payload // without an Outbox
	// With an Outbox: wake asks the sender to read the outbox now.
	wake        chan struct{}
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
	if opts.PollInterval <= 0 {
		opts.PollInterval = time.Second
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
	if opts.Outbox == nil {
		if opts.Recorder != nil {
			return nil, fmt.Errorf("webhook: a Recorder needs an Outbox")
		}
		for _, h := range cfg.Hooks {
			n.start(&sender{hook: withTimeout(h), queue: make(chan Payload, opts.QueueSize)}, n.run)
		}
		return n, nil
	}
	if err := n.startOutbox(cfg); err != nil {
		return nil, err
	}
	return n, nil
}

func withTimeout(h Hook) Hook {
	if h.Timeout == 0 {
		h.Timeout = DefaultTimeout
	}
	return h
}

func (n *Notifier) start(s *sender, run func(*sender)) {
	n.senders = append(n.senders, s)
	n.wg.Add(1)
	go run(s)
}

// startOutbox starts the senders that read the outbox, the spool, and
// has the Recorder store job events' deliveries. What an earlier run left
// undelivered is sent first, in its order; that of a hook no longer
// configured is dropped.
func (n *Notifier) startOutbox(cfg Config) error {
	ctx := context.Background()
	left, err := n.opts.Outbox.WebhookDeliveryCounts(ctx)
	if err != nil {
		return fmt.Errorf("webhook: outbox: %w", err)
	}
	n.spool = make(chan service.LifecycleEvent, n.opts.QueueSize)
	n.spoolDone = make(chan struct{})
	n.closing = make(chan struct{})
	for _, h := range cfg.Hooks {
		s := &sender{hook: withTimeout(h), wake: make(chan struct{}, 1)}
		if left[h.Name] > 0 {
			n.log.Info("webhook: sending the events an earlier run left undelivered", "hook", h.Name, "events", left[h.Name])
		}
		delete(left, h.Name)
		n.start(s, n.runOutbox)
	}
	for hook, count := range left {
		n.log.Warn("webhook: undelivered events of a hook no longer configured; dropped", "hook", hook, "events", count)
		ds, err := n.opts.Outbox.HookDeliveries(ctx, hook, 0)
		if err != nil {
			n.log.Warn("webhook: outbox", "hook", hook, "err", err)
		}
		for _, d := range ds {
			n.forget(hook, d.ID)
		}
	}
	go n.runSpool()
	if n.opts.Recorder != nil {
		n.opts.Recorder.SetEventOutbox(n)
	}
	return nil
}

// Notify queues the event for every hook that takes it. It never blocks:
// an event that finds a hook's queue full is dropped and counted. With a
// Recorder, a job event is in the outbox already and Notify only wakes
// the senders.
func (n *Notifier) Notify(_ context.Context, e service.LifecycleEvent) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	if n.opts.Recorder != nil && e.Job != "" {
		n.wakeAll()
		return
	}
	if n.closed {
		n.count(nil, "dropped")
		return
	}
	if n.opts.Outbox != nil {
		select {
		case n.spool <- e:
		default:
			for _, s := range n.senders {
				if s.takes(e) {
					n.count(s, "dropped")
					n.logDrop(s)
				}
			}
		}
		return
	}
	p := Payload{ID: newID(), LifecycleEvent: e}
	for _, s := range n.senders {
		if !s.takes(e) {
			continue
		}
		select {
		case s.queue <- p:
		default:
			n.count(s, "dropped")
			n.logDrop(s)
		}
	}
}

// Deliveries implements store.EventOutbox: the outbox rows of a job event
// the store records, one per hook that takes it and is under its bound.
// It runs inside the store's transaction.
func (n *Notifier) Deliveries(j cluster.Job, ev store.Event, queued func(hook string) int) []store.WebhookDelivery {
	e := service.LifecycleEvent{Type: string(ev.Type), Time: ev.Time, Job: j.ID, Tenant: j.Spec.Tenant, State: j.State,
		Attempt: j.Attempts, Message: ev.Message, Labels: j.Spec.Labels}
	if ev.Type == store.EventFinished || ev.Type == store.EventFailed {
		code := j.Outcome.ExitCode
		e.ExitCode = &code
	}
	return n.deliveries(e, time.Now(), queued)
}

// deliveries are the outbox rows of e: one per hook that takes it, unless
// the hook's outbox holds QueueSize deliveries (queued says how many)
// already: then the event is dropped for it.
func (n *Notifier) deliveries(e service.LifecycleEvent, now time.Time, queued func(hook string) int) []store.WebhookDelivery {
	var (
		out  []store.WebhookDelivery
		body []byte
	)
	p := Payload{ID: newID(), LifecycleEvent: e}
	for _, s := range n.senders {
		if !s.takes(e) {
			continue
		}
		if queued(s.hook.Name) >= n.opts.QueueSize {
			n.count(s, "dropped")
			n.logDrop(s)
			continue
		}
		if body == nil {
			b, err := json.Marshal(p)
			if err != nil {
				n.count(s, "failed")
				n.log.Error("webhook: event does not encode", "hook", s.hook.Name, "job", e.Job, "err", err)
				return nil
			}
			body = b
		}
		out = append(out, store.WebhookDelivery{Hook: s.hook.Name, ID: p.ID, Body: body, Created: now})
	}
	return out
}

// runSpool stores the events Notify spooled (those no Recorder stores)
// and wakes their senders; it ends when Close has closed the spool and it
// is empty.
func (n *Notifier) runSpool() {
	defer close(n.spoolDone)
	for e := range n.spool {
		// Read beside the job events' transactions: the bound holds to
		// within the deliveries those add meanwhile.
		counts, err := n.opts.Outbox.WebhookDeliveryCounts(context.Background())
		if err != nil {
			n.log.Warn("webhook: outbox unreadable; its bound is not checked", "err", err)
		}
		for _, d := range n.deliveries(e, time.Now(), func(hook string) int { return counts[hook] }) {
			if err := n.opts.Outbox.AddWebhookDelivery(context.Background(), d); err != nil {
				n.count(nil, "dropped")
				n.log.Warn("webhook: event not stored; dropped", "hook", d.Hook, "id", d.ID, "err", err)
			}
		}
		n.wakeAll()
	}
}

func (n *Notifier) wakeAll() {
	for _, s := range n.senders {
		select {
		case s.wake <- struct{}{}:
		default: // a wake is pending already
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
// an Outbox, kept there for the next run. A Recorder keeps writing the
// deliveries of the job events it records after Close: the next run sends
// them.
func (n *Notifier) Close(ctx context.Context) error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	for _, s := range n.senders {
		if s.queue != nil {
			close(s.queue)
		}
	}
	if n.spool != nil {
		close(n.spool)
	}
	n.mu.Unlock()
	done := make(chan struct{})
	go func() {
		if n.spool != nil {
			<-n.spoolDone
			close(n.closing)
		}
		n.wg.Wait()
		close(done)
	}()
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

// run delivers one hook's events from its in-memory queue, in order;
// what Close leaves queued is dropped and counted.
func (n *Notifier) run(s *sender) {
	defer n.wg.Done()
	for p := range s.queue {
		body, err := json.Marshal(p)
		if err != nil {
			n.count(s, "failed")
			n.log.Error("webhook: event does not encode", "hook", s.hook.Name, "job", p.Job, "err", err)
			continue
		}
		if n.stopped.Err() != nil {
			n.count(s, "dropped")
			continue
		}
		n.deliver(s, p, body)
	}
}

// runOutbox delivers one hook's events from the outbox, oldest first, and
// deletes each once done. It reads the outbox when woken and every
// PollInterval; it ends when Close stops it, leaving what is not done in
// the outbox, or when the notifier is closing and its outbox is empty.
func (n *Notifier) runOutbox(s *sender) {
	defer n.wg.Done()
	for {
		ds, err := n.opts.Outbox.HookDeliveries(n.stopped, s.hook.Name, outboxBatch)
		if err != nil && n.stopped.Err() == nil {
			n.log.Warn("webhook: outbox unreadable; will try again", "hook", s.hook.Name, "err", err)
		}
		if len(ds) == 0 {
			if !n.idle(s) {
				return
			}
			continue
		}
		for _, d := range ds {
			if n.stopped.Err() != nil {
				return
			}
			var p Payload
			if err := json.Unmarshal(d.Body, &p); err != nil {
				n.count(s, "failed")
				n.log.Warn("webhook: an undelivered event does not decode; dropped", "hook", s.hook.Name, "id", d.ID, "err", err)
				n.forget(s.hook.Name, d.ID)
				continue
			}
			if !n.deliver(s, p, d.Body) {
				return // cut short by Close: it stays in the outbox
			}
			n.forget(s.hook.Name, d.ID)
		}
	}
}

// idle waits until the sender is woken, PollInterval passes or the
// notifier is closing; false when the sender is to end.
func (n *Notifier) idle(s *sender) bool {
	select {
	case <-n.closing:
		return false
	default:
	}
	t := time.NewTimer(n.opts.PollInterval)
	defer t.Stop()
	select {
	case <-s.wake:
	case <-t.C:
	case <-n.closing:
	case <-n.stopped.Done():
		return false
	}
	return true
}

// forget deletes a delivery that is done from the outbox.
func (n *Notifier) forget(hook, id string) {
	if err := n.opts.Outbox.DeleteWebhookDelivery(context.Background(), hook, id); err != nil {
		n.log.Warn("webhook: a delivery done stays stored; it may be sent again", "hook", hook, "id", id, "err", err)
		return
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
