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
	busyUntil := cp.now
	if ns := cp.nodeEnds(c)[i]; ns > busyUntil.UnixNano() {
		busyUntil = time.Unix(0, ns)
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

// placed notes the job's P90 end on the nodes it was given on c, where
// energy is weighed.
func (cp *cyclePlacer) placed(job *cluster.Job, allocs []cluster.Allocation, c *executor.Capacity) {
	if cp.args.EnergyLevelsPerHour == 0 {
		return
	}
	end := cp.now.Add(cp.remaining(job.ID))
	if cp.nodeEnd == nil { // noted when nodeEnds reads the running jobs
		cp.placedEnds = append(cp.placedEnds, placedEnd{end, allocs})
		return
	}
	cp.noteEnd(end, nil, allocs, c)
}

// placedEnd is a placement's P90 end, before nodeEnds is read.
type placedEnd struct {
	end    time.Time
	allocs []cluster.Allocation
}

// noteEnd notes end on the nodes of allocs; nodes, where given, are their
// places in c (RunningJob.Nodes).
func (cp *cyclePlacer) noteEnd(end time.Time, nodes []int32, allocs []cluster.Allocation, c *executor.Capacity) {
	if len(nodes) != len(allocs) {
		nodes = nil
	}
	ns := end.UnixNano()
	for i, a := range allocs {
		// A job's GPUs on one node come together: one look per node.
		if i > 0 && a.GPU.Node == allocs[i-1].GPU.Node {
			continue
		}
		var k int
		var ok bool
		if nodes != nil {
			k, ok = c.NodeIndexHint(nodes[i], a.GPU.Node)
		} else {
			k, ok = c.NodeIndex(a.GPU.Node)
		}
		if ok && ns > cp.nodeEnd[k] {
			cp.nodeEnd[k] = ns
		}
	}
}

// nodeEnds is the latest P90 end (Unix nanoseconds; 0 none) of the jobs
// on each node, by its place in c (every capacity of one cycle places
// nodes alike), this cycle's placements included; read from the running
// jobs on first use.
func (cp *cyclePlacer) nodeEnds(c *executor.Capacity) []int64 {
	if cp.nodeEnd != nil {
		return cp.nodeEnd
	}
	cp.nodeEnd = make([]int64, c.Len())
	for _, r := range cp.running {
		cp.noteEnd(cp.now.Add(r.RemainingP90()), r.Nodes, r.Allocations, c)
	}
	for _, p := range cp.placedEnds {
		cp.noteEnd(p.end, nil, p.allocs, c)
	}
	cp.placedEnds = nil
	return cp.nodeEnd
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
