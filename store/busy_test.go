package store

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"testing"
)

// A write that meets another process's write lock past the busy timeout
// fails with an error IsBusy recognises, also when wrapped; other errors
// are not busy.
func TestIsBusyRecognisesALockHeldByAnotherConnection(t *testing.T) {
	ctx := context.Background()
	_, path := openTest(t)
	params := func(timeoutMS string) url.Values {
		return url.Values{"_busy_timeout": {timeoutMS}, "_txlock": {"immediate"}}
	}
	holder, err := sql.Open("sqlite", dsn(path, params("5000")))
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	tx, err := holder.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	other, err := sql.Open("sqlite", dsn(path, params("10")))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	_, err = other.BeginTx(ctx, nil)
	if err == nil {
		t.Fatal("a second writer began a transaction while the first held the write lock")
	}
	if !IsBusy(err) || !IsBusy(fmt.Errorf("store: update job j1: begin transaction: %w", err)) {
		t.Errorf("IsBusy(%v) = false", err)
	}
	for _, e := range []error{nil, ErrNotFound, fmt.Errorf("x: %w", ErrExists)} {
		if IsBusy(e) {
			t.Errorf("IsBusy(%v) = true", e)
		}
	}
}
