package placement

import (
	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
)

// locality is node i's score bonus for the job's dataset: LocalityLevels
// where a warm copy sits on the node, half where one sits in its rack.
func (cp *cyclePlacer) locality(job *cluster.Job, c *executor.Capacity, i int) float64 {
	d := job.Spec.Data
	if cp.args.LocalityLevels == 0 || d == nil {
		return 0
	}
	n := c.Node(i)
	switch {
	case d.WarmOn(&cluster.Node{Name: n.Name}):
		return cp.args.LocalityLevels
	case d.WarmOn(n):
		return cp.args.LocalityLevels / 2
	}
	return 0
}

// warmth ranks node i for the job's dataset: 2 where a warm copy sits on
// it, 1 where one sits in its rack, 0 otherwise or without locality.
func (cp *cyclePlacer) warmth(job *cluster.Job, c *executor.Capacity, i int) int {
	switch l := cp.locality(job, c, i); {
	case l == 0:
		return 0
	case l == cp.args.LocalityLevels:
		return 2
	}
	return 1
}
