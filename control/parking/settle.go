package parking

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor/park"
	"github.com/prescient-sched/prescient/service"
	"github.com/prescient-sched/prescient/store"
)

// Settle, in the plan loop before the live state is read, notes the
// parked nodes that went down and the power programs that ended, wakes
// the nodes whose Suspend failed while they were still up, makes awake
// the woken nodes that are up (and the parked nodes that came back up),
// runs Resume again for a node that was still up when woken and has gone
// down since (it was shutting down), and parks again the woken nodes
// whose Resume failed or that are not up WakeTimeout after their wake.
// While the agents register again after a restart it only notes the
// programs that ended; once they have (and the Cordoner's view has
// synced), it first compares what it restored with the marks
// (reconcileMarks).
func (p *Parking) Settle(ctx context.Context, now time.Time) {
	defer p.settleCordons(ctx, now)
	if p.cfg == nil {
		return
	}
	cfg := p.cfg
	settling := now.Before(p.loop.from)
	ready := map[string]bool{}
	for _, n := range p.d.Nodes.Nodes() {
		ready[n.Name] = n.State == "" || n.State == cluster.NodeReady
	}
	if p.d.Cordoner != nil && !p.loop.reconciled && !now.Before(p.loop.marksFrom) {
		p.reconcileMarks(ctx, now, ready)
	}
	changes, resume := p.steps(now, ready, settling)
	for _, r := range resume {
		p.log.Warn("parking: a woken node went down after its wake (it was shutting down): its resume program runs again", "node", r.node)
		p.runPowerProgram(ctx, cfg.Resume, r)
	}
	for _, c := range changes {
		p.change(ctx, now, c)
	}
}

// change is a move of a parked or waking node that settling found.
type change struct {
	node   cluster.Node
	step   park.Step
	failed *powerRun // a Suspend that failed, noted again if the change is not recorded
}

