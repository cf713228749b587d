package parking

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/control/advice"
	"github.com/prescient-sched/prescient/control/live"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/executor/park"
	"github.com/prescient-sched/prescient/service"
)

// Decide is the parking decision of a cycle, after the plan: it gathers
// what park.Policy.Decide reads (the outlook, the empty nodes that may
// park, the parked nodes that may wake and which of them the waiting jobs
// need) and carries the decision out. The advisor recommends the wakes
// and the parks and changes nothing.
func (p *Parking) Decide(ctx context.Context, lv *live.State, plan executor.Plan) {
	if p.cfg == nil || lv.Now.Before(p.loop.from) {
		return // off, or after a restart while the agents register again
	}
	current := map[string]bool{}
	defer p.d.Advice.Dismiss(ctx, current, advice.Park, advice.Wake)
	in, empty := p.awake(lv, plan)
	waking, wakeable := p.asleep(lv.Now, &in.Outlook)
	planned := map[string]bool{} // nodes the waiting jobs were planned on: not parked
	var needed map[string]string
	if len(wakeable) > 0 || len(waking) > 0 {
		need := park.Need{In: lv.In, Plan: plan, Nodes: lv.Nodes, Tenants: lv.Snap.Tenants}
		for _, pn := range waking {
			need.Waking = append(need.Waking, pn.node)
		}
		for _, pn := range wakeable {
			need.Asleep = append(need.Asleep, pn.node)
		}
		w, err := park.Needed(ctx, p.d.Planner, need)
		if err != nil {
			p.log.Error("parking: planning the jobs that wait failed", "error", err)
		}
		needed, planned = w.Wake, w.Planned // the next cycle plans again: NextReplan is the replay's
	}
	byName := map[string]cluster.Node{}
	for _, pn := range wakeable {
		in.Asleep = append(in.Asleep, park.Asleep{Node: pn.node.Name, GPUs: len(pn.node.GPUs), Since: pn.Since, Needed: needed[pn.node.Name]})
		byName[pn.node.Name] = pn.node
	}
	for _, n := range p.parkable(lv, empty, planned) {
		in.Empty = append(in.Empty, park.Empty{Node: n.Name, GPUs: wholeFree(lv.Snap, n), Since: p.loop.emptySince[n.Name]})
		shape := *n
		shape.State = cluster.NodeReady
		byName[n.Name] = shape
	}
	autopilot := p.d.Mode() == service.ModeAutopilot
	pol := park.Policy{IdleAfter: p.cfg.IdleAfter, Forecast: p.cfg.Forecast, Lookahead: p.cfg.Lookahead}
	for len(in.Empty) > 0 || len(in.Asleep) > 0 {
		acts := pol.Decide(in)
		failed := p.carryOut(ctx, lv.Now, current, acts, byName, autopilot)
		if failed == "" {
			break
		}
		in = in.After(acts, failed) // it stays up: decide again on the rest
	}
}

// awake is the decision's input with the awake nodes' part of the
// outlook, and the awake nodes that run nothing and that the plan placed
// nothing on (it notes since when each has been empty).
func (p *Parking) awake(lv *live.State, plan executor.Plan) (park.Input, []*cluster.Node) {
	busy := lv.NodesWithJobs()
	for _, pl := range plan.Placements {
		for _, a := range pl.Allocations {
			busy[a.GPU.Node] = true
		}
	}
	all, _ := p.Fleet(lv.Nodes)
	in := park.Input{Now: lv.Now, Outlook: park.Outlook{Look: p.cfg.Lookahead, Rate: p.d.ArrivalRate(lv.Now),
		Queued: park.QueuedDemand(lv.In.Queue, lv.In.Running, all, lv.Snap.Tenants)}}
	for _, r := range lv.In.Running {
		in.Outlook.Running(float64(r.Job.Spec.MilliGPUs())/cluster.MilliGPU, r.Progress, r.Forecast.DurationP50, r.Forecast.DurationP90)
	}
	for i := range all {
		in.NodeGPUs = max(in.NodeGPUs, len(all[i].GPUs))
	}
	st := &p.loop
	seen := map[string]bool{}
	var empty []*cluster.Node
	for i := range lv.Nodes {
		n := &lv.Nodes[i]
		if n.State != "" && n.State != cluster.NodeReady {
			continue // failed, drained, parked
		}
		in.Outlook.Free(wholeFree(lv.Snap, n))
		if p.d.Inference(n) || busy[n.Name] || len(n.GPUs) == 0 {
			continue // a node without GPUs (a control-plane or CPU node) is not the plane's to park
		}
		seen[n.Name] = true
		if _, ok := st.emptySince[n.Name]; !ok {
			st.emptySince[n.Name] = lv.Now
		}
		empty = append(empty, n)
	}
	for name := range st.emptySince {
		if !seen[name] {
			delete(st.emptySince, name)
		}
	}
	return in, empty
}

