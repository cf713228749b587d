package store

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// JobMemoryQuery asks for the GPU memory held by jobs' processes.
type JobMemoryQuery struct {
	// Jobs are the job IDs; none means every job a process was known to
	// belong to.
	Jobs       []string
	Start, End time.Time // the range [Start, End)
	// Step is the width of the windows, aligned as in TelemetryQuery.
	Step time.Duration
}

// JobMemorySeries is one job's memory: at each sample time, the memory its
// processes hold on each GPU, summed per GPU; the most on any one GPU;
// the highest of a window (Step) is the window's point.
type JobMemorySeries struct {
	JobID  string
	Points []TelemetryPoint
}

// QueryJobMemory returns one series per job with process samples in the
// range, ordered by job ID (windows without samples are left out).
func (s *Store) QueryJobMemory(ctx context.Context, q JobMemoryQuery) ([]JobMemorySeries, error) {
	out, err := s.queryJobMemory(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("store: query job memory: %w", err)
	}
	return out, nil
}

func (s *Store) queryJobMemory(ctx context.Context, q JobMemoryQuery) ([]JobMemorySeries, error) {
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
	step := q.Step.Nanoseconds()
	// The inner query sums a job's processes per GPU and sample time (the
	// collector stamps every process of a device sample with the sample's
	// time); the outer takes the most of any GPU and time in a window.
	inner := "SELECT job_id, gpu_uuid, time_ns, SUM(mem_used_bytes) AS used FROM gpu_processes" +
		" WHERE job_id <> '' AND time_ns >= ? AND time_ns < ?"
	// Parameters in order: the first window's label (start), the step
	// twice, the range, the jobs.
	args := []any{start, step, step, start, end}
	if len(q.Jobs) > 0 {
		inner += " AND job_id IN (?" + strings.Repeat(", ?", len(q.Jobs)-1) + ")"
		for _, j := range q.Jobs {
			args = append(args, j)
		}
	}
	inner += " GROUP BY job_id, gpu_uuid, time_ns"
	query := "SELECT job_id, MAX(?, (time_ns / ?) * ?) AS w, MAX(used) FROM (" + inner + ") GROUP BY job_id, w ORDER BY job_id, w"
	rows, err := s.r.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []JobMemorySeries
	for rows.Next() {
		var job string
		var w int64
		var v float64
		if err := rows.Scan(&job, &w, &v); err != nil {
			return nil, err
		}
		if n := len(out); n == 0 || out[n-1].JobID != job {
			out = append(out, JobMemorySeries{JobID: job})
		}
		last := &out[len(out)-1]
		last.Points = append(last.Points, TelemetryPoint{Time: fromNanos(w), Value: v})
	}
	return out, rows.Err()
}

// QueryJobGPUs returns, for each job with process samples in [start, end),
// the GPUs (UUIDs, sorted) they were sampled on; jobs names the jobs, none
// every job a process was known to belong to.
func (s *Store) QueryJobGPUs(ctx context.Context, jobs []string, start, end time.Time) (map[string][]string, error) {
	if !end.After(start) {
		return nil, fmt.Errorf("store: query job GPUs: range [%s, %s) is empty", start.Format(time.RFC3339Nano), end.Format(time.RFC3339Nano))
	}
	lo, err := unixNanos(start)
	if err != nil {
		return nil, fmt.Errorf("store: query job GPUs: %w", err)
	}
	hi, err := unixNanos(end)
	if err != nil {
		return nil, fmt.Errorf("store: query job GPUs: %w", err)
	}
	q := "SELECT DISTINCT job_id, gpu_uuid FROM gpu_processes WHERE job_id <> '' AND time_ns >= ? AND time_ns < ?"
	args := []any{lo, hi}
	if len(jobs) > 0 {
		q += " AND job_id IN (" + strings.TrimSuffix(strings.Repeat("?,", len(jobs)), ",") + ")"
		for _, j := range jobs {
			args = append(args, j)
		}
	}
	rows, err := s.r.QueryContext(ctx, q+" ORDER BY job_id, gpu_uuid", args...)
	if err != nil {
		return nil, fmt.Errorf("store: query job GPUs: %w", err)
	}
	defer rows.Close()
	out := map[string][]string{}
	for rows.Next() {
		var job, gpu string
		if err := rows.Scan(&job, &gpu); err != nil {
			return nil, fmt.Errorf("store: query job GPUs: %w", err)
		}
		out[job] = append(out[job], gpu)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: query job GPUs: %w", err)
	}
	return out, nil
}
