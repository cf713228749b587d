package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Loan is an inference node lent to training, being taken back, or
// serving inference again after a loan.
type Loan struct {
	Node, Pool string
	// State is "lent", "returning" or "serving", since Since.
	State string
	Since time.Time
	// Spans are its recent loans, oldest first (the caller decides how
	// far back they go).
	Spans []LoanSpan
}

// LoanSpan is a stretch of time a node's GPUs were training's: Until is
// zero while it lasts.
type LoanSpan struct{ From, Until time.Time }

// PutLoan records a node's loan state.
func (s *Store) PutLoan(ctx context.Context, l Loan) error {
	if l.State != "lent" && l.State != "returning" && l.State != "serving" {
		return fmt.Errorf("store: loan of node %s: state %q, want lent, returning or serving", l.Node, l.State)
	}
	t, err := unixNanos(l.Since)
	if err != nil {
		return fmt.Errorf("store: loan of node %s: since: %w", l.Node, err)
	}
	spans := make([][2]int64, len(l.Spans))
	for i, sp := range l.Spans {
		if spans[i][0], err = unixNanos(sp.From); err != nil {
			return fmt.Errorf("store: loan of node %s: span %d: %w", l.Node, i, err)
		}
		if !sp.Until.IsZero() {
			if spans[i][1], err = unixNanos(sp.Until); err != nil {
				return fmt.Errorf("store: loan of node %s: span %d: %w", l.Node, i, err)
			}
		}
	}
	js, err := json.Marshal(spans)
	if err != nil {
		return fmt.Errorf("store: loan of node %s: %w", l.Node, err)
	}
	if _, err := s.w.ExecContext(ctx, `INSERT INTO node_loans (node, pool, state, since, spans) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (node) DO UPDATE SET pool = excluded.pool, state = excluded.state, since = excluded.since, spans = excluded.spans`,
		l.Node, l.Pool, l.State, t, string(js)); err != nil {
		return fmt.Errorf("store: loan of node %s: %w", l.Node, err)
	}
	return nil
}

// DeleteLoan forgets a node's loans (it is no longer an inference node).
// Deleting one that is not there is no error.
func (s *Store) DeleteLoan(ctx context.Context, node string) error {
	if _, err := s.w.ExecContext(ctx, "DELETE FROM node_loans WHERE node = ?", node); err != nil {
		return fmt.Errorf("store: forget loans of node %s: %w", node, err)
	}
	return nil
}

// Loans lists the loans by node.
func (s *Store) Loans(ctx context.Context) ([]Loan, error) {
	rows, err := s.r.QueryContext(ctx, "SELECT node, pool, state, since, spans FROM node_loans ORDER BY node")
	if err != nil {
		return nil, fmt.Errorf("store: loans: %w", err)
	}
	defer rows.Close()
	var out []Loan
	for rows.Next() {
		var (
			l     Loan
			t     int64
			spans string
		)
		if err := rows.Scan(&l.Node, &l.Pool, &l.State, &t, &spans); err != nil {
			return nil, fmt.Errorf("store: loans: %w", err)
		}
		var sp [][2]int64
		if err := json.Unmarshal([]byte(spans), &sp); err != nil {
			return nil, fmt.Errorf("store: loans: node %s: spans: %w", l.Node, err)
		}
		l.Since = time.Unix(0, t).UTC()
		for _, s := range sp {
			span := LoanSpan{From: time.Unix(0, s[0]).UTC()}
			if s[1] != 0 {
				span.Until = time.Unix(0, s[1]).UTC()
			}
			l.Spans = append(l.Spans, span)
		}
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: loans: %w", err)
	}
	return out, nil
}
