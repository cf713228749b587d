package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/prescient-sched/prescient/internal/fsutil"
)

// stateFileName is the agent's state file in its work directory: every
// attempt it started, so that it starts none twice across its restarts.
const stateFileName = "agent-state.json"

// maxEndedRecords bounds the ended attempts the state file remembers; the
// oldest are forgotten first. A control plane does not ask again for an
// attempt that ended that many attempts ago.
const maxEndedRecords = 10000

// record is one attempt (one rank of it) as the state file keeps it.
type record struct {
	Job       string    `json:"job"`
	Attempt   int       `json:"attempt"`
	Rank      int       `json:"rank"`
	WorldSize int       `json:"world_size"`
	GPUs      []int     `json:"gpus"`
	StartedAt time.Time `json:"started_at"`
	// PID is the process (and its process group); 0 while it is being
	// started. StartTicks is its start time in clock ticks since boot
	// (/proc/PID/stat), which tells it from a later process with the same
	// PID.
	PID        int    `json:"pid"`
	StartTicks uint64 `json:"start_ticks"`
	// SupervisorPID is the job's supervisor (supervise.go), its parent,
	// which writes its exit status to StatusPath when it ends and then
	// exits; SupervisorStartTicks is its start time. Both are 0 for an
	// attempt an agent without supervisors started: its exit status is
	// unknown to a later agent.
	SupervisorPID        int    `json:"supervisor_pid,omitempty"`
	SupervisorStartTicks uint64 `json:"supervisor_start_ticks,omitempty"`
	StatusPath           string `json:"status_path,omitempty"`

	Dir              string `json:"dir"`
	AckPath          string `json:"ack_path"`
	CheckpointSignal string `json:"checkpoint_signal,omitempty"`
	// Labels are the job's labels, for telemetry (LabelsOfJob).
	Labels           map[string]string `json:"labels,omitempty"`
	CheckpointEveryS float64           `json:"checkpoint_every_s,omitempty"`
	// PowerLimitFraction is the attempt's power cap (StartSpec's), set on
	// its GPUs while it runs and lifted when it ends.
	PowerLimitFraction float64 `json:"power_limit_fraction,omitempty"`

	// Stopping is set once a stop was asked for; at KillAt, the end of
	// its grace period, the process group gets SIGKILL (also from an agent
	// that took the attempt over).
	Stopping bool      `json:"stopping,omitempty"`
	KillAt   time.Time `json:"kill_at,omitzero"`

	Ended    bool      `json:"ended"`
	EndedAt  time.Time `json:"ended_at,omitzero"`
	ExitCode int       `json:"exit_code"`
	Stopped  bool      `json:"stopped,omitempty"`
	// ExitMessage is the exit's message, and Reported whether the control
	// plane took the exit: an agent that starts again reports the exits of
	// the ended attempts it finds not reported (a kill -9 between the exit
	// and its delivery), which the plane would otherwise read as lost.
	ExitMessage string `json:"exit_message,omitempty"`
	Reported    bool   `json:"reported,omitempty"`
	// Lost: the attempt never started (its agent stopped while starting
	// it); its end is reported as lost, for the plane to start another,
	// not as an exit.
	Lost bool `json:"lost,omitempty"`
}

type stateDoc struct {
	Version  int      `json:"version"`
	Attempts []record `json:"attempts"`
}

// stateVersion 2 added Reported; a version 1 file's ended attempts are
// taken as reported, since no agent then kept count.
const stateVersion = 2

// loadState reads the state file; a missing file is an empty state.
func loadState(path string) ([]record, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("state file: %w", err)
	}
	var doc stateDoc
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("state file %s: %w (move it away to start afresh; the agent then cannot tell which attempts it started)", path, err)
	}
	switch doc.Version {
	case 1:
		for i := range doc.Attempts {
			doc.Attempts[i].Reported = doc.Attempts[i].Ended
		}
	case stateVersion:
	default:
		return nil, fmt.Errorf("state file %s: version %d, want %d (or 1)", path, doc.Version, stateVersion)
	}
	return doc.Attempts, nil
}

// saveState writes the state file atomically; of the ended records it keeps
// the newest maxEndedRecords.
func saveState(path string, recs []record) error {
	recs = slices.Clone(recs)
	slices.SortStableFunc(recs, func(a, b record) int { return a.StartedAt.Compare(b.StartedAt) })
	ended := 0
	for _, r := range recs {
		if r.Ended {
			ended++
		}
	}
	if drop := ended - maxEndedRecords; drop > 0 {
		recs = slices.DeleteFunc(recs, func(r record) bool {
			if r.Ended && drop > 0 {
				drop--
				return true
			}
			return false
		})
	}
	return fsutil.WriteAtomic(path, 0o600, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", " ")
		return enc.Encode(stateDoc{Version: stateVersion, Attempts: recs})
	})
}