// asleep is copies of the waking nodes, whose GPUs it adds to o (up
// within the lookahead), and of the nodes that may be woken, the longest
// parked first.
func (p *Parking) asleep(now time.Time, o *park.Outlook) (waking, wakeable []parkedNode) {
	p.mu.Lock()
	for _, pn := range p.parked {
		switch {
		case pn.State == park.Waking:
			waking = append(waking, *pn)
			o.Free(len(pn.node.GPUs))
		case pn.Wakeable(now):
			wakeable = append(wakeable, *pn)
		}
	}
	p.mu.Unlock()
	slices.SortFunc(wakeable, func(a, b parkedNode) int {
		return cmp.Or(a.Since.Compare(b.Since), strings.Compare(a.node.Name, b.node.Name))
	})
	return waking, wakeable
}

// parkable is the empty nodes that may be parked, by name: not one the
// waiting jobs were planned on (its empty spell starts again), nor one a
// failed park holds, nor one the Cordoner says must stay up.
func (p *Parking) parkable(lv *live.State, empty []*cluster.Node, planned map[string]bool) []*cluster.Node {
	st := &p.loop
	slices.SortFunc(empty, func(a, b *cluster.Node) int { return strings.Compare(a.Name, b.Name) })
	var out []*cluster.Node
	for _, n := range empty {
		if planned[n.Name] {
			st.emptySince[n.Name] = lv.Now // a job that waits needs it with a node being woken
			continue
		}
		if lv.Now.Before(st.hold[n.Name]) {
			continue
		}
		delete(st.hold, n.Name)
		if p.d.Cordoner != nil {
			if why := p.d.Cordoner.Unparkable(n.Name); why != "" {
				p.log.Debug("parking: the node is not parked", "node", n.Name, "why", why)
				continue
			}
		}
		out = append(out, n)
	}
	return out
}

// carryOut wakes and parks the nodes of a decision in order (the advisor
// recommends it); it stops at the first park that fails and returns its
// node.
func (p *Parking) carryOut(ctx context.Context, now time.Time, current map[string]bool, acts []park.Action, nodes map[string]cluster.Node, autopilot bool) string {
	cfg := p.cfg
	for _, a := range acts {
		n := nodes[a.Node]
		switch {
		case !autopilot:
			p.d.Advice.Add(ctx, now, current, recKinds[a.Kind], "", fmt.Sprintf("%s node %s: %s", a.Kind, a.Node, a.Reason), advice.Details{Node: a.Node})
		case a.Kind == park.Wake:
			p.setParked(ctx, n, park.Parked, park.Waking, now, "node woken: "+a.Reason, cfg.Resume)
		case !p.setParked(ctx, n, park.Awake, park.Parked, now, "node parked: "+a.Reason, cfg.Suspend):
			return a.Node
		default:
			delete(p.loop.emptySince, a.Node)
		}
	}
	return ""
}

// recKinds are the advisor's recommendation kinds of parking's actions.
var recKinds = map[park.ActionKind]string{park.Park: advice.Park, park.Wake: advice.Wake}

// wholeFree is how many of node n's GPUs are wholly free in snap.
func wholeFree(snap *cluster.Snapshot, n *cluster.Node) int {
	free := 0
	for _, g := range n.GPUs {
		if snap.FreeMilli(cluster.GPURef{Node: n.Name, Index: g.Index}) == cluster.MilliGPU {
			free++
		}
	}
	return free
}
