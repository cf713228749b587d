package control

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/control/advice"
	"github.com/prescient-sched/prescient/control/live"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/executor/park"
	"github.com/prescient-sched/prescient/executor/sim"
	"github.com/prescient-sched/prescient/service"
	"github.com/prescient-sched/prescient/store"
)

// Parking powers down the nodes that run nothing and wakes them when work
// needs them, as Slurm's power saving does, with the forecasts.
//
// A node that is ready, runs nothing and is not an inference node (Lending
// decides those) is parked once it has run nothing for IdleAfter. With
// Forecast it is parked before that, at the first cycle that finds it
// spare by park.Outlook over Lookahead (the other awake nodes' GPUs, free
// now or freed by the running jobs' forecast ends, cover the queued work
// more nodes could serve, the recent arrivals at their rate and a node's
// GPUs more), and after IdleAfter only if the awake nodes still cover the
// demand without it.
//
// A parked node takes no jobs. It is woken when the jobs that wait, once
// the GPUs of the jobs being stopped are free and the nodes already
// waking are up, would be placed on it; with Forecast also ahead of need,
// when the awake and waking nodes fall short of the outlook's demand, so
// that the boot is over before the work comes. While nodes are parked or
// waking, an awake node that a waiting job is planned on at any stage (a
// gang across it and a node being woken) is not parked. A
// woken node is awake once the fleet reports it ready and, when a Suspend
// program powers nodes down, once it was seen down since it parked (a
// node still shutting down is not awake: when it goes down after its
// wake, Resume runs once more); a woken node that is up WakeTimeout after
// its wake is awake though never seen down. A parked node seen down that
// comes back up (by hand) is awake. A woken node whose Resume fails, or
// that is not up WakeTimeout after its wake, is parked again (an error in
// the log) and not woken again for another WakeTimeout; other nodes are
// woken meanwhile.
//
// In autopilot a park runs Suspend, and a wake Resume, with the node's
// name as their argument (Slurm's SuspendProgram and ResumeProgram: IPMI,
// Redfish, a cloud API). A program should start the power change and
// return: it is given a minute, then its process group is killed. Either
// may be empty when a power manager acts on the webhooks node_parked,
// node_waking and node_awake or on GET /v1/fleet instead. A node is not
// woken while its Suspend runs; a Suspend that fails while the node is
// still up leaves it awake, not parked again before another IdleAfter.
// The parked nodes are kept in the store with their shape (a node that is
// off has no agent to register it), so a restart forgets none; after a
// restart that found parked nodes the plane only notes the programs that
// end for NodeSyncTimeout, while the agents register again, and neither
// parks, wakes nor takes an unregistered node for one that went down. A
// restart forgets how long the other nodes had been empty. In advisor
// mode the plane recommends parks and wakes (kinds "park" and "wake") and
// neither parks nor wakes; nodes parked before still become awake when
// they come up.
type Parking struct {
	IdleAfter time.Duration
	Forecast  bool
	// Lookahead is how far the forecast looks (default
	// park.DefaultLookahead).
	Lookahead time.Duration
	// Suspend and Resume are the programs that power a node down and up.
	Suspend, Resume string
	// WakeTimeout is how long a woken node may take to be awake (default
	// DefaultWakeTimeout).
	WakeTimeout time.Duration
}

// DefaultWakeTimeout is how long a woken node may take to be ready unless
// Parking says otherwise (Slurm's ResumeTimeout is 60 s; a GPU server's
// firmware alone often takes minutes).
const DefaultWakeTimeout = 10 * time.Minute

// powerProgramTimeout bounds one run of Suspend or Resume; the program's
// own children get powerProgramWait more to let go of its output.
const (
	powerProgramTimeout = time.Minute
	powerProgramWait    = 5 * time.Second
)

