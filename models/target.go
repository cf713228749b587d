package models

import (
	"fmt"
	"math"
	"time"

	"github.com/prescient-sched/prescient/cluster"
)

// Target names what a model forecasts.
type Target string

// The forecast targets.
const (
	// TargetDuration is a job's run time, in seconds.
	TargetDuration Target = "duration"
	// TargetMemory is a job's peak GPU memory on any one GPU, in bytes.
	TargetMemory Target = "memory"
)

// ParseTarget reads "duration" or "memory".
func ParseTarget(s string) (Target, error) {
	switch t := Target(s); t {
	case TargetDuration, TargetMemory:
		return t, nil
	}
	return "", fmt.Errorf("target %q is not one of duration, memory", s)
}

// Unit is the suffix of the target's figures in reports: "s" or "bytes".
func (t Target) Unit() string {
	if t == TargetMemory {
		return "bytes"
	}
	return "s"
}

// minLabel keeps logarithms finite: a run shorter than a second counts as
// one second, a footprint below one byte as one byte.
const minLabel = 1

// Label returns the job's value of the target and whether it is known: the
// run time of a job that ended, the peak GPU memory where it was recorded.
func (t Target) Label(j *cluster.Job) (float64, bool) {
	switch t {
	case TargetMemory:
		if j.Outcome.PeakGPUMemoryBytes <= 0 {
			return 0, false
		}
		return float64(j.Outcome.PeakGPUMemoryBytes), true
	default:
		if !j.State.Terminal() || j.Outcome.RunTime <= 0 {
			return 0, false
		}
		return j.Outcome.RunTime.Seconds(), true
	}
}

// Log maps a target value to the space the learners work in.
func Log(v float64) float64 { return math.Log(math.Max(v, minLabel)) }

// Exp maps a learner's output back to the target's unit.
func Exp(v float64) float64 { return math.Exp(v) }

// EndTime is when a finished job's outcome became known: its EndTime, or,
// for traces that record only the run time (Philly), SubmitTime + RunTime.
// That estimate ignores the time the job queued, so it says the job ended
// earlier than it did; the error is the queueing delay.
func EndTime(j *cluster.Job) time.Time {
	if !j.EndTime.IsZero() {
		return j.EndTime
	}
	return j.SubmitTime.Add(j.Outcome.RunTime)
}
