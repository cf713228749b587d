package store

import (
	"context"
	"fmt"
	"time"
)

// WebhookDelivery is a lifecycle event on its way to one webhook (the
// webhook package's outbox).
type WebhookDelivery struct {
	Hook    string
	ID      string
	Body    []byte
	Created time.Time
}

// AddWebhookDelivery records a delivery before its first attempt; adding
// the same (hook, ID) again changes nothing.
func (s *Store) AddWebhookDelivery(ctx context.Context, d WebhookDelivery) error {
	t, err := unixNanos(d.Created)
	if err != nil {
		return fmt.Errorf("store: webhook delivery %s to %s: created: %w", d.ID, d.Hook, err)
	}
	if _, err := s.w.ExecContext(ctx, `INSERT INTO webhook_outbox (hook, id, body, created) VALUES (?, ?, ?, ?)
		ON CONFLICT (hook, id) DO NOTHING`, d.Hook, d.ID, string(d.Body), t); err != nil {
		return fmt.Errorf("store: webhook delivery %s to %s: %w", d.ID, d.Hook, err)
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
	rows, err := s.r.QueryContext(ctx, "SELECT hook, id, body, created FROM webhook_outbox ORDER BY seq")
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