func (c Parking) withDefaults() Parking {
	c.Lookahead = cmp.Or(c.Lookahead, park.DefaultLookahead)
	c.WakeTimeout = cmp.Or(c.WakeTimeout, DefaultWakeTimeout)
	return c
}

func (c *Parking) validate() error {
	var errs []error
	if c.IdleAfter <= 0 {
		errs = append(errs, fmt.Errorf("control: config: parking: IdleAfter %s: want a positive duration", c.IdleAfter))
	}
	if c.Lookahead < 0 || c.WakeTimeout < 0 {
		errs = append(errs, errors.New("control: config: parking: Lookahead and WakeTimeout must not be negative"))
	}
	return errors.Join(errs...)
}

// parkedNode is a node parked or being woken (its park.Record), under the
// Plane's mu.
type parkedNode struct {
	park.Record
	node cluster.Node // as it was when it parked, ready
}

// parseState reads a parked node's state as the store keeps it
// (park.State's String).
func parseState(s string) (park.State, error) {
	for _, st := range []park.State{park.Parked, park.Waking} {
		if s == st.String() {
			return st, nil
		}
	}
	return park.Awake, fmt.Errorf("parked node in state %q, want parked or waking", s)
}

// parkingState is what the plan loop alone keeps of parking.
type parkingState struct {
	emptySince map[string]time.Time // the awake nodes that run nothing, since when
	hold       map[string]time.Time // nodes whose Suspend or Cordon failed: not parked before
	// notParked are the nodes this plane woke, found awake or failed to
	// record parked: a Cordoner's mark on one is this plane's, and
	// settleCordons takes it off.
	notParked map[string]bool
	// marksFrom is when the plane, started, deals with the Cordoner's
	// marks (its placements and the Cordoner's view synced by then), and
	// reconciled whether it has compared the parked nodes it restored
	// with them.
	marksFrom  time.Time
	reconciled bool
	// from is when parking decides again after a restart that found
	// parked nodes.
	from time.Time
}

// powerRun is a Suspend or Resume program's run that ended, for the node
// in state state since since.
type powerRun struct {
	node  string
	state park.State
	since time.Time
	err   error
}

// restoreParked reads the parked nodes from the store, each with when it
// may be woken again, and learns the boots kept there. With parking off
// they are forgotten, and so taken back into the plan: whatever powers
// them up again (by hand) makes them usable.
func (p *Plane) restoreParked(ctx context.Context) error {
	rows, err := p.cfg.Store.ParkedNodes(ctx)
	if err != nil {
		return err
	}
	parked := map[string]*parkedNode{}
	for _, r := range rows {
		if p.cfg.Parking == nil {
			p.log.Warn("parking: a node was parked and parking is off: it is planned on again once it is up; power it up by hand",
				"node", r.Node.Name, "state", r.State, "since", r.Since)
			if err := p.cfg.Store.DeleteParked(ctx, r.Node.Name); err != nil {
				return err
			}
			continue
		}
		st, err := parseState(r.State)
		if err != nil {
			return fmt.Errorf("node %s: %w", r.Node.Name, err)
		}
		// A node restored waking may be down and booting: its Resume is not
		// run again when it is seen down.
		parked[r.Node.Name] = &parkedNode{Record: park.Record{State: st, Since: r.Since, ResumedAgain: st == park.Waking,
			WakeAfter: r.WakeAfter}, node: r.Node}
	}
	boots, err := p.cfg.Store.Boots(ctx)
	if err != nil {
		return err
	}
	for _, b := range boots {
		p.learnBoot(b.Boot)
	}
	p.mu.Lock()
	p.parked = parked
	p.mu.Unlock()
	p.parking.marksFrom = p.cfg.Clock().UTC().Add(p.cfg.NodeSyncTimeout)
	if len(parked) > 0 {
		p.parking.from = p.parking.marksFrom
	}
	return nil
}

