package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/prescient-sched/prescient/cluster"
)

// Placement is where the current attempt of a running (or checkpointing)
// job runs, as the control plane recorded it before asking a backend to
// start it. The store keeps one per active job and deletes it when the job
// leaves the running and checkpointing states.
type Placement struct {
	Job cluster.JobID
	// Attempt is the job's attempt count once this attempt started (1 for
	// the first).
	Attempt     int
	Allocations []cluster.Allocation
	// CheckpointEvery is the periodic checkpoint interval the attempt was
	// started with; zero for none.
	CheckpointEvery time.Duration
	// Confirmed is set once the backend reported that the attempt runs.
	Confirmed bool
	// StopBy is set while the job is being preempted: the time it is
	// stopped at the latest. Zero otherwise.
	StopBy     time.Time
	StopReason string
	// PowerLimitFraction is the attempt's power cap: the fraction of each
	// of its GPUs' default power limit the node sets while it runs; 0 is
	// uncapped.
	PowerLimitFraction float64
}

// Stopping reports whether the job is being preempted.
func (p *Placement) Stopping() bool { return !p.StopBy.IsZero() }

// allocationRecord is the JSON of one cluster.Allocation; its keys are the
// storage format.
type allocationRecord struct {
	Node  string `json:"node"`
	GPU   int    `json:"gpu"`
	Milli int    `json:"milli"`
}

// StartJob records that a queued job starts on allocs: in one transaction
// the job goes to running (its attempt count raised, a started event with
// msg recorded) and its placement is stored with that attempt. It returns
// the job and placement as stored. A job that is not queued gives a
// *cluster.TransitionError; no allocations, an error.
func (s *Store) StartJob(ctx context.Context, id cluster.JobID, allocs []cluster.Allocation, every time.Duration, msg string,
	opts ...StartOption) (cluster.Job, Placement, error) {
	var (
		job cluster.Job
		p   Placement
	)
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		if len(allocs) == 0 {
			return errors.New("no allocations")
		}
		if every < 0 {
			return fmt.Errorf("checkpoint interval %s is negative", every)
		}
		p = Placement{Job: id, Allocations: allocs, CheckpointEvery: every}
		for _, o := range opts {
			o(&p)
		}
		if !(p.PowerLimitFraction >= 0 && p.PowerLimitFraction <= 1) {
			return fmt.Errorf("power limit fraction %g: want 0 (uncapped) to 1", p.PowerLimitFraction)
		}
		var err error
		job, err = s.updateJob(ctx, tx, id, func(j *cluster.Job) (EventType, string, error) {
			if j.State != cluster.StateQueued {
				return "", "", &cluster.TransitionError{Job: j.ID, From: j.State, To: cluster.StateRunning}
			}
			return EventStarted, msg, j.Transition(cluster.StateRunning, s.clock())
		}, allocs)
		if err != nil {
			return err
		}
		p.Attempt = job.Attempts
		return insertPlacement(ctx, tx, p)
	})
	if err != nil {
		return cluster.Job{}, Placement{}, fmt.Errorf("store: start job %s: %w", id, err)
	}
	return job, p, nil
}

// AdoptJob records that a queued job runs attempt on allocs already, as
// a backend found it (a control plane that took over without it in its
// store): in one transaction the job goes to running with attempt as its
// attempt count (a started event with msg recorded) and its placement is
// stored, confirmed. A job that is not queued gives a
// *cluster.TransitionError; an attempt not above the job's count, or no
// allocations, an error.
func (s *Store) AdoptJob(ctx context.Context, id cluster.JobID, attempt int, allocs []cluster.Allocation, msg string) (cluster.Job, error) {
	var job cluster.Job
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		if len(allocs) == 0 {
			return errors.New("no allocations")
		}
		var err error
		job, err = s.updateJob(ctx, tx, id, func(j *cluster.Job) (EventType, string, error) {
			if j.State != cluster.StateQueued {
				return "", "", &cluster.TransitionError{Job: j.ID, From: j.State, To: cluster.StateRunning}
			}
			if attempt <= j.Attempts {
				return "", "", fmt.Errorf("attempt %d: the job has had %d already", attempt, j.Attempts)
			}
			if err := j.Transition(cluster.StateRunning, s.clock()); err != nil {
				return "", "", err
			}
			j.Attempts = attempt
			return EventStarted, msg, nil
		}, allocs)
		if err != nil {
			return err
		}
		if err := insertPlacement(ctx, tx, Placement{Job: id, Attempt: attempt, Allocations: allocs}); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, "UPDATE job_placements SET confirmed = 1 WHERE job_id = ?", string(id))
		return err
	})
	if err != nil {
		return cluster.Job{}, fmt.Errorf("store: adopt job %s attempt %d: %w", id, attempt, err)
	}
	return job, nil
}

// allocationRecords is the storage form of allocs.
func allocationRecords(allocs []cluster.Allocation) []allocationRecord {
	recs := make([]allocationRecord, len(allocs))
	for i, a := range allocs {
		recs[i] = allocationRecord{Node: a.GPU.Node, GPU: a.GPU.Index, Milli: a.Milli}
	}
	return recs
}

// allocations is the cluster form of the records of job id's allocations.
func allocations(id cluster.JobID, recs []allocationRecord) []cluster.Allocation {
	out := make([]cluster.Allocation, len(recs))
	for i, r := range recs {
		out[i] = cluster.Allocation{Job: id, GPU: cluster.GPURef{Node: r.Node, Index: r.GPU}, Milli: r.Milli}
	}
	return out
}

