package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/prescient-sched/prescient/cluster"
)

// EventType says what happened to a job.
type EventType string

// The event types. Each one names the state the job is in after it, which
// the store checks against the job's new state.
const (
	EventSubmitted           EventType = "submitted"            // → queued; recorded by SubmitJob only
	EventStarted             EventType = "started"              // → running
	EventCheckpointRequested EventType = "checkpoint_requested" // → checkpointing
	EventCheckpointed        EventType = "checkpointed"         // → running (a checkpoint landed)
	EventCheckpointAbandoned EventType = "checkpoint_abandoned" // → running (a requested checkpoint never landed)
	EventPreempted           EventType = "preempted"            // → queued, to make room
	EventRequeued            EventType = "requeued"             // → queued, e.g. its node failed
	EventStartFailed         EventType = "start_failed"         // → queued, the backend refused its start
	EventFinished            EventType = "finished"             // → succeeded
	EventFailed              EventType = "failed"               // → failed
	EventCancelled           EventType = "cancelled"            // → cancelled
)

// EventTypes lists every event type.
func EventTypes() []EventType {
	return []EventType{EventSubmitted, EventStarted, EventCheckpointRequested, EventCheckpointed,
		EventCheckpointAbandoned, EventPreempted, EventRequeued, EventStartFailed, EventFinished, EventFailed, EventCancelled}
}

// Target is the state a job is in after an event of type t; ok is false
// for an unknown type.
func (t EventType) Target() (state cluster.JobState, ok bool) {
	switch t {
	case EventSubmitted, EventPreempted, EventRequeued, EventStartFailed:
		return cluster.StateQueued, true
	case EventStarted, EventCheckpointed, EventCheckpointAbandoned:
		return cluster.StateRunning, true
	case EventCheckpointRequested:
		return cluster.StateCheckpointing, true
	case EventFinished:
		return cluster.StateSucceeded, true
	case EventFailed:
		return cluster.StateFailed, true
	case EventCancelled:
		return cluster.StateCancelled, true
	}
	return "", false
}

// Valid reports whether t is a defined event type.
func (t EventType) Valid() bool {
	_, ok := t.Target()
	return ok
}

// ParseEventType parses an event type name.
func ParseEventType(s string) (EventType, error) {
	t := EventType(s)
	if !t.Valid() {
		return "", fmt.Errorf("unknown event type %q", s)
	}
	return t, nil
}

// describes reports whether an event of type t fits a job that went from
// state from to state to. Only a checkpoint may leave the state as it was
// (a running job that checkpointed keeps running).
func (t EventType) describes(from, to cluster.JobState) bool {
	target, ok := t.Target()
	return ok && to == target && (from != to || t == EventCheckpointed)
}

// Event is one thing that happened to a job, as the store recorded it.
type Event struct {
	ID    int64 // increases in the order the store recorded events
	JobID cluster.JobID
	// Time is when the store recorded the event, by its clock; for
	// EventSubmitted it is the job's submit time.
	Time time.Time
	Type EventType
	// From is the state before the event; empty for EventSubmitted.
	From cluster.JobState
	// To is the state after it.
	To      cluster.JobState
	Message string
	// Details is a JSON object with what else the event carries (for
	// EventCheckpointed, the checkpoint); nil when there is nothing.
	Details json.RawMessage
}

// eventDetails is the JSON of Event.Details.
type eventDetails struct {
	Checkpoint *checkpointRecord `json:"checkpoint,omitempty"`
	// Attempt and Allocations are a started event's: the attempt and the
	// GPU shares it runs on, kept after the placement is gone (Attempts).
	Attempt     int                `json:"attempt,omitempty"`
	Allocations []allocationRecord `json:"allocations,omitempty"`
}

// detailsOf returns the details an event of type t about job j records:
// the job row keeps only its newest checkpoint and the placements table
// only the running attempt, the events keep them all. allocs are a started
// event's.
func detailsOf(t EventType, j cluster.Job, allocs []cluster.Allocation) (json.RawMessage, error) {
	switch {
	case t == EventCheckpointed && j.LastCheckpoint != nil:
		cp, err := newCheckpointRecord(*j.LastCheckpoint)
		if err != nil {
			return nil, fmt.Errorf("checkpoint: %w", err)
		}
		return json.Marshal(eventDetails{Checkpoint: &cp})
	case t == EventStarted && len(allocs) > 0:
		return json.Marshal(eventDetails{Attempt: j.Attempts, Allocations: allocationRecords(allocs)})
	}
	return nil, nil
}

// Events returns the events of a job, oldest first. A job that is not
// stored gives an error wrapping ErrNotFound.
func (s *Store) Events(ctx context.Context, id cluster.JobID) ([]Event, error) {
	events, err := s.events(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("store: events of job %s: %w", id, err)
	}
	return events, nil
}

func (s *Store) events(ctx context.Context, id cluster.JobID) ([]Event, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT id, job_id, time, type, from_state, to_state, message, details
		FROM job_events WHERE job_id = ? ORDER BY id`, string(id))
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
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(events) == 0 { // every stored job has its submitted event
		return nil, ErrNotFound
	}
	return events, nil
}

func scanEvent(sc scanner) (Event, error) {
	var (
		ev            Event
		t             int64
		typ, to       string
		from, details sql.NullString
	)
	if err := sc.Scan(&ev.ID, &ev.JobID, &t, &typ, &from, &to, &ev.Message, &details); err != nil {
		return Event{}, err
	}
	ev.Time, ev.From, ev.To = fromNanos(t), cluster.JobState(from.String), cluster.JobState(to)
	if details.Valid {
		ev.Details = json.RawMessage(details.String)
	}
	var err error
	if ev.Type, err = ParseEventType(typ); err != nil {
		return Event{}, fmt.Errorf("event %d: %w", ev.ID, err)
	}
	return ev, nil
}

// insertEvent records ev in tx and sets its ID.
func insertEvent(ctx context.Context, tx *sql.Tx, ev *Event) error {
	t, err := unixNanos(ev.Time)
	if err != nil {
		return fmt.Errorf("event time: %w", err)
	}
	from := sql.NullString{String: string(ev.From), Valid: ev.From != ""}
	details := sql.NullString{String: string(ev.Details), Valid: len(ev.Details) > 0}
	res, err := tx.ExecContext(ctx, `INSERT INTO job_events (job_id, time, type, from_state, to_state, message, details)
		VALUES (?, ?, ?, ?, ?, ?, ?)`, string(ev.JobID), t, string(ev.Type), from, string(ev.To), ev.Message, details)
	if err == nil {
		ev.ID, err = res.LastInsertId()
	}
	if err != nil {
		return fmt.Errorf("record %s event: %w", ev.Type, err)
	}
	return nil
}
