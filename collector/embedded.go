package collector

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prescient-sched/prescient/store"
)

// EmbeddedStore is what the embedded sink needs of the store.
type EmbeddedStore interface {
	WriteTelemetry(ctx context.Context, rows []store.TelemetryRow) error
	QueryTelemetry(ctx context.Context, q store.TelemetryQuery) ([]store.TelemetrySeries, error)
	QueryJobMemory(ctx context.Context, q store.JobMemoryQuery) ([]store.JobMemorySeries, error)
	QueryJobGPUs(ctx context.Context, jobs []string, start, end time.Time) (map[string][]string, error)
}

// EmbeddedSink writes samples into the control plane's SQLite file and
// answers series queries from it; it is the sink when no InfluxDB is
// configured. It does not close the store, which its owner shares.
type EmbeddedSink struct {
	st EmbeddedStore
}

var (
	_ Sink           = (*EmbeddedSink)(nil)
	_ TelemetryStore = (*EmbeddedSink)(nil)
)

// NewEmbeddedSink makes a sink on st.
func NewEmbeddedSink(st EmbeddedStore) *EmbeddedSink { return &EmbeddedSink{st: st} }

// Write stores the batch in one transaction.
func (s *EmbeddedSink) Write(ctx context.Context, batch []Sample) error {
	rows := make([]store.TelemetryRow, len(batch))
	for i := range batch {
		rows[i] = toRow(&batch[i])
	}
	if err := s.st.WriteTelemetry(ctx, rows); err != nil {
		if errors.Is(err, store.ErrInvalidTelemetry) {
			return &RejectedError{Samples: len(batch), Err: err} // never retried, so it cannot block the spool
		}
		return err
	}
	return nil
}

func toRow(s *Sample) store.TelemetryRow {
	r := store.TelemetryRow{Time: s.Time, Node: s.Node, GPUUUID: s.UUID, GPUIndex: s.Index, Model: s.Model,
		Values: make(map[string]float64, len(Fields))}
	if s.MIG {
		r.ParentUUID, r.GPUInstanceID = s.ParentUUID, s.GPUInstanceID
	}
	for _, f := range Fields {
		if s.Has(f.Flag) {
			r.Values[f.Name] = f.value(s)
		}
	}
	for _, p := range s.Processes {
		r.Processes = append(r.Processes, store.TelemetryProcess{PID: p.PID, JobID: p.JobID, MemUsedBytes: int64(p.MemUsedBytes)})
	}
	return r
}

// Close does nothing: the store belongs to the caller.
func (s *EmbeddedSink) Close() error { return nil }

// Query answers a series query from the store.
func (s *EmbeddedSink) Query(ctx context.Context, q SeriesQuery) ([]Series, error) {
	if err := q.Validate(); err != nil {
		return nil, fmt.Errorf("telemetry query: %w", err)
	}
	res, err := s.st.QueryTelemetry(ctx, store.TelemetryQuery{Field: q.Field, GPUs: q.GPUs, Start: q.Start, End: q.End, Step: q.Step, Agg: q.Agg})
	if err != nil {
		return nil, err
	}
	out := make([]Series, len(res))
	for i, r := range res {
		out[i] = Series{GPU: r.GPUUUID, Node: r.Node, Model: r.Model, Points: make([]Point, len(r.Points))}
		for j, p := range r.Points {
			out[i].Points[j] = Point{Time: p.Time, Value: p.Value}
		}
	}
	return out, nil
}
