package collector_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

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

// A series names its device's node and index beside its UUID, so that a
// fleet that knows its GPUs only by node and index (Kubernetes) can find
// their telemetry.
func TestEmbeddedSeriesNameTheirNodeAndIndex(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "p.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	sink := collector.NewEmbeddedSink(st)
	if err := sink.Write(ctx, samples("GPU-a", t0, 5)); err != nil {
		t.Fatal(err)
	}
	for _, agg := range []string{"mean", "last"} {
		got, err := sink.Query(ctx, collector.SeriesQuery{Field: "util_gpu_pct", Start: t0, End: t0.Add(time.Minute), Step: time.Minute, Agg: agg})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].GPU != "GPU-a" || got[0].Node != "node-1" || got[0].Index != 3 {
			t.Errorf("%s: %+v, want GPU-a on node-1 at index 3", agg, got)
		}
	}
}
