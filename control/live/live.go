// Package live is the state one cycle of the control plane plans on,
// read from the store and the nodes: what the plan loop hands each of the
// plane's concerns (parking, lending, telemetry, what-if) so that none of
// them reads the store again for it.
package live

import (
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/store"
)

// State is the live state at Now.
type State struct {
	Now time.Time
	// Nodes are the fleet's nodes as the plan sees them: those training
	// may not use now (parked, waking, inference nodes not lent) are
	// drained.
	Nodes []cluster.Node
	// Snap is the planner's snapshot of Nodes with the running jobs'
	// allocations.
	Snap *cluster.Snapshot
	// Queued and Active are the queued and the running (or
	// checkpointing) jobs; Placements the placements of the active ones.
	Queued, Active []cluster.Job
	Placements     map[cluster.JobID]store.Placement
	// Forecasts are the jobs' duration and memory forecasts.
	Forecasts map[cluster.JobID]executor.Forecast
	// In is the planner's input built from all of the above.
	In executor.PlanInput
}

// NodesWithJobs is the nodes where the placements hold GPUs.
func (s *State) NodesWithJobs() map[string]bool {
	out := map[string]bool{}
	for _, pl := range s.Placements {
		for _, a := range pl.Allocations {
			out[a.GPU.Node] = true
		}
	}
	return out
}

// SavedProgress is the work a job keeps when it resumes: the time it ran
// before, when it has a checkpoint (an estimate: work after the last
// checkpoint of an interrupted attempt is counted too).
func SavedProgress(j *cluster.Job) time.Duration {
	if j.LastCheckpoint == nil {
		return 0
	}
	return j.Outcome.RunTime
}
