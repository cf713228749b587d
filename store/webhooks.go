package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/prescient-sched/prescient/cluster"
)

// WebhookDelivery is a lifecycle event on its way to one webhook (the
// webhook package's outbox).
type WebhookDelivery struct {
	Hook    string
	ID      string
	Body    []byte
	Created time.Time
}

// EventOutbox turns a job event, as the store records it, into the webhook
// deliveries to store with it (the webhook package's Notifier is one).
// Deliveries runs inside the transaction that records the event, with the
// store's writer held: it must be quick and must not call the Store.
// queued counts a hook's deliveries in the outbox, as the transaction sees
// them: exact, since one transaction writes at a time, so a bound on them
// holds.
type EventOutbox interface {
	Deliveries(job cluster.Job, ev Event, queued func(hook string) int) []WebhookDelivery
}

// SetEventOutbox makes every job event recorded from now on (SubmitJob,
// UpdateJob, StartJob, AdoptJob, RequestStop) write o's deliveries for it
// in the same transaction: an event the store accepted is in the outbox,
// whatever becomes of the process after. nil stops it.
func (s *Store) SetEventOutbox(o EventOutbox) {
	if o == nil {
		s.eventOutbox.Store(nil)
		return
	}
	s.eventOutbox.Store(&o)
}

// addEventDeliveries writes the outbox rows of ev in tx, when an
// EventOutbox is set.
func (s *Store) addEventDeliveries(ctx context.Context, tx *sql.Tx, job cluster.Job, ev Event) error {
	o := s.eventOutbox.Load()
	if o == nil {
		return nil
	}
	var errs []error
	queued := func(hook string) int {
		var n int
		if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM webhook_outbox WHERE hook = ?", hook).Scan(&n); err != nil {
			errs = append(errs, fmt.Errorf("count the outbox of hook %s: %w", hook, err))
		}
		return n
	}
	ds := (*o).Deliveries(job, ev, queued)
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for _, d := range ds {
		if err := insertWebhookDelivery(ctx, tx, d); err != nil {
			return err
		}
	}
	return nil
}

// execer is what *sql.DB and *sql.Tx share for writing.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

func insertWebhookDelivery(ctx context.Context, db execer, d WebhookDelivery) error {
	t, err := unixNanos(d.Created)
	if err != nil {
		return fmt.Errorf("webhook delivery %s to %s: created: %w", d.ID, d.Hook, err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO webhook_outbox (hook, id, body, created) VALUES (?, ?, ?, ?)
		ON CONFLICT (hook, id) DO NOTHING`, d.Hook, d.ID, string(d.Body), t); err != nil {
		return fmt.Errorf("webhook delivery %s to %s: %w", d.ID, d.Hook, err)
	}
	return nil
}

// AddWebhookDelivery records a delivery before its first attempt; adding
// the same (hook, ID) again changes nothing.
func (s *Store) AddWebhookDelivery(ctx context.Context, d WebhookDelivery) error {
	if err := insertWebhookDelivery(ctx, s.w, d); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	return nil
}

// DeleteWebhookDelivery forgets a delivery that is done (acknowledged or
// given up on); deleting one that is not there is no error.
func (s *Store) DeleteWebhookDelivery(ctx context.Context, hook, id string) error {
	if _, err := s.w.ExecContext(ctx, "DELETE FROM webhook_outbox WHERE hook = ? AND id = ?", hook, id); err != nil {
		return fmt.Errorf("store: delete webhook delivery %s to %s: %w", id, hook, err)
	}
	return nil
}

// WebhookDeliveries lists the deliveries not done, in the order they were
// added.
func (s *Store) WebhookDeliveries(ctx context.Context) ([]WebhookDelivery, error) {
	return s.webhookDeliveries(ctx, "SELECT hook, id, body, created FROM webhook_outbox ORDER BY seq")
}

// HookDeliveries lists up to limit of one hook's deliveries not done, in
// the order they were added (all of them when limit is 0).
func (s *Store) HookDeliveries(ctx context.Context, hook string, limit int) ([]WebhookDelivery, error) {
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	return s.webhookDeliveries(ctx, "SELECT hook, id, body, created FROM webhook_outbox WHERE hook = ? ORDER BY seq LIMIT ?", hook, limit)
}

// WebhookDeliveryCounts counts the deliveries not done, by hook.
func (s *Store) WebhookDeliveryCounts(ctx context.Context) (map[string]int, error) {
	rows, err := s.r.QueryContext(ctx, "SELECT hook, COUNT(*) FROM webhook_outbox GROUP BY hook")
	if err != nil {
		return nil, fmt.Errorf("store: webhook delivery counts: %w", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var (
			hook string
			n    int
		)
		if err := rows.Scan(&hook, &n); err != nil {
			return nil, fmt.Errorf("store: webhook delivery counts: %w", err)
		}
		out[hook] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: webhook delivery counts: %w", err)
	}
	return out, nil
}

func (s *Store) webhookDeliveries(ctx context.Context, query string, args ...any) ([]WebhookDelivery, error) {
	rows, err := s.r.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("store: webhook deliveries: %w", err)
	}
	defer rows.Close()
	var out []WebhookDelivery
	for rows.Next() {
		var (
			d    WebhookDelivery
			body string
			t    int64
		)
		if err := rows.Scan(&d.Hook, &d.ID, &body, &t); err != nil {
			return nil, fmt.Errorf("store: webhook deliveries: %w", err)
		}
		d.Body, d.Created = []byte(body), time.Unix(0, t).UTC()
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: webhook deliveries: %w", err)
	}
	return out, nil
}
