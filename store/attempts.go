package store

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/prescient-sched/prescient/cluster"
)

// Attempt is one run of a job from its started event to the event that
// took it out of the running states, as the job's events record it.
type Attempt struct {
	// Number is the job's attempt count once it started (1 for the first).
	Number int
	// Allocations are the GPU shares it ran on; nil for an attempt whose
	// started event predates their recording (a store written by an older
	// release).
	Allocations []cluster.Allocation
	Start       time.Time
	// End is zero while the attempt runs.
	End time.Time
	// EndedBy is the type of the event that ended it ("" while it runs):
	// finished, failed, cancelled, preempted, requeued or start_failed.
	EndedBy EventType
	// Message is the ending event's message.
	Message string
}

// Running reports whether the attempt has not ended.
func (a *Attempt) Running() bool { return a.EndedBy == "" }

// Attempts derives a job's attempts from its events, oldest first (as
// Events returns them). It is the one reading of which event starts and
// which ends an attempt: started opens one; any event leaving the running
// and checkpointing states closes it.
func Attempts(events []Event) ([]Attempt, error) {
	var (
		out  []Attempt
		open bool
	)
	for _, e := range events {
		switch {
		case e.Type == EventStarted:
			a := Attempt{Start: e.Time, Number: 1}
			if n := len(out); n > 0 {
				a.Number = out[n-1].Number + 1
			}
			if len(e.Details) > 0 {
				var d eventDetails
				if err := json.Unmarshal(e.Details, &d); err != nil {
					return nil, fmt.Errorf("event %d of job %s: details: %w", e.ID, e.JobID, err)
				}
				if d.Attempt > 0 {
					a.Number = d.Attempt
				}
				if len(d.Allocations) > 0 {
					a.Allocations = allocations(e.JobID, d.Allocations)
				}
			}
			out, open = append(out, a), true
		case open && e.From.Active() && !e.To.Active():
			a := &out[len(out)-1]
			a.End, a.EndedBy, a.Message = e.Time, e.Type, e.Message
			open = false
		}
	}
	return out, nil
}