// fleetWithParked is nodes with the parked nodes the node source does not
// list (a node that is off has no agent), as they were when they parked,
// and each parked or waking node's state.
func (p *Plane) fleetWithParked(nodes []cluster.Node) ([]cluster.Node, map[string]string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.parked) == 0 {
		return nodes, nil
	}
	states := make(map[string]string, len(p.parked))
	listed := map[string]bool{}
	for i := range nodes {
		listed[nodes[i].Name] = true
	}
	var away []cluster.Node
	for name, pn := range p.parked {
		states[name] = pn.State.String()
		if !listed[name] {
			away = append(away, pn.node)
		}
	}
	slices.SortFunc(away, func(a, b cluster.Node) int { return strings.Compare(a.Name, b.Name) })
	return append(slices.Clone(nodes), away...), states
}

// parkedNow reports whether node is parked or waking.
func (p *Plane) parkedNow(node string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.parked[node] != nil
}

// settleParked, in the plan loop before the live state is read, notes the
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
func (p *Plane) settleParked(ctx context.Context, now time.Time) {
	defer p.settleCordons(ctx, now)
	if p.cfg.Parking == nil {
		return
	}
	cfg := p.cfg.Parking
	settling := now.Before(p.parking.from)
	ready := map[string]bool{}
	for _, n := range p.cfg.Nodes.Nodes() {
		ready[n.Name] = n.State == "" || n.State == cluster.NodeReady
	}
	if p.cfg.Cordoner != nil && !p.parking.reconciled && !now.Before(p.parking.marksFrom) {
		p.reconcileMarks(ctx, now, ready)
	}
	pw := park.Power{Suspend: cfg.Suspend != "", Resume: cfg.Resume != "", WakeTimeout: cfg.WakeTimeout}
	type change struct {
		node   cluster.Node
		step   park.Step
		failed *powerRun // a Suspend that failed, noted again if the change is not recorded
	}
	var (
		changes []change
		resume  []powerRun
	)
	changed := func(name string) bool {
		return slices.ContainsFunc(changes, func(c change) bool { return c.node.Name == name })
	}
	p.mu.Lock()
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
	p.mu.Unlock()
	for _, r := range resume {
		p.log.Warn("parking: a woken node went down after its wake (it was shutting down): its resume program runs again", "node", r.node)
		p.runPowerProgram(ctx, cfg.Resume, r)
	}
	slices.SortFunc(changes, func(a, b change) int { return strings.Compare(a.node.Name, b.node.Name) })
	for _, c := range changes {
		if c.step.To == park.Parked {
			p.setParked(ctx, c.node, park.Waking, park.Parked, now, c.step.Msg, "")
			continue // if not recorded, the next cycle sees the same again
		}
		if !p.setAwake(ctx, c.node.Name, now, c.step.Msg) {
			if c.step.Hold {
				p.mu.Lock()
				p.powerRuns = append(p.powerRuns, *c.failed) // the next cycle sees it again
				p.mu.Unlock()
			}
			continue
		}
		p.parking.notParked[c.node.Name] = true // a node awake while parked bears the mark still
		if c.step.Hold {
			p.parking.hold[c.node.Name] = now.Add(cfg.IdleAfter)
		}
		if c.step.Booted > 0 {
			p.learnBoot(c.step.Booted)
			if err := p.cfg.Store.AddBoot(ctx, store.NodeBoot{Node: c.node.Name, Awake: now, Boot: c.step.Booted}); err != nil {
				p.log.Warn("parking: the boot is not kept for a restart", "node", c.node.Name, "error", err)
			}
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
func (p *Plane) reconcileMarks(ctx context.Context, now time.Time, ready map[string]bool) {
	if p.cfg.Parking == nil {
		p.parking.reconciled = true
		return
	}
	done := true // false: a node is left to compare at the next cycle
	marked := map[string]bool{}
	for _, n := range p.cfg.Cordoner.Cordoned() {
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
	for _, n := range waking {
		if !p.setParked(ctx, n, park.Waking, park.Parked, now, "a node restored waking bears the parked mark: another replica parked it again", "") {
			done = false
		}
	}
	for _, n := range unmarked {
		on, err := p.cfg.Cordoner.Marked(ctx, n.Name)
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
	p.parking.reconciled = done
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
func (p *Plane) settleCordons(ctx context.Context, now time.Time) {
	st := &p.parking
	if p.cfg.Cordoner == nil || p.Mode() != service.ModeAutopilot || now.Before(st.marksFrom) || p.cfg.Parking != nil && !st.reconciled {
		return
	}
	marked := p.cfg.Cordoner.Cordoned()
	if len(marked) == 0 {
		return
	}
	nodes := map[string]cluster.Node{}
	for _, n := range p.cfg.Nodes.Nodes() {
		nodes[n.Name] = n
	}
	var busy map[string]bool // read once, when an up node may be taken as parked
	for _, name := range marked {
		p.mu.Lock()
		pn := p.parked[name]
		p.mu.Unlock()
		if pn != nil && pn.State == park.Parked {
			continue
		}
		if n, listed := nodes[name]; pn == nil && !st.notParked[name] && p.cfg.Parking != nil && listed {
			why := ""
			if n.State == "" || n.State == cluster.NodeReady {
				if busy == nil {
					var err error
					if busy, err = p.nodesWithJobs(ctx); err != nil {
						p.log.Error("parking: a node bears the parked mark with no record here; reading the jobs' nodes failed", "node", name, "error", err)
						continue // the next cycle tries again
					}
				}
				why = p.cfg.Cordoner.Unparkable(name)
				if busy[name] {
					why = "jobs of this plane run there"
				}
			}
			if why == "" {
				if on, err := p.cfg.Cordoner.Marked(ctx, name); err != nil || !on {
					continue // the view is behind (a mark taken off since), or the node unreadable: the next cycle sees
				}
				down := n.State != "" && n.State != cluster.NodeReady
				n.State = cluster.NodeReady // its shape when up
				if p.setParked(ctx, n, park.Awake, park.Parked, now, "node parked: it bears the parked mark, with no record here (parked by another replica, or its record lost)", "") && down {
					p.mu.Lock()
					p.parked[name].SeenDown = true // seen down since its park: awake once it is up
					p.mu.Unlock()
				}
				continue // if not recorded, the next cycle tries again
			}
			p.log.Warn("parking: a node bears the parked mark with no record here and is not taken as parked: it is uncordoned", "node", name, "why", why)
		}
		if err := p.cfg.Cordoner.Uncordon(ctx, name); err != nil {
			p.log.Warn("parking: a node that is not parked is not uncordoned yet", "node", name, "error", err)
			continue
		}
		delete(st.notParked, name)
	}
}

// nodesWithJobs is the nodes where the store's placements hold GPUs.
func (p *Plane) nodesWithJobs(ctx context.Context) (map[string]bool, error) {
	pls, err := p.cfg.Store.Placements(ctx)
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
func (p *Plane) setAwake(ctx context.Context, node string, now time.Time, msg string) bool {
	if err := p.cfg.Store.DeleteParked(ctx, node); err != nil {
		p.log.Error("parking: not recorded", "node", node, "error", err)
		return false
	}
	p.mu.Lock()
	delete(p.parked, node)
	p.mu.Unlock()
	p.changedState()
	p.log.Info("parking: "+msg, "node", node)
	p.notifyNode(ctx, "node_awake", node, "", now, msg)
	return true
}

// learnBoot adds a boot seen to the decayed mean bootTime returns.
func (p *Plane) learnBoot(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.boot = cmp.Or(p.boot, d) + (d-cmp.Or(p.boot, d))/4
}

// bootTime is how long a woken node takes to be awake: the decayed mean
// of the wakes seen (each weighs a quarter), sim.DefaultWakeTime before
// the first.
func (p *Plane) bootTime() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return cmp.Or(p.boot, sim.DefaultWakeTime)
}

// parkNodes is the parking decision of a cycle, after the plan: it wakes
// the parked nodes that the waiting work needs and parks the nodes that
// have run nothing long enough or that the forecast finds spare. The
// advisor recommends the wakes and the parks and changes nothing.
func (p *Plane) parkNodes(ctx context.Context, lv *live.State, plan executor.Plan) {
	if p.cfg.Parking == nil {
		return
	}
	cfg := p.cfg.Parking
	autopilot := p.Mode() == service.ModeAutopilot
	st := &p.parking
	if lv.Now.Before(st.from) {
		return // after a restart, while the agents register again
	}
	current := map[string]bool{}
	defer p.advice.Dismiss(ctx, current, advice.Park, advice.Wake)
	busy := map[string]bool{}
	for _, pl := range lv.Placements {
		for _, a := range pl.Allocations {
			busy[a.GPU.Node] = true
		}
	}
	for _, pl := range plan.Placements {
		for _, a := range pl.Allocations {
			busy[a.GPU.Node] = true
		}
	}
	all, _ := p.fleetWithParked(lv.Nodes)
	o := park.Outlook{Look: cfg.Lookahead, Rate: p.arrivalRate(lv.Now), Queued: park.QueuedDemand(lv.In.Queue, lv.In.Running, all, p.cfg.Tenants)}
	for _, r := range lv.In.Running {
		o.Running(float64(r.Job.Spec.MilliGPUs())/cluster.MilliGPU, r.Progress, r.Forecast.DurationP50, r.Forecast.DurationP90)
	}
	maxGPUs := 0
	seen := map[string]bool{}
	var empty []*cluster.Node
	for i := range all {
		maxGPUs = max(maxGPUs, len(all[i].GPUs))
	}
	for i := range lv.Nodes {
		n := &lv.Nodes[i]
		if n.State != "" && n.State != cluster.NodeReady {
			continue // failed, drained, parked
		}
		o.Free(wholeFree(lv.Snap, n))
		if _, inference := p.inferencePool(n); inference || busy[n.Name] || len(n.GPUs) == 0 {
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
	p.mu.Lock()
	var waking, wakeable []parkedNode // copies: the loop's view of this cycle
	for _, pn := range p.parked {
		switch {
		case pn.State == park.Waking:
			waking = append(waking, *pn)
			o.Free(len(pn.node.GPUs)) // up within the lookahead
		case pn.Wakeable(lv.Now):
			wakeable = append(wakeable, *pn)
		}
	}
	p.mu.Unlock()
	slices.SortFunc(wakeable, func(a, b parkedNode) int {
		return cmp.Or(a.Since.Compare(b.Since), strings.Compare(a.node.Name, b.node.Name))
	})
	planned := map[string]bool{} // nodes the waiting jobs were planned on: not parked
	var needed map[string]string
	if len(wakeable) > 0 || len(waking) > 0 {
		need := park.Need{In: lv.In, Plan: plan, Nodes: lv.Nodes, Tenants: p.cfg.Tenants}
		for _, pn := range waking {
			need.Waking = append(need.Waking, pn.node)
		}
		for _, pn := range wakeable {
			need.Asleep = append(need.Asleep, pn.node)
		}
		var err error
		if needed, planned, err = park.Needed(ctx, p.planner, need); err != nil {
			p.log.Error("parking: planning the jobs that wait failed", "error", err)
		}
	}
	in := park.Input{Now: lv.Now, Outlook: o, NodeGPUs: maxGPUs}
	byName := map[string]cluster.Node{}
	for _, pn := range wakeable {
		in.Asleep = append(in.Asleep, park.Asleep{Node: pn.node.Name, GPUs: len(pn.node.GPUs), Since: pn.Since, Needed: needed[pn.node.Name]})
		byName[pn.node.Name] = pn.node
	}
	slices.SortFunc(empty, func(a, b *cluster.Node) int { return strings.Compare(a.Name, b.Name) })
	for _, n := range empty {
		if planned[n.Name] {
			st.emptySince[n.Name] = lv.Now // a job that waits needs it with a node being woken
			continue
		}
		if lv.Now.Before(st.hold[n.Name]) {
			continue
		}
		delete(st.hold, n.Name)
		if p.cfg.Cordoner != nil {
			if why := p.cfg.Cordoner.Unparkable(n.Name); why != "" {
				p.log.Debug("parking: the node is not parked", "node", n.Name, "why", why)
				continue
			}
		}
		in.Empty = append(in.Empty, park.Empty{Node: n.Name, GPUs: wholeFree(lv.Snap, n), Since: st.emptySince[n.Name]})
		shape := *n
		shape.State = cluster.NodeReady
		byName[n.Name] = shape
	}
	pol := park.Policy{IdleAfter: cfg.IdleAfter, Forecast: cfg.Forecast, Lookahead: cfg.Lookahead}
	for len(in.Empty) > 0 || len(in.Asleep) > 0 {
		acts := pol.Decide(in)
		failed := p.carryOut(ctx, lv.Now, current, acts, byName, autopilot)
		if failed == "" {
			break
		}
		in = in.After(acts, failed) // it stays up: decide again on the rest
	}
}

// carryOut wakes and parks the nodes of a decision in order (the advisor
// recommends it); it stops at the first park that fails and returns its
// node.
func (p *Plane) carryOut(ctx context.Context, now time.Time, current map[string]bool, acts []park.Action, nodes map[string]cluster.Node, autopilot bool) string {
	cfg := p.cfg.Parking
	for _, a := range acts {
		n := nodes[a.Node]
		switch {
		case !autopilot:
			p.advice.Add(ctx, now, current, recKinds[a.Kind], "", fmt.Sprintf("%s node %s: %s", a.Kind, a.Node, a.Reason), advice.Details{Node: a.Node})
		case a.Kind == park.Wake:
			p.setParked(ctx, n, park.Parked, park.Waking, now, "node woken: "+a.Reason, cfg.Resume)
		case !p.setParked(ctx, n, park.Awake, park.Parked, now, "node parked: "+a.Reason, cfg.Suspend):
			return a.Node
		default:
			delete(p.parking.emptySince, a.Node)
		}
	}
	return ""
}

// recKinds are the advisor's recommendation kinds of parking's actions.
var recKinds = map[park.ActionKind]string{park.Park: advice.Park, park.Wake: advice.Wake}

// setParked moves a node from power state from to to (Parked or Waking)
// at now, in the store first, tells the webhooks and runs the program.
func (p *Plane) setParked(ctx context.Context, node cluster.Node, from, to park.State, now time.Time, msg, program string) bool {
	p.mu.Lock()
	cur := p.parked[node.Name]
	p.mu.Unlock()
	state := park.Awake
	if cur != nil {
		state = cur.State
	}
	if state != from {
		return false // it moved since the decision
	}
	// A cordon this call puts on is taken off again if the record fails;
	// the advisor changes no mark.
	cordoned := false
	if to == park.Parked && p.cfg.Cordoner != nil && p.Mode() == service.ModeAutopilot {
		placed, err := p.cfg.Cordoner.Cordon(ctx, node.Name)
		if err != nil && placed {
			p.parking.notParked[node.Name] = true // a mark left on: settleCordons takes it off
		}
		switch {
		case err != nil && from == park.Waking:
			// A node whose wake failed is down, cordoned or not.
			p.log.Warn("parking: the node whose wake failed is not cordoned", "node", node.Name, "error", err)
		case err != nil:
			p.log.Error("parking: the node is not cordoned, so not parked; it is tried again later", "node", node.Name,
				"after", p.cfg.Parking.IdleAfter, "error", err)
			p.parking.hold[node.Name] = now.Add(p.cfg.Parking.IdleAfter)
			return false
		}
		cordoned = placed
	}
	var wakeAfter time.Time
	if from == park.Waking && to == park.Parked {
		wakeAfter = now.Add(p.cfg.Parking.WakeTimeout) // a failed wake: others are woken meanwhile
	}
	if err := p.cfg.Store.PutParked(ctx, store.ParkedNode{State: to.String(), Since: now, Node: node, WakeAfter: wakeAfter}); err != nil {
		p.log.Error("parking: not recorded", "node", node.Name, "state", to, "error", err)
		if cordoned {
			if err := p.cfg.Cordoner.Uncordon(ctx, node.Name); err != nil {
				p.parking.notParked[node.Name] = true // its mark is this plane's: settleCordons takes it off
				p.log.Warn("parking: the node not parked is not uncordoned yet", "node", node.Name, "error", err)
			}
		}
		return false
	}
	p.mu.Lock()
	next := &parkedNode{Record: park.Record{State: to, Since: now, Suspending: to == park.Parked && program != "", WakeAfter: wakeAfter}, node: node}
	if cur != nil {
		next.SeenDown = cur.SeenDown
	}
	p.parked[node.Name] = next
	p.mu.Unlock()
	if to == park.Parked {
		delete(p.parking.notParked, node.Name)
	} else {
		p.parking.notParked[node.Name] = true
	}
	p.changedState()
	if from == park.Waking {
		p.log.Error("parking: "+msg, "node", node.Name)
	} else {
		p.log.Info("parking: "+msg, "node", node.Name)
	}
	if to == park.Waking && p.cfg.Cordoner != nil {
		if err := p.cfg.Cordoner.Uncordon(ctx, node.Name); err != nil {
			p.log.Warn("parking: the woken node is not uncordoned yet", "node", node.Name, "error", err)
		}
	}
	p.notifyNode(ctx, "node_"+to.String(), node.Name, "", now, msg)
	if program != "" {
		p.runPowerProgram(ctx, program, powerRun{node: node.Name, state: to, since: now})
	}
	return true
}

// runPowerProgram runs Suspend or Resume for a node beside the plan loop,
// to its end even when the plane stops: at most powerProgramTimeout, then
// its process group is killed. settleParked hears how it ended.
func (p *Plane) runPowerProgram(ctx context.Context, program string, run powerRun) {
	ctx = context.WithoutCancel(ctx)
	p.background.Add(1)
	go func() {
		defer p.background.Done()
		ctx, cancel := context.WithTimeout(ctx, powerProgramTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, program, run.node)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
		cmd.WaitDelay = powerProgramWait
		out, err := cmd.CombinedOutput()
		if errors.Is(err, exec.ErrWaitDelay) {
			err = nil // it exited well; a child it left behind kept its output open
		}
		if err != nil {
			run.err = err
			p.log.Error("parking: the power program failed", "program", program, "node", run.node, "state", run.state,
				"error", err, "output", string(out[max(len(out)-2000, 0):]))
		}
		p.mu.Lock()
		p.powerRuns = append(p.powerRuns, run)
		p.mu.Unlock()
		if err != nil {
			p.wake()
		}
	}()
}

// notifyNode tells the webhooks of a node's change: a loan's (with its
// pool) or parking's.
func (p *Plane) notifyNode(ctx context.Context, typ, node, pool string, now time.Time, msg string) {
	if p.cfg.Notifier != nil {
		p.cfg.Notifier.Notify(ctx, service.LifecycleEvent{Type: typ, Time: now, Node: node, Pool: pool, Message: msg})
	}
}

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

// arrivalRate is the GPUs arriving per second lately (waitsNow counts the
// arrivals).
func (p *Plane) arrivalRate(now time.Time) float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.arrivals.Rate(now)
}