// steps settles each record on the programs that ended (park.Power.Ended)
// and on what the fleet shows (Observe; not while settling after a
// restart): the changes to record, by node name, and the Resume programs
// to run again.
func (p *Parking) steps(now time.Time, ready map[string]bool, settling bool) (changes []change, resume []powerRun) {
	pw := park.Power{Suspend: p.cfg.Suspend != "", Resume: p.cfg.Resume != "", WakeTimeout: p.cfg.WakeTimeout}
	changed := func(name string) bool {
		return slices.ContainsFunc(changes, func(c change) bool { return c.node.Name == name })
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	runs := p.powerRuns
	p.powerRuns = nil
	for _, r := range runs {
		pn := p.parked[r.node]
		if pn == nil || pn.State != r.state || !pn.Since.Equal(r.since) {
			continue // the node moved on since
		}
		var step park.Step
		pn.Record, step = pw.Ended(pn.Record, r.err, ready[r.node], settling)
		if step.To != pn.State {
			changes = append(changes, change{node: pn.node, step: step, failed: &r})
		}
	}
	for name, pn := range p.parked {
		if settling || changed(name) {
			continue
		}
		var step park.Step
		pn.Record, step = pw.Observe(now, pn.Record, ready[name])
		if step.Resume {
			resume = append(resume, powerRun{node: name, state: park.Waking, since: pn.Since})
		}
		if step.To != pn.State {
			changes = append(changes, change{node: pn.node, step: step})
		}
	}
	slices.SortFunc(changes, func(a, b change) int { return strings.Compare(a.node.Name, b.node.Name) })
	return changes, resume
}

// change records a change settling found: a wake that failed parks the
// node again; an awake node is forgotten, its boot learnt, and held from
// parking when its Suspend failed.
func (p *Parking) change(ctx context.Context, now time.Time, c change) {
	if c.step.To == park.Parked {
		p.setParked(ctx, c.node, park.Waking, park.Parked, now, c.step.Msg, "")
		return // if not recorded, the next cycle sees the same again
	}
	if !p.setAwake(ctx, c.node.Name, now, c.step.Msg) {
		if c.step.Hold {
			p.mu.Lock()
			p.powerRuns = append(p.powerRuns, *c.failed) // the next cycle sees it again
			p.mu.Unlock()
		}
		return
	}
	p.loop.notParked[c.node.Name] = true // a node awake while parked bears the mark still
	if c.step.Hold {
		p.loop.hold[c.node.Name] = now.Add(p.cfg.IdleAfter)
	}
	if c.step.Booted > 0 {
		p.learnBoot(c.step.Booted)
		if err := p.d.Store.AddBoot(ctx, store.NodeBoot{Node: c.node.Name, Awake: now, Boot: c.step.Booted}); err != nil {
			p.log.Warn("parking: the boot is not kept for a restart", "node", c.node.Name, "error", err)
		}
	}
}

// reconcileMarks compares the parked nodes a restart restored with the
// Cordoner's marks, once they have synced: the store may be older than
// the marks when another replica, with a store of its own, led
// meanwhile. A node restored waking that bears the mark was parked again
// (or its uncordon failed before the restart: it is woken again when work
// needs it); one restored parked that is up and, read live, bears no mark
// was woken. It runs before settleParked's own changes, with ready the
// nodes that are up, until every such node has been dealt with (a failed
// read or record is tried again at the next cycle).
func (p *Parking) reconcileMarks(ctx context.Context, now time.Time, ready map[string]bool) {
	if p.cfg == nil {
		p.loop.reconciled = true
		return
	}
	done := true // false: a node is left to compare at the next cycle
	marked := map[string]bool{}
	for _, n := range p.d.Cordoner.Cordoned() {
		marked[n] = true
	}
	p.mu.Lock()
	var waking, unmarked []cluster.Node
	for _, pn := range p.parked {
		switch {
		case pn.State == park.Waking && marked[pn.node.Name]:
			waking = append(waking, pn.node)
		case pn.State == park.Parked && !marked[pn.node.Name] && ready[pn.node.Name]:
			unmarked = append(unmarked, pn.node)
		}
	}
	p.mu.Unlock()
	byName := func(a, b cluster.Node) int { return strings.Compare(a.Name, b.Name) }
	slices.SortFunc(waking, byName) // in the same order at every restart, not the map's
	slices.SortFunc(unmarked, byName)
	for _, n := range waking {
		if !p.setParked(ctx, n, park.Waking, park.Parked, now, "a node restored waking bears the parked mark: another replica parked it again", "") {
			done = false
		}
	}
	for _, n := range unmarked {
		on, err := p.d.Cordoner.Marked(ctx, n.Name)
		if err != nil {
			p.log.Warn("parking: a node restored parked is up and shows no parked mark; reading it failed", "node", n.Name, "error", err)
			done = false
			continue
		}
		if on {
			continue
		}
		if !p.setAwake(ctx, n.Name, now, "node awake: restored parked, it is up and bears no parked mark (another replica woke it)") {
			done = false
		}
	}
	p.loop.reconciled = done
}

// settleCordons, on autopilot and once the plane's placements and the
// Cordoner's view have synced after its start, deals with the nodes that
// bear the Cordoner's mark and are not parked here. With parking off,
// each is uncordoned; so is one this plane is waking, or knows is not
// parked (notParked): the mark is this plane's, left by an uncordon that
// failed. Any other was parked by another replica (with a store of its
// own), or its record was lost: it is taken as parked when it is down
// (its jobs are gone), or up (still shutting down) with none of this
// plane's jobs there and nothing Unparkable names, so it is still woken
// when work needs it; otherwise it is uncordoned. The advisor changes no
// mark.
func (p *Parking) settleCordons(ctx context.Context, now time.Time) {
	st := &p.loop
	if p.d.Cordoner == nil || p.d.Mode() != service.ModeAutopilot || now.Before(st.marksFrom) || p.cfg != nil && !st.reconciled {
		return
	}
	marked := p.d.Cordoner.Cordoned()
	if len(marked) == 0 {
		return
	}
	nodes := map[string]cluster.Node{}
	for _, n := range p.d.Nodes.Nodes() {
		nodes[n.Name] = n
	}
	var busy map[string]bool // read once, when an up node may be taken as parked
	for _, name := range marked {
		n, listed := nodes[name]
		m := park.Mark{Ours: st.notParked[name], Parking: p.cfg != nil, Listed: listed, Up: n.State == "" || n.State == cluster.NodeReady}
		p.mu.Lock()
		if pn := p.parked[name]; pn != nil {
			r := pn.Record
			m.Record = &r
		}
		p.mu.Unlock()
		act, why := park.OnMark(m)
		if act == park.AskBusy {
			if busy == nil {
				var err error
				if busy, err = p.nodesWithJobs(ctx); err != nil {
					p.log.Error("parking: a node bears the parked mark with no record here; reading the jobs' nodes failed", "node", name, "error", err)
					continue // the next cycle tries again
				}
			}
			b := busy[name]
			m.Busy, m.Unparkable = &b, p.d.Cordoner.Unparkable(name)
			act, why = park.OnMark(m)
		}
		switch act {
		case park.KeepMark:
			continue
		case park.AdoptMark:
			p.adoptMarked(ctx, now, n, !m.Up)
			continue // if not recorded, the next cycle tries again
		}
		if why != "" {
			p.log.Warn("parking: a node bears the parked mark with no record here and is not taken as parked: it is uncordoned", "node", name, "why", why)
		}
		if err := p.d.Cordoner.Uncordon(ctx, name); err != nil {
			p.log.Warn("parking: a node that is not parked is not uncordoned yet", "node", name, "error", err)
			continue
		}
		delete(st.notParked, name)
	}
}

// adoptMarked takes a node that bears the parked mark with no record here
// as parked, once the mark read live again confirms it (the view may be
// behind: a mark taken off since); a node down counts as seen down.
func (p *Parking) adoptMarked(ctx context.Context, now time.Time, n cluster.Node, down bool) {
	if on, err := p.d.Cordoner.Marked(ctx, n.Name); err != nil || !on {
		return // the view is behind, or the node unreadable: the next cycle sees
	}
	n.State = cluster.NodeReady // its shape when up
	if p.setParked(ctx, n, park.Awake, park.Parked, now, "node parked: it bears the parked mark, with no record here (parked by another replica, or its record lost)", "") && down {
		p.mu.Lock()
		p.parked[n.Name].SeenDown = true // seen down since its park: awake once it is up
		p.mu.Unlock()
	}
}

// nodesWithJobs is the nodes where the store's placements hold GPUs.
func (p *Parking) nodesWithJobs(ctx context.Context) (map[string]bool, error) {
	pls, err := p.d.Store.Placements(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, pl := range pls {
		for _, a := range pl.Allocations {
			out[a.GPU.Node] = true
		}
	}
	return out, nil
}

// setAwake forgets a parked or waking node, in the store first, and tells
// the log and the webhooks why (msg); false when the store failed.
func (p *Parking) setAwake(ctx context.Context, node string, now time.Time, msg string) bool {
	if err := p.d.Store.DeleteParked(ctx, node); err != nil {
		p.log.Error("parking: not recorded", "node", node, "error", err)
		return false
	}
	p.mu.Lock()
	delete(p.parked, node)
	p.mu.Unlock()
	p.d.Changed()
	p.log.Info("parking: "+msg, "node", node)
	p.notify(ctx, "node_awake", node, now, msg)
	return true
}
