package store

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/prescient-sched/prescient/cluster"
)

// UpdateFunc changes a job, typically through job.Transition or
// job.Checkpointed, and says what happened: the event's type and a message
// for people. An error leaves the stored job as it was.
type UpdateFunc func(job *cluster.Job) (EventType, string, error)

// UpdateJob reads a job, lets fn change it and stores the result with an
// event from the old state to the new, stamped by the Store's clock, and
// the event's webhook deliveries (SetEventOutbox); all in one
// transaction, during which no other update of any job runs. fn must not
// call the Store's write methods, which would wait for it forever.
//
// Nothing is written when the job is not stored (an error wrapping
// ErrNotFound), when fn returns an error (returned wrapped, so a
// cluster.TransitionError stays visible to errors.Is and errors.As), or
// when the result is not a job the state machine could have reached: a
// changed ID or submit time, an invalid job, a transition cluster does not
// allow, or an event type that does not name the new state. On success
// UpdateJob returns the job as stored. A job that leaves the running and
// checkpointing states loses its Placement in the same transaction.
func (s *Store) UpdateJob(ctx context.Context, id cluster.JobID, fn UpdateFunc) (cluster.Job, error) {
	var job cluster.Job
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		job, err = s.updateJob(ctx, tx, id, fn, nil)
		return err
	})
	if err != nil {
		return cluster.Job{}, fmt.Errorf("store: update job %s: %w", id, err)
	}
	return job, nil
}

// updateJob is UpdateJob in tx; allocs are the allocations a started
// event records (StartJob, AdoptJob), nil for other events.
func (s *Store) updateJob(ctx context.Context, tx *sql.Tx, id cluster.JobID, fn UpdateFunc, allocs []cluster.Allocation) (cluster.Job, error) {
	job, err := selectJob(ctx, tx, id)
	if err != nil {
		return cluster.Job{}, err
	}
	before := job.Clone() // fn may change the job's checkpoint, labels or models in place
	typ, msg, err := fn(&job)
	if err != nil {
		return cluster.Job{}, err
	}
	ev := Event{JobID: id, Time: s.clock().UTC(), Type: typ, From: before.State, To: job.State, Message: msg}
	if err := checkUpdate(&before, &job, typ); err != nil {
		return cluster.Job{}, err
	}
	if ev.Details, err = detailsOf(typ, job, allocs); err != nil {
		return cluster.Job{}, err
	}
	row, err := encodeJob(job)
	if err != nil {
		return cluster.Job{}, err
	}
	if err := updateJobRow(ctx, tx, &row); err != nil {
		return cluster.Job{}, err
	}
	if before.State.Active() && !job.State.Active() {
		if err := deletePlacement(ctx, tx, id); err != nil {
			return cluster.Job{}, err
		}
	}
	if err := insertEvent(ctx, tx, &ev); err != nil {
		return cluster.Job{}, err
	}
	return job, s.addEventDeliveries(ctx, tx, job, ev)
}

// checkUpdate checks that after is a job before could have become through
// an event of type typ.
func checkUpdate(before, after *cluster.Job, typ EventType) error {
	switch {
	case !typ.Valid():
		return fmt.Errorf("unknown event type %q", typ)
	case typ == EventSubmitted:
		return fmt.Errorf("a %s event is recorded by SubmitJob only", typ)
	case after.ID != before.ID:
		return fmt.Errorf("the update changed the job's ID to %q", after.ID)
	case !after.SubmitTime.Equal(before.SubmitTime):
		return fmt.Errorf("the update changed the job's submit time")
	case before.State != after.State && !before.State.CanTransition(after.State):
		return &cluster.TransitionError{Job: before.ID, From: before.State, To: after.State}
	case !typ.describes(before.State, after.State):
		return fmt.Errorf("a %s event does not describe going from %s to %s", typ, before.State, after.State)
	case typ == EventCheckpointed && !newCheckpoint(before.LastCheckpoint, after.LastCheckpoint):
		return fmt.Errorf("a %s event without a new checkpoint", typ)
	}
	if err := after.Validate(); err != nil {
		return fmt.Errorf("the update made the job invalid: %w", err)
	}
	return nil
}

// newCheckpoint reports whether after is a checkpoint other than before.
func newCheckpoint(before, after *cluster.Checkpoint) bool {
	return after != nil && (before == nil || !after.Time.Equal(before.Time) || after.Step != before.Step || after.Path != before.Path)
}

func updateJobRow(ctx context.Context, tx *sql.Tx, row *jobRow) error {
	_, err := tx.ExecContext(ctx, `UPDATE jobs SET tenant = ?, user = ?, name = ?, tier = ?, state = ?,
		attempts = ?, start_time = ?, end_time = ?, last_checkpoint = ?, outcome = ?, spec = ?
		WHERE id = ?`,
		row.tenant, row.user, row.name, row.tier, row.state, row.attempts, row.startTime, row.endTime,
		row.lastCheckpoint, row.outcome, row.spec, row.id)
	if err != nil {
		return fmt.Errorf("update: %w", err)
	}
	return nil
}
