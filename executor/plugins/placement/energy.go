package placement

import (
	"fmt"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
)

// extraOn is how long placing the job on node i keeps the node on beyond
// the P90 ends of what runs there: the whole job on an idle node.
func (cp *cyclePlacer) extraOn(job *cluster.Job, c *executor.Capacity, i int) time.Duration {
	end := cp.now.Add(cp.remaining(job.ID))
	n := c.Node(i)
	busy := c.WholeFree(i) < len(n.GPUs)
	for g := 0; !busy && g < len(n.GPUs); g++ {
		busy = c.FreeMilli(i, g) < cluster.MilliGPU
	}
	if !busy {
		return end.Sub(cp.now)
	}
	busyUntil := cp.nodeEnd[n.Name]
	if busyUntil.Before(cp.now) {
		busyUntil = cp.now
	}
	return max(end.Sub(busyUntil), 0)
}

// energyCost is the energy term in score levels.
func (cp *cyclePlacer) energyCost(job *cluster.Job, c *executor.Capacity, i int) float64 {
	if cp.args.EnergyLevelsPerHour == 0 {
		return 0
	}
	return cp.args.EnergyLevelsPerHour * cp.extraOn(job, c, i).Hours()
}

// placed notes the job's P90 end on the nodes it was given.
func (cp *cyclePlacer) placed(job *cluster.Job, allocs []cluster.Allocation) {
	end := cp.now.Add(cp.remaining(job.ID))
	for _, a := range allocs {
		if end.After(cp.nodeEnd[a.GPU.Node]) {
			cp.nodeEnd[a.GPU.Node] = end
		}
	}
}

// energyNote says, for the reason of a placement on node i, how long it
// keeps the node on beyond its running jobs (when energy is weighed).
func (cp *cyclePlacer) energyNote(job *cluster.Job, c *executor.Capacity, i int) string {
	if cp.args.EnergyLevelsPerHour == 0 {
		return ""
	}
	if d := cp.extraOn(job, c, i); d > 0 {
		return fmt.Sprintf("; keeps %s on %s longer (P90)", c.Node(i).Name, d.Round(time.Minute))
	}
	return fmt.Sprintf("; %s stays on for its running jobs anyway", c.Node(i).Name)
}
