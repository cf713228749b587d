package executor

import (
	"fmt"
	"time"

	"github.com/prescient-sched/prescient/cluster"
)

// reserve gives a blocked job that the policy's Reserver picks a
// reservation: its shadow time is the first expected end (by P90) of a
// running or just-placed job after which the placer can fit it, found by
// releasing their GPUs in end order into a copy of the free capacity; the
// GPUs it would get then are fenced: a job that runs past a shadow time may
// start only outside the fence (see placeBackfill).
func (c *cycle) reserve(v *JobView) {
	ok, why := c.p.Reserver.Reserve(v, len(c.reservations), c.octx)
	if !ok {
		return
	}
	need := gpusOf(v.Job)
	scratch := c.clone(c.free)
	ends := c.sortedEnds()
	for k := 0; ; k++ {
		e, ok := ends.at(k)
		if !ok {
			break
		}
		scratch.ReleaseOn(c.endAllocs(e.i))
		if next, ok := ends.at(k + 1); ok && next.ns == e.ns {
			continue // release every job that ends at the same time first
		}
		if plain(v.Job) && !mayFit(scratch, need) {
			continue
		}
		if allocs, fits, _ := c.p.Placer.Place(v.Job, scratch); fits {
			c.fence(allocs)
			shadow := c.endAt(e.i)
			c.reservations = append(c.reservations, reservation{job: v.Job.ID, shadow: shadow})
			if c.explaining() {
				c.wait(v.Job.ID, fmt.Sprintf("%s: %d GPUs reserved from %s", why, need, shadow.Format(time.RFC3339)))
			}
			return
		}
	}
	if c.explaining() {
		c.wait(v.Job.ID, fmt.Sprintf("needs %d GPUs, more than the fleet frees: no reservation", need))
	}
}

// fence takes a reservation's GPUs, where free now, out of the capacity
// that jobs running past a shadow time may use.
func (c *cycle) fence(allocs []cluster.Allocation) {
	if c.fenced == nil {
		c.fenced = c.clone(c.free)
	}
	takeFree(c.fenced, allocs)
}

// takeFree allocates in c the part of each share that is free there.
func takeFree(c *Capacity, allocs []cluster.Allocation) {
	for _, a := range allocs {
		i, ok := c.NodeIndex(a.GPU.Node)
		if !ok || !c.Ready(i) {
			continue
		}
		if m := min(a.Milli, c.FreeMilli(i, a.GPU.Index)); m > 0 {
			a.Milli = m
			_ = c.Allocate([]cluster.Allocation{a})
		}
	}
}

// runsPastShadow reports whether v, started now, would still run (by its
// P90) at some reservation's shadow time.
func (c *cycle) runsPastShadow(v *JobView) bool {
	endAt := c.in.Now.Add(v.RemainingP90())
	for _, r := range c.reservations {
		if endAt.After(r.shadow) {
			return true
		}
	}
	return false
}

// mayFit is a cheap necessary condition for a plain job of need GPUs to fit
// on nodes of c: enough GPUs free, and a node with room for the part of it
// that is not whole nodes.
func mayFit(c *Capacity, need int) bool {
	if c.FreeGPUs() < need {
		return false
	}
	per := c.MaxNodeGPUs()
	if per == 0 {
		return false
	}
	if whole := need / per; whole > 0 && len(c.Bucket(per)) < whole {
		return false
	}
	rest := need % per
	if rest == 0 {
		return true
	}
	for k := rest; k <= per; k++ {
		if len(c.Bucket(k)) > 0 {
			return true
		}
	}
	return false
}
