package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// querier is what *sql.DB and *sql.Tx share for reading.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// inTx runs fn in a write transaction (BEGIN IMMEDIATE) on the writer
// connection and commits it if fn returns nil; otherwise it rolls back, and
// nothing fn wrote is kept. The rollback is deferred so that even a panic
// in fn (a caller's UpdateFunc) gives the writer connection back.
func (s *Store) inTx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	defer s.rollback(tx)
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// rollback rolls tx back unless it is done already.
func (s *Store) rollback(tx *sql.Tx) {
	if err := tx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
		s.log.Warn("rollback failed", "error", err)
	}
}
