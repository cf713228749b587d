package collector_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/prescient-sched/prescient/collector"
	"github.com/prescient-sched/prescient/store"
)

// A batch the embedded store can never take is rejected, not retried, so it
// cannot sit at the head of the spool forever.
func TestEmbeddedSinkRejectsABatchItCanNeverStore(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "p.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	bad := samples("", t0, 3) // no GPU UUID
	err = collector.NewEmbeddedSink(st).Write(ctx, bad)
	var rej *collector.RejectedError
	if !errors.As(err, &rej) || rej.Samples != 3 || !errors.Is(err, store.ErrInvalidTelemetry) {
		t.Fatalf("Write of rows without a GPU UUID = %v; want a RejectedError of 3 samples wrapping ErrInvalidTelemetry", err)
	}
}
