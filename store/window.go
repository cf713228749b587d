package store

import (
	"context"
	"fmt"
	"time"

	"github.com/prescient-sched/prescient/cluster"
)

// JobsLiveIn returns the jobs that existed in [from, until): submitted
// before until and not ended before from, ordered by submit time and ID.
func (s *Store) JobsLiveIn(ctx context.Context, from, until time.Time) ([]cluster.Job, error) {
	jobs, err := s.jobsLiveIn(ctx, from, until)
	if err != nil {
		return nil, fmt.Errorf("store: jobs in a window: %w", err)
	}
	return jobs, nil
}

func (s *Store) jobsLiveIn(ctx context.Context, from, until time.Time) ([]cluster.Job, error) {
	f, err := unixNanos(from)
	if err != nil {
		return nil, err
	}
	u, err := unixNanos(until)
	if err != nil {
		return nil, err
	}
	rows, err := s.r.QueryContext(ctx, "SELECT "+jobColumns+` FROM jobs
		WHERE submit_time < ? AND (end_time IS NULL OR end_time >= ?) ORDER BY submit_time, id`, u, f)
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
		job, err := row.decode()
		if err != nil {
			return nil, err
		}
		jobs = append(jobs, job)
	}
	return jobs, rows.Err()
}

// EventsIn returns the events of all jobs recorded in [from, until), in
// the order they were recorded.
func (s *Store) EventsIn(ctx context.Context, from, until time.Time) ([]Event, error) {
	events, err := s.eventsIn(ctx, from, until)
	if err != nil {
		return nil, fmt.Errorf("store: events in a window: %w", err)
	}
	return events, nil
}

func (s *Store) eventsIn(ctx context.Context, from, until time.Time) ([]Event, error) {
	f, err := unixNanos(from)
	if err != nil {
		return nil, err
	}
	u, err := unixNanos(until)
	if err != nil {
		return nil, err
	}
	rows, err := s.r.QueryContext(ctx, `SELECT id, job_id, time, type, from_state, to_state, message, details
		FROM job_events WHERE time >= ? AND time < ? ORDER BY time, id`, f, u)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var events []Event
	for rows.Next() {
		ev, err := scanEvent(rows)
		if err != nil {
			return nil, err
		}
		events = append(events, ev)
	}
	return events, rows.Err()
}
