package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/prescient-sched/prescient/cluster"
)

func insertJob(ctx context.Context, tx *sql.Tx, row *jobRow) error {
	_, err := tx.ExecContext(ctx, "INSERT INTO jobs ("+jobColumns+") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
		row.args()...)
	if isPrimaryKeyViolation(err) {
		return ErrExists
	}
	if err != nil {
		return fmt.Errorf("insert: %w", err)
	}
	return nil
}

// GetJob returns a stored job; one that is not stored gives an error
// wrapping ErrNotFound.
func (s *Store) GetJob(ctx context.Context, id cluster.JobID) (cluster.Job, error) {
	job, err := selectJob(ctx, s.r, id)
	if err != nil {
		return cluster.Job{}, fmt.Errorf("store: get job %s: %w", id, err)
	}
	return job, nil
}

// JobTenant returns the tenant of a stored job, without reading the rest
// of it; one that is not stored gives an error wrapping ErrNotFound.
func (s *Store) JobTenant(ctx context.Context, id cluster.JobID) (string, error) {
	var tenant string
	err := s.r.QueryRowContext(ctx, "SELECT tenant FROM jobs WHERE id = ?", string(id)).Scan(&tenant)
	if errors.Is(err, sql.ErrNoRows) {
		err = ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("store: tenant of job %s: %w", id, err)
	}
	return tenant, nil
}

func selectJob(ctx context.Context, q querier, id cluster.JobID) (cluster.Job, error) {
	var row jobRow
	err := row.scan(q.QueryRowContext(ctx, "SELECT "+jobColumns+" FROM jobs WHERE id = ?", string(id)))
	if errors.Is(err, sql.ErrNoRows) {
		return cluster.Job{}, ErrNotFound
	}
	if err != nil {
		return cluster.Job{}, err
	}
	return row.decode()
}

// JobFilter selects the jobs ListJobs returns. Its zero value selects the
// first DefaultLimit jobs of all tenants in all states.
type JobFilter struct {
	// Tenant selects one tenant's jobs; empty selects every tenant's.
	Tenant string
	// States selects jobs in any of these states; empty selects all.
	States []cluster.JobState
	// Limit is the most jobs to return: 0 means DefaultLimit; negative is
	// an error.
	Limit int
	// After continues a listing: it is the ID of the last job of the
	// previous page, and the page holds the jobs that come after it. A job
	// that is not stored gives an error wrapping ErrNotFound.
	After cluster.JobID
}

// ListJobs returns the jobs the filter selects, ordered by submit time and
// then by ID. A page shorter than the limit is the last.
func (s *Store) ListJobs(ctx context.Context, f JobFilter) ([]cluster.Job, error) {
	jobs, err := s.listJobs(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("store: list jobs: %w", err)
	}
	return jobs, nil
}

func (s *Store) listJobs(ctx context.Context, f JobFilter) ([]cluster.Job, error) {
	query, args, err := s.listQuery(ctx, f)
	if err != nil {
		return nil, err
	}
	rows, err := s.r.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var jobs []cluster.Job
	for rows.Next() {
		var row jobRow
		if err := row.scan(rows); err != nil {
			return nil, err
		}
		job, err := row.decodeWith(&s.specs)
		if err != nil {
			return nil, err
		}
		jobs = append(jobs, job)
	}
	return jobs, rows.Err()
}

// listQuery builds the query of a JobFilter.
func (s *Store) listQuery(ctx context.Context, f JobFilter) (string, []any, error) {
	limit, err := pageLimit(f.Limit)
	if err != nil {
		return "", nil, err
	}
	var where []string
	var args []any
	if f.Tenant != "" {
		where, args = append(where, "tenant = ?"), append(args, f.Tenant)
	}
	if len(f.States) > 0 {
		cond, stateArgs, err := statesCondition(f.States)
		if err != nil {
			return "", nil, err
		}
		where, args = append(where, cond), append(args, stateArgs...)
	}
	if f.After != "" {
		after, err := s.submitTimeOf(ctx, f.After)
		if err != nil {
			return "", nil, fmt.Errorf("after job %s: %w", f.After, err)
		}
		where, args = append(where, "(submit_time, id) > (?, ?)"), append(args, after, string(f.After))
	}
	query := "SELECT " + jobColumns + " FROM jobs"
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	return query + " ORDER BY submit_time, id LIMIT ?", append(args, limit), nil
}

// pageLimit checks a List limit and applies the default.
func pageLimit(limit int) (int, error) {
	switch {
	case limit < 0:
		return 0, fmt.Errorf("limit %d is negative", limit)
	case limit == 0:
		return DefaultLimit, nil
	}
	return limit, nil
}

// statesCondition is "state IN (?, ...)" with its arguments.
func statesCondition(states []cluster.JobState) (string, []any, error) {
	args := make([]any, len(states))
	for i, st := range states {
		if !st.Valid() {
			return "", nil, fmt.Errorf("state %q is not a job state", st)
		}
		args[i] = string(st)
	}
	return "state IN (?" + strings.Repeat(", ?", len(states)-1) + ")", args, nil
}

// submitTimeOf returns the stored submit time of a job, in nanoseconds.
func (s *Store) submitTimeOf(ctx context.Context, id cluster.JobID) (int64, error) {
	var t int64
	err := s.r.QueryRowContext(ctx, "SELECT submit_time FROM jobs WHERE id = ?", string(id)).Scan(&t)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, ErrNotFound
	}
	return t, err
}
