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
		for _, f := range fs {
			if err := s.insertForecast(ctx, tx, f); err != nil {
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

// insertForecast stores f in tx, replacing the job's earlier one; a zero
// time is now.
func (s *Store) insertForecast(ctx context.Context, tx *sql.Tx, f JobForecast) error {
	if f.Time.IsZero() {
		f.Time = s.clock()
	}
	t, err := unixNanos(f.Time)
	if err != nil {
		return fmt.Errorf("job %s: %w", f.Job, err)
	}
	if f.DurationP50 < 0 || f.DurationP90 < 0 || f.MemoryP90Bytes < 0 {
		return fmt.Errorf("job %s: negative forecast", f.Job)
	}
	_, err = tx.ExecContext(ctx, `INSERT OR REPLACE INTO job_forecasts
		(job_id, time, duration_p50_ns, duration_p90_ns, memory_p90_bytes, source) VALUES (?, ?, ?, ?, ?, ?)`,
		string(f.Job), t, int64(f.DurationP50), int64(f.DurationP90), f.MemoryP90Bytes, f.Source)
	if isForeignKeyViolation(err) {
		return fmt.Errorf("job %s: %w", f.Job, ErrNotFound)
	}
	return err
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