func insertPlacement(ctx context.Context, tx *sql.Tx, p Placement) error {
	text, err := marshal(allocationRecords(p.Allocations))
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `INSERT OR REPLACE INTO job_placements
		(job_id, attempt, allocations, checkpoint_every_ns, confirmed, stop_by, stop_reason, power_limit_fraction) VALUES (?, ?, ?, ?, 0, NULL, '', ?)`,
		string(p.Job), p.Attempt, text, int64(p.CheckpointEvery), p.PowerLimitFraction)
	if err != nil {
		return fmt.Errorf("insert placement: %w", err)
	}
	return nil
}

// deletePlacement drops the placement of a job that no longer runs.
func deletePlacement(ctx context.Context, tx *sql.Tx, id cluster.JobID) error {
	if _, err := tx.ExecContext(ctx, "DELETE FROM job_placements WHERE job_id = ?", string(id)); err != nil {
		return fmt.Errorf("delete placement: %w", err)
	}
	return nil
}

const placementColumns = "job_id, attempt, allocations, checkpoint_every_ns, confirmed, stop_by, stop_reason, power_limit_fraction"

func scanPlacement(sc scanner) (Placement, error) {
	var (
		p      Placement
		every  int64
		conf   int64
		text   string
		stopBy sql.NullInt64
	)
	if err := sc.Scan(&p.Job, &p.Attempt, &text, &every, &conf, &stopBy, &p.StopReason, &p.PowerLimitFraction); err != nil {
		return Placement{}, err
	}
	var recs []allocationRecord
	if err := json.Unmarshal([]byte(text), &recs); err != nil {
		return Placement{}, fmt.Errorf("placement of %s: allocations: %w", p.Job, err)
	}
	p.Allocations = allocations(p.Job, recs)
	p.CheckpointEvery, p.Confirmed, p.StopBy = time.Duration(every), conf != 0, fromNullNanos(stopBy)
	return p, nil
}

// StartOption sets a field of the placement StartJob records.
type StartOption func(*Placement)

// WithPowerLimit records the attempt's power cap: the fraction of each of
// its GPUs' default power limit (0: uncapped).
func WithPowerLimit(fraction float64) StartOption {
	return func(p *Placement) { p.PowerLimitFraction = fraction }
}

// GetPlacement returns the placement of a running job; a job without one
// gives an error wrapping ErrNotFound.
func (s *Store) GetPlacement(ctx context.Context, id cluster.JobID) (Placement, error) {
	p, err := scanPlacement(s.r.QueryRowContext(ctx, "SELECT "+placementColumns+" FROM job_placements WHERE job_id = ?", string(id)))
	if errors.Is(err, sql.ErrNoRows) {
		err = ErrNotFound
	}
	if err != nil {
		return Placement{}, fmt.Errorf("store: placement of %s: %w", id, err)
	}
	return p, nil
}

// Placements returns the placements of all running jobs, ordered by job.
func (s *Store) Placements(ctx context.Context) ([]Placement, error) {
	ps, err := s.placements(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: placements: %w", err)
	}
	return ps, nil
}

func (s *Store) placements(ctx context.Context) ([]Placement, error) {
	rows, err := s.r.QueryContext(ctx, "SELECT "+placementColumns+" FROM job_placements ORDER BY job_id")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Placement
	for rows.Next() {
		p, err := scanPlacement(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// ConfirmPlacement records that the backend reported attempt of job as
// running. A job without a placement of that attempt gives an error
// wrapping ErrNotFound.
func (s *Store) ConfirmPlacement(ctx context.Context, id cluster.JobID, attempt int) error {
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, "UPDATE job_placements SET confirmed = 1 WHERE job_id = ? AND attempt = ?", string(id), attempt)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return errors.Join(err, fmt.Errorf("attempt %d: %w", attempt, ErrNotFound))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: confirm placement of %s: %w", id, err)
	}
	return nil
}

// RequestStop records that a running job is to be stopped by stopBy, for
// reason. With checkpoint the job goes to checkpointing (a
// checkpoint_requested event) in the same transaction; without, only the
// placement records the stop. A job without a placement gives an error
// wrapping ErrNotFound.
func (s *Store) RequestStop(ctx context.Context, id cluster.JobID, stopBy time.Time, reason string, checkpoint bool) (cluster.Job, error) {
	var job cluster.Job
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		at, err := unixNanos(stopBy)
		if err != nil {
			return fmt.Errorf("stop_by: %w", err)
		}
		res, err := tx.ExecContext(ctx, "UPDATE job_placements SET stop_by = ?, stop_reason = ? WHERE job_id = ?", at, reason, string(id))
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return errors.Join(err, fmt.Errorf("no placement: %w", ErrNotFound))
		}
		if job, err = selectJob(ctx, tx, id); err != nil || !checkpoint || job.State != cluster.StateRunning {
			return err
		}
		job, err = s.updateJob(ctx, tx, id, func(j *cluster.Job) (EventType, string, error) {
			return EventCheckpointRequested, reason, j.Transition(cluster.StateCheckpointing, s.clock())
		}, nil)
		return err
	})
	if err != nil {
		return cluster.Job{}, fmt.Errorf("store: request stop of %s: %w", id, err)
	}
	return job, nil
}
