package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"
)

// TelemetryFields are the numeric fields of a GPU sample, as named in the
// InfluxDB gpu measurement and in the gpu_samples table.
var TelemetryFields = []string{
	"util_gpu_pct", "util_mem_pct", "mem_used_bytes", "mem_total_bytes", "power_w", "energy_j",
	"temperature_c", "sm_clock_mhz", "power_limit_w", "throttle_reasons", "ecc_corrected_total",
	"ecc_uncorrected_total", "xid_errors_total",
}

// TelemetryRow is one device sample. Values holds the fields that were
// read, by name (TelemetryFields); the others are stored as NULL.
type TelemetryRow struct {
	Time          time.Time
	Node          string
	GPUUUID       string
	GPUIndex      int
	Model         string
	ParentUUID    string // MIG devices only
	GPUInstanceID int    // MIG devices only
	Values        map[string]float64
	Processes     []TelemetryProcess
}

// TelemetryProcess is a compute process on the device at the row's time.
type TelemetryProcess struct {
	PID          int
	JobID        string
	MemUsedBytes int64
}

// WriteTelemetry stores rows in one transaction. A row for a device and
// time that is stored already replaces it (as InfluxDB keeps one point per
// series and time), so writing a batch twice stores it once.
func (s *Store) WriteTelemetry(ctx context.Context, rows []TelemetryRow) error {
	if len(rows) == 0 {
		return nil
	}
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		sampleStmt, err := tx.PrepareContext(ctx, insertSampleSQL)
		if err != nil {
			return err
		}
		defer sampleStmt.Close()
		procStmt, err := tx.PrepareContext(ctx, `INSERT OR REPLACE INTO gpu_processes
			(gpu_uuid, time_ns, pid, node, job_id, mem_used_bytes) VALUES (?, ?, ?, ?, ?, ?)`)
		if err != nil {
			return err
		}
		defer procStmt.Close()
		args := make([]any, 0, 7+len(TelemetryFields))
		for i := range rows {
			r := &rows[i]
			if r.GPUUUID == "" {
				return fmt.Errorf("row %d: no GPU UUID: %w", i, ErrInvalidTelemetry)
			}
			ts, err := unixNanos(r.Time)
			if err != nil {
				return fmt.Errorf("row %d: %w: %w", i, ErrInvalidTelemetry, err)
			}
			for name := range r.Values {
				if !slices.Contains(TelemetryFields, name) {
					return fmt.Errorf("row %d: unknown field %q: %w", i, name, ErrInvalidTelemetry)
				}
			}
			var gi sql.NullInt64
			if r.ParentUUID != "" {
				gi = sql.NullInt64{Int64: int64(r.GPUInstanceID), Valid: true}
			}
			args = append(args[:0], r.GPUUUID, ts, r.Node, r.GPUIndex, r.Model, r.ParentUUID, gi)
			for _, f := range TelemetryFields {
				if v, ok := r.Values[f]; ok {
					args = append(args, v)
				} else {
					args = append(args, nil)
				}
			}
			if _, err := sampleStmt.ExecContext(ctx, args...); err != nil {
				return fmt.Errorf("insert sample: %w", err)
			}
			for _, p := range r.Processes {
				if _, err := procStmt.ExecContext(ctx, r.GPUUUID, ts, p.PID, r.Node, p.JobID, p.MemUsedBytes); err != nil {
					return fmt.Errorf("insert process: %w", err)
				}
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: write telemetry: %w", err)
	}
	return nil
}

var insertSampleSQL = "INSERT OR REPLACE INTO gpu_samples (gpu_uuid, time_ns, node, gpu_index, model, parent_uuid, gpu_instance_id, " +
	strings.Join(TelemetryFields, ", ") + ") VALUES (?, ?, ?, ?, ?, ?, ?" + strings.Repeat(", ?", len(TelemetryFields)) + ")"

// TelemetryQuery asks for the series of one field.
type TelemetryQuery struct {
	Field string
	// GPUs are the UUIDs of the devices; none means every device.
	GPUs       []string
	Start, End time.Time // the range [Start, End)
	// Step is the width of the windows the values are aggregated over;
	// windows are aligned to multiples of Step since the Unix epoch, and a
	// window is labelled with its start (or Start, for the first one when
	// Start is not aligned).
	Step time.Duration
	// Agg is how a window's values become one: "mean" (default), "max",
	// "min" or "last".
	Agg string
}

// TelemetrySeries is one device's series.
type TelemetrySeries struct {
	GPUUUID string
	Node    string
	Model   string // the GPU model its samples name ("" when none does)
	Points  []TelemetryPoint
}

// TelemetryPoint is one window's value.
type TelemetryPoint struct {
	Time  time.Time
	Value float64
}

// QueryTelemetry returns one series per device that has values in the
// range, ordered by UUID, each point a window of q.Step (windows without
// values are left out).
func (s *Store) QueryTelemetry(ctx context.Context, q TelemetryQuery) ([]TelemetrySeries, error) {
	out, err := s.queryTelemetry(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("store: query telemetry %s: %w", q.Field, err)
	}
	return out, nil
}

func (s *Store) queryTelemetry(ctx context.Context, q TelemetryQuery) ([]TelemetrySeries, error) {
	if !slices.Contains(TelemetryFields, q.Field) {
		return nil, fmt.Errorf("unknown field; the fields are %s", strings.Join(TelemetryFields, ", "))
	}
	if q.Step <= 0 {
		return nil, fmt.Errorf("step %s: want a positive duration", q.Step)
	}
	if !q.End.After(q.Start) {
		return nil, fmt.Errorf("range [%s, %s) is empty", q.Start.Format(time.RFC3339Nano), q.End.Format(time.RFC3339Nano))
	}
	start, err := unixNanos(q.Start)
	if err != nil {
		return nil, err
	}
	end, err := unixNanos(q.End)
	if err != nil {
		return nil, err
	}
	var agg string
	switch q.Agg {
	case "", "mean":
		agg = "AVG"
	case "max":
		agg = "MAX"
	case "min":
		agg = "MIN"
	case "last":
		agg = "last" // handled below
	default:
		return nil, fmt.Errorf("aggregate %q: want mean, max, min or last", q.Agg)
	}
	step := q.Step.Nanoseconds()
	col := q.Field // checked against TelemetryFields above
	value, model := agg+"("+col+")", "COALESCE(MAX(model), '')"
	if agg == "last" {
		// SQLite takes the bare columns of the row where MAX(time_ns) is,
		// as long as it is the query's only min() or max().
		value, model = col+", MAX(time_ns)", "COALESCE(model, '')"
	}
	query := "SELECT gpu_uuid, node, MAX(?, (time_ns / ?) * ?) AS w, " + model + ", " + value +
		" FROM gpu_samples WHERE time_ns >= ? AND time_ns < ? AND " + col + " IS NOT NULL"
	args := []any{start, step, step, start, end}
	if len(q.GPUs) > 0 {
		query += " AND gpu_uuid IN (?" + strings.Repeat(", ?", len(q.GPUs)-1) + ")"
		for _, g := range q.GPUs {
			args = append(args, g)
		}
	}
	query += " GROUP BY gpu_uuid, node, w ORDER BY gpu_uuid, node, w"
	rows, err := s.r.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []TelemetrySeries
	for rows.Next() {
		var uuid, node, model string
		var w int64
		var v float64
		dest := []any{&uuid, &node, &w, &model, &v}
		if agg == "last" {
			var t int64
			dest = append(dest, &t)
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		if n := len(out); n == 0 || out[n-1].GPUUUID != uuid || out[n-1].Node != node {
			out = append(out, TelemetrySeries{GPUUUID: uuid, Node: node})
		}
		last := &out[len(out)-1]
		if model != "" {
			last.Model = model
		}
		last.Points = append(last.Points, TelemetryPoint{Time: fromNanos(w), Value: v})
	}
	return out, rows.Err()
}
