package cluster

import (
	"errors"
	"fmt"
)

// JobState is where a job is in its life. The states and the transitions
// between them are defined here once; every other package goes through
// Job.Transition (or the helpers built on it) to change a job's state.
type JobState string

// The job states. A preempted or requeued job goes back to StateQueued with
// its attempt count raised and its last checkpoint kept.
const (
	StateQueued        JobState = "queued"
	StateRunning       JobState = "running"
	StateCheckpointing JobState = "checkpointing"
	StateSucceeded     JobState = "succeeded"
	StateFailed        JobState = "failed"
	StateCancelled     JobState = "cancelled"
)

// transitions lists, for each state, the states it may move to.
var transitions = map[JobState][]JobState{
	StateQueued:        {StateRunning, StateCancelled, StateFailed},
	StateRunning:       {StateCheckpointing, StateQueued, StateSucceeded, StateFailed, StateCancelled},
	StateCheckpointing: {StateRunning, StateQueued, StateSucceeded, StateFailed, StateCancelled},
	StateSucceeded:     nil,
	StateFailed:        nil,
	StateCancelled:     nil,
}

// JobStates lists every state in the order of a job's life.
func JobStates() []JobState {
	return []JobState{StateQueued, StateRunning, StateCheckpointing, StateSucceeded, StateFailed, StateCancelled}
}

// Valid reports whether s is a defined state.
func (s JobState) Valid() bool {
	_, ok := transitions[s]
	return ok
}

// Terminal reports whether a job in state s is done for good.
func (s JobState) Terminal() bool {
	return s == StateSucceeded || s == StateFailed || s == StateCancelled
}

// Active reports whether a job in state s holds resources.
func (s JobState) Active() bool { return s == StateRunning || s == StateCheckpointing }

// CanTransition reports whether a job may move from s to to.
func (s JobState) CanTransition(to JobState) bool {
	for _, t := range transitions[s] {
		if t == to {
			return true
		}
	}
	return false
}

// ParseJobState parses a state name.
func ParseJobState(s string) (JobState, error) {
	st := JobState(s)
	if !st.Valid() {
		return "", fmt.Errorf("unknown job state %q (want one of queued, running, checkpointing, succeeded, failed, cancelled)", s)
	}
	return st, nil
}

// MarshalText encodes the state as its name.
func (s JobState) MarshalText() ([]byte, error) {
	if !s.Valid() {
		return nil, fmt.Errorf("invalid job state %q", string(s))
	}
	return []byte(s), nil
}

// UnmarshalText decodes and validates a state name.
func (s *JobState) UnmarshalText(b []byte) error {
	v, err := ParseJobState(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// ErrInvalidTransition is returned (wrapped in a *TransitionError) when a
// state change is not allowed. Test for it with errors.Is.
var ErrInvalidTransition = errors.New("invalid job state transition")

// TransitionError says which job could not move from which state to which.
type TransitionError struct {
	Job      JobID
	From, To JobState
}

func (e *TransitionError) Error() string {
	return fmt.Sprintf("job %s: cannot go from %s to %s", e.Job, e.From, e.To)
}

// Unwrap makes errors.Is(err, ErrInvalidTransition) true.
func (e *TransitionError) Unwrap() error { return ErrInvalidTransition }
