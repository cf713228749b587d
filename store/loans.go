package store

import (
	"context"
	"fmt"
	"time"
)

// Loan is an inference node lent to training, being taken back, or
// serving inference again after a loan.
type Loan struct {
	Node, Pool string
	// State is "lent", "returning" or "serving", since Since; LentAt is
	// when the last loan began.
	State         string
	Since, LentAt time.Time
}

// PutLoan records a loan or its new state.
func (s *Store) PutLoan(ctx context.Context, l Loan) error {
	if l.State != "lent" && l.State != "returning" && l.State != "serving" {
		return fmt.Errorf("store: loan of node %s: state %q, want lent, returning or serving", l.Node, l.State)
	}
	t, err := unixNanos(l.Since)
	if err != nil {
		return fmt.Errorf("store: loan of node %s: since: %w", l.Node, err)
	}
	lentAt, err := unixNanos(l.LentAt)
	if err != nil {
		return fmt.Errorf("store: loan of node %s: lent at: %w", l.Node, err)
	}
	if _, err := s.w.ExecContext(ctx, `INSERT INTO node_loans (node, pool, state, since, lent_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (node) DO UPDATE SET pool = excluded.pool, state = excluded.state, since = excluded.since, lent_at = excluded.lent_at`,
		l.Node, l.Pool, l.State, t, lentAt); err != nil {
		return fmt.Errorf("store: loan of node %s: %w", l.Node, err)
	}
	return nil
}

// DeleteLoan forgets a node's loans (it is no longer an inference node).
// Deleting one that is not there is no error.
func (s *Store) DeleteLoan(ctx context.Context, node string) error {
	if _, err := s.w.ExecContext(ctx, "DELETE FROM node_loans WHERE node = ?", node); err != nil {
		return fmt.Errorf("store: end loan of node %s: %w", node, err)
	}
	return nil
}

// Loans lists the loans by node.
func (s *Store) Loans(ctx context.Context) ([]Loan, error) {
	rows, err := s.r.QueryContext(ctx, "SELECT node, pool, state, since, lent_at FROM node_loans ORDER BY node")
	if err != nil {
		return nil, fmt.Errorf("store: loans: %w", err)
	}
	defer rows.Close()
	var out []Loan
	for rows.Next() {
		var (
			l         Loan
			t, lentAt int64
		)
		if err := rows.Scan(&l.Node, &l.Pool, &l.State, &t, &lentAt); err != nil {
			return nil, fmt.Errorf("store: loans: %w", err)
		}
		l.Since, l.LentAt = time.Unix(0, t).UTC(), time.Unix(0, lentAt).UTC()
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: loans: %w", err)
	}
	return out, nil
}
