package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/prescient-sched/prescient/cluster"
)

// JobForecast is the forecast a job was planned with.
type JobForecast struct {
	Job            cluster.JobID
	Time           time.Time // when it was made; zero means now by the Store's clock
	DurationP50    time.Duration
	DurationP90    time.Duration
	MemoryP90Bytes int64
	Source         string
}

// PutForecasts stores forecasts of stored jobs in one transaction, each
// replacing the job's previous one. A forecast of a job that is not stored
// gives an error wrapping ErrNotFound, and none is stored.
func (s *Store) PutForecasts(ctx context.Context, fs []JobForecast) error {
	if len(fs) == 0 {
		return nil
	}
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		w := s.forecastWriter(tx)
		defer w.close()
		for _, f := range fs {
			if err := w.put(ctx, f); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: put forecasts: %w", err)
	}
	return nil
}

// forecastWriter stores forecasts in one transaction, with one prepared
// statement for all of them (prepared on the first put).
type forecastWriter struct {
	s    *Store
	tx   *sql.Tx
	stmt *sql.Stmt
}

func (s *Store) forecastWriter(tx *sql.Tx) *forecastWriter { return &forecastWriter{s: s, tx: tx} }

// put stores f, replacing the job's earlier forecast; a zero time is now.
func (w *forecastWriter) put(ctx context.Context, f JobForecast) error {
	if f.Time.IsZero() {
		f.Time = w.s.clock()
	}
	t, err := unixNanos(f.Time)
	if err != nil {
		return fmt.Errorf("job %s: %w", f.Job, err)
	}
	if f.DurationP50 < 0 || f.DurationP90 < 0 || f.MemoryP90Bytes < 0 {
		return fmt.Errorf("job %s: negative forecast", f.Job)
	}
	if w.stmt == nil {
		if w.stmt, err = w.tx.PrepareContext(ctx, `INSERT OR REPLACE INTO job_forecasts
			(job_id, time, duration_p50_ns, duration_p90_ns, memory_p90_bytes, source) VALUES (?, ?, ?, ?, ?, ?)`); err != nil {
			return err
		}
	}
	_, err = w.stmt.ExecContext(ctx, string(f.Job), t, int64(f.DurationP50), int64(f.DurationP90), f.MemoryP90Bytes, f.Source)
	if isForeignKeyViolation(err) {
		return fmt.Errorf("job %s: %w", f.Job, ErrNotFound)
	}
	return err
}

// close closes the statement, if one was prepared.
func (w *forecastWriter) close() {
	if w.stmt != nil {
		w.stmt.Close()
	}
}

// Forecasts returns the stored forecasts of the given jobs; jobs without
// one are left out.
func (s *Store) Forecasts(ctx context.Context, ids []cluster.JobID) (map[cluster.JobID]JobForecast, error) {
	out := make(map[cluster.JobID]JobForecast, len(ids))
	const chunk = 500 // stays under SQLite's limit on bound parameters
	for len(ids) > 0 {
		n := min(chunk, len(ids))
		if err := s.forecasts(ctx, ids[:n], out); err != nil {
			return nil, fmt.Errorf("store: forecasts: %w", err)
		}
		ids = ids[n:]
	}
	return out, nil
}

func (s *Store) forecasts(ctx context.Context, ids []cluster.JobID, out map[cluster.JobID]JobForecast) error {
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = string(id)
	}
	rows, err := s.r.QueryContext(ctx, `SELECT job_id, time, duration_p50_ns, duration_p90_ns, memory_p90_bytes, source
		FROM job_forecasts WHERE job_id IN (?`+strings.Repeat(", ?", len(ids)-1)+")", args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var f JobForecast
		var t, p50, p90 int64
		if err := rows.Scan(&f.Job, &t, &p50, &p90, &f.MemoryP90Bytes, &f.Source); err != nil {
			return err
		}
		f.Time, f.DurationP50, f.DurationP90 = fromNanos(t), time.Duration(p50), time.Duration(p90)
		out[f.Job] = f
	}
	return rows.Err()
}
