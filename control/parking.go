package control

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/executor/park"
	"github.com/prescient-sched/prescient/store"
)

// Parking powers down the nodes that run nothing and wakes them when work
// needs them, as Slurm's power saving does, with the forecasts.
//
// A node that is ready, runs nothing and is not an inference node (Lending
// decides those) is parked once it has run nothing for IdleAfter. With
// Forecast it is parked as soon as it empties when park.Outlook says it is
// spare over Lookahead (the other awake nodes' GPUs, free now or freed by
// the running jobs' forecast ends, cover the queue, the recent arrivals at
// their rate and a node's GPUs more), and after IdleAfter only if the
// awake nodes still cover the demand without it.
//
// A parked node takes no jobs. It is woken when the plan, made again as if
// the parked nodes were up, places a job that waits on it; with Forecast
// also ahead of need, when the outlook says the awake and waking nodes
// fall short over Lookahead, so that the boot is over before the work
// comes. A woken node is awake once the fleet reports it ready; one that
// is not ready WakeTimeout after the wake is given up (an error in the
// log): the fleet's own state of it stands.
//
// In autopilot a park runs Suspend, and a wake Resume, with the node's
// name as their argument (Slurm's SuspendProgram and ResumeProgram: IPMI,
// Redfish, a cloud API); either may be empty when a power manager acts on
// the webhooks node_parked, node_waking and node_awake or on GET
// /v1/fleet instead. A Suspend that fails leaves the node awake, not
// parked again before another IdleAfter. The parked nodes are kept in the
// store with their shape (a node that is off has no agent to register
// it), so a restart forgets none; it forgets how long the others have
// been empty. In advisor mode the plane recommends parks (kind "park")
// and parks nothing.
type Parking struct {
	IdleAfter time.Duration
	Forecast  bool
	// Lookahead is how far the forecast looks (default
	// park.DefaultLookahead).
	Lookahead time.Duration
	// Suspend and Resume are the programs that power a node down and up.
	Suspend, Resume string
	// WakeTimeout is how long a woken node may take to be ready (default
	// DefaultWakeTimeout).
	WakeTimeout time.Duration
}

// DefaultWakeTimeout is how long a woken node may take to be ready unless
// Parking says otherwise (Slurm's ResumeTimeout is 60 s; a GPU server's
// firmware alone often takes minutes).
const DefaultWakeTimeout = 10 * time.Minute

// powerProgramTimeout bounds one run of Suspend or Resume.
const powerProgramTimeout = time.Minute

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

// The kind of the advisor's parking recommendations.
const recPark = "park"

// The states of a node powered down, as the store and GET /v1/fleet name
// them.
const (
	powerParked = "parked"
	powerWaking = "waking"
)

// parkedNode is a node parked or being woken, under the Plane's mu.
type parkedNode struct {
	state string // powerParked or powerWaking
	since time.Time
	node  cluster.Node // as it was when it parked, ready
	// wentDown is set once the fleet reported the node not ready after it
	// parked: a woken node that never went down is awake at once.
	wentDown bool
}

// parkingState is what the plan loop alone keeps of parking.
type parkingState struct {
	emptySince map[string]time.Time // the awake nodes that run nothing, since when
	hold       map[string]time.Time // nodes whose Suspend failed: not parked before
}

// arrivals are the GPUs of the jobs seen arriving, decayed with a time
// constant of an hour (as the replay's), under the Plane's mu.
type arrivals struct {
	gpus float64
	at   time.Time
}

const arrivalTau = time.Hour

func (a *arrivals) decay(now time.Time) {
	if !a.at.IsZero() && now.After(a.at) {
		a.gpus *= math.Exp(-now.Sub(a.at).Seconds() / arrivalTau.Seconds())
	}
	if now.After(a.at) {
		a.at = now
	}
}

// add counts a job of gpus submitted at submit, seen first at now.
func (a *arrivals) add(now, submit time.Time, gpus float64) {
	a.decay(now)
	a.gpus += gpus * math.Exp(-max(now.Sub(submit), 0).Seconds()/arrivalTau.Seconds())
}

// rate is the GPUs arriving per second lately.
func (a *arrivals) rate(now time.Time) float64 {
	a.decay(now)
	return a.gpus / arrivalTau.Seconds()
}

// restoreParked reads the parked nodes from the store.
func (p *Plane) restoreParked(ctx context.Context) error {
	rows, err := p.cfg.Store.ParkedNodes(ctx)
	if err != nil {
		return err
	}
	if p.cfg.Parking == nil && len(rows) > 0 {
		p.log.Warn("parking: nodes were parked, and parking is off: they stay off until they are woken by hand", "nodes", len(rows))
	}
	parked := map[string]*parkedNode{}
	for _, r := range rows {
		parked[r.Node.Name] = &parkedNode{state: r.State, since: r.Since, node: r.Node}
	}
	p.mu.Lock()
	p.parked = parked
	p.mu.Unlock()
	return nil
}

// powerOf is node's parking state ("parked", "waking"), or "".
func (p *Plane) powerOf(node string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pn := p.parked[node]; pn != nil {
		return pn.state
	}
	return ""
}

// withParked is nodes and the parked nodes the node source does not list
// (a node that is off has no agent), as they were when they parked.
func (p *Plane) withParked(nodes []cluster.Node) []cluster.Node {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.parked) == 0 {
		return nodes
	}
	listed := map[string]bool{}
	for i := range nodes {
		listed[nodes[i].Name] = true
	}
	var away []cluster.Node
	for name, pn := range p.parked {
		if !listed[name] {
			away = append(away, pn.node)
		}
	}
	slices.SortFunc(away, func(a, b cluster.Node) int { return strings.Compare(a.Name, b.Name) })
	return append(slices.Clone(nodes), away...)
}

// markParked takes the parked and waking nodes out of the plan: drained.
func (p *Plane) markParked(lv *live) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.parked) == 0 {
		return
	}
	lv.nodes = slices.Clone(lv.nodes) // the node source's own, shared
	for i := range lv.nodes {
		if n := &lv.nodes[i]; n.State != cluster.NodeFailed && p.parked[n.Name] != nil {
			n.State = cluster.NodeDrained
		}
	}
}

// settleParked, in the plan loop before the live state is read, notes the
// parked nodes that went down, wakes those whose Suspend failed, and
// makes awake the woken nodes that are ready (or gives them up after
// WakeTimeout).
func (p *Plane) settleParked(ctx context.Context, now time.Time) {
	if p.cfg.Parking == nil {
		return
	}
	ready := map[string]bool{}
	for _, n := range p.cfg.Nodes.Nodes() {
		ready[n.Name] = n.State == "" || n.State == cluster.NodeReady
	}
	p.mu.Lock()
	failed := p.suspendFailed
	p.suspendFailed = nil
	type change struct {
		node, msg string
		giveUp    bool
	}
	var changes []change
	for name, pn := range p.parked {
		if !ready[name] {
			pn.wentDown = true
		}
		switch {
		case slices.Contains(failed, name) && pn.state == powerParked:
			changes = append(changes, change{node: name, msg: "the suspend program failed: the node stays awake"})
			p.parking.hold[name] = now.Add(p.cfg.Parking.IdleAfter)
		case pn.state == powerWaking && ready[name]:
			changes = append(changes, change{node: name, msg: "node awake"})
		case pn.state == powerParked && ready[name] && pn.wentDown:
			changes = append(changes, change{node: name, msg: "node awake: it came back up while parked"})
		case pn.state == powerWaking && now.Sub(pn.since) >= p.cfg.Parking.WakeTimeout:
			changes = append(changes, change{node: name, msg: fmt.Sprintf("node not ready %s after it was woken: given up", p.cfg.Parking.WakeTimeout), giveUp: true})
		}
	}
	p.mu.Unlock()
	slices.SortFunc(changes, func(a, b change) int { return strings.Compare(a.node, b.node) })
	for _, c := range changes {
		if err := p.cfg.Store.DeleteParked(ctx, c.node); err != nil {
			p.log.Error("parking: not recorded", "node", c.node, "error", err)
			continue
		}
		p.mu.Lock()
		delete(p.parked, c.node)
		p.mu.Unlock()
		p.changedState()
		if c.giveUp {
			p.log.Error("parking: "+c.msg, "node", c.node)
			continue
		}
		p.log.Info("parking: "+c.msg, "node", c.node)
		p.notifyNode(ctx, "node_awake", c.node, "", now, c.msg)
	}
}

// parkNodes is the parking decision of a cycle, after the plan: it wakes
// the parked nodes that the waiting work needs and parks the nodes that
// have run nothing long enough or that the forecast finds spare. The
// advisor recommends the parks and changes nothing.
func (p *Plane) parkNodes(ctx context.Context, lv *live, plan executor.Plan) {
	if p.cfg.Parking == nil {
		return
	}
	cfg := p.cfg.Parking
	autopilot := p.Mode() == ModeAutopilot
	busy := map[string]bool{}
	for _, pl := range lv.placements {
		for _, a := range pl.Allocations {
			busy[a.GPU.Node] = true
		}
	}
	for _, pl := range plan.Placements {
		for _, a := range pl.Allocations {
			busy[a.GPU.Node] = true
		}
	}
	maxGPUs := 0
	o := park.Outlook{Look: cfg.Lookahead, Rate: p.arrivalRate(lv.now)}
	for i := range lv.queued {
		o.Queued += float64(lv.queued[i].Spec.MilliGPUs()) / cluster.MilliGPU
	}
	for _, r := range lv.in.Running {
		o.Running(float64(r.Job.Spec.MilliGPUs())/cluster.MilliGPU, r.Progress, r.Forecast.DurationP50, r.Forecast.DurationP90)
	}
	st := &p.parking
	seen := map[string]bool{}
	var empty []*cluster.Node
	for i := range lv.nodes {
		n := &lv.nodes[i]
		maxGPUs = max(maxGPUs, len(n.GPUs))
		if n.State != "" && n.State != cluster.NodeReady {
			continue // failed, drained, parked
		}
		o.Free(wholeFree(lv.snap, n))
		if _, inference := p.inferencePool(n); inference || busy[n.Name] {
			continue
		}
		seen[n.Name] = true
		if _, ok := st.emptySince[n.Name]; !ok {
			st.emptySince[n.Name] = lv.now
		}
		empty = append(empty, n)
	}
	for name := range st.emptySince {
		if !seen[name] {
			delete(st.emptySince, name)
		}
	}
	p.mu.Lock()
	var parked []*parkedNode
	for _, pn := range p.parked {
		maxGPUs = max(maxGPUs, len(pn.node.GPUs))
		if pn.state == powerWaking {
			o.Free(len(pn.node.GPUs)) // up within the lookahead
		} else {
			parked = append(parked, pn)
		}
	}
	p.mu.Unlock()
	slices.SortFunc(parked, func(a, b *parkedNode) int {
		return cmp.Or(a.since.Compare(b.since), strings.Compare(a.node.Name, b.node.Name))
	})

	if autopilot && len(parked) > 0 {
		wake := p.parkedNeeded(ctx, lv, plan, parked)
		for _, pn := range parked {
			if wake[pn.node.Name] != "" {
				o.Free(len(pn.node.GPUs))
			}
		}
		if cfg.Forecast {
			for _, pn := range parked {
				if short := o.Short(); short > 0 && wake[pn.node.Name] == "" {
					wake[pn.node.Name] = fmt.Sprintf("the forecast: %.1f GPUs wanted over the next %s, %.1f there", o.Demand(), cfg.Lookahead, o.Supply())
					o.Free(len(pn.node.GPUs))
				}
			}
		}
		for _, pn := range parked {
			if why := wake[pn.node.Name]; why != "" {
				p.setParked(ctx, pn.node, powerParked, powerWaking, lv.now, "node woken: "+why, cfg.Resume)
			}
		}
	}

	current := map[string]bool{}
	slices.SortFunc(empty, func(a, b *cluster.Node) int {
		return cmp.Or(st.emptySince[a.Name].Compare(st.emptySince[b.Name]), strings.Compare(a.Name, b.Name))
	})
	for _, n := range empty {
		if lv.now.Before(st.hold[n.Name]) {
			continue
		}
		delete(st.hold, n.Name)
		gpus := wholeFree(lv.snap, n)
		o.Free(-gpus) // the supply without it
		idleFor := lv.now.Sub(st.emptySince[n.Name])
		var why string
		switch {
		case cfg.Forecast && o.Spare(maxGPUs):
			why = fmt.Sprintf("the forecast: %.1f GPUs there without it over the next %s, %.1f wanted and a node's %d more", o.Supply(), cfg.Lookahead, o.Demand(), maxGPUs)
		case idleFor >= cfg.IdleAfter && (!cfg.Forecast || o.Short() == 0):
			why = fmt.Sprintf("it ran nothing for %s", idleFor.Round(time.Second))
		default:
			o.Free(gpus)
			continue
		}
		if !autopilot {
			p.addRecommendation(ctx, lv.now, current, recPark, "", fmt.Sprintf("park node %s: %s", n.Name, why), recDetails{Node: n.Name})
			continue
		}
		shape := *n
		shape.State = cluster.NodeReady
		if !p.setParked(ctx, shape, "", powerParked, lv.now, "node parked: "+why, cfg.Suspend) {
			o.Free(gpus)
			continue
		}
		delete(st.emptySince, n.Name)
	}
	if !autopilot {
		p.dismissStale(ctx, current, func(kind string) bool { return kind == recPark })
	}
}

// parkedNeeded plans again as if the parked nodes were up, with what this
// cycle's plan placed, and says which parked nodes the jobs that wait
// would be placed on, and why.
func (p *Plane) parkedNeeded(ctx context.Context, lv *live, plan executor.Plan, parked []*parkedNode) map[string]string {
	wake := map[string]string{}
	if len(plan.Placements) == len(lv.in.Queue) {
		return wake // nothing waits
	}
	nodes := slices.Clone(lv.nodes)
	at := map[string]int{}
	for i := range nodes {
		at[nodes[i].Name] = i
	}
	for _, pn := range parked {
		if i, ok := at[pn.node.Name]; ok {
			nodes[i].State = cluster.NodeReady
		} else {
			nodes = append(nodes, pn.node)
		}
	}
	snap := cluster.NewSnapshot(&cluster.Fleet{Nodes: nodes, Tenants: p.cfg.Tenants}, lv.now)
	in := lv.in
	in.Cluster, in.Unexplained = snap, true
	for _, r := range lv.in.Running {
		if err := snap.Allocate(r.Job.ID, r.Allocations); err != nil {
			p.log.Warn("parking: a running job's GPUs are not in the fleet", "job", r.Job.ID, "error", err)
		}
	}
	placed := map[cluster.JobID]bool{}
	for _, pl := range plan.Placements {
		placed[pl.Job] = true
		if err := snap.Allocate(pl.Job, pl.Allocations); err != nil {
			p.log.Warn("parking: a placement's GPUs are not in the fleet", "job", pl.Job, "error", err)
		}
	}
	in.Queue = nil
	for _, v := range lv.in.Queue {
		if !placed[v.Job.ID] {
			in.Queue = append(in.Queue, v)
		}
	}
	if len(in.Queue) == 0 {
		return wake
	}
	again, err := p.planner.Plan(ctx, in)
	if err != nil {
		p.log.Error("parking: planning with the parked nodes up failed", "error", err)
		return wake
	}
	for _, pl := range again.Placements {
		for _, a := range pl.Allocations {
			if _, known := wake[a.GPU.Node]; !known && slices.ContainsFunc(parked, func(pn *parkedNode) bool { return pn.node.Name == a.GPU.Node }) {
				wake[a.GPU.Node] = fmt.Sprintf("job %s waits for it", pl.Job)
			}
		}
	}
	return wake
}

// setParked moves a node from parking state from ("": awake) to to at
// now, in the store first, tells the webhooks and runs the program.
func (p *Plane) setParked(ctx context.Context, node cluster.Node, from, to string, now time.Time, msg, program string) bool {
	p.mu.Lock()
	cur := p.parked[node.Name]
	p.mu.Unlock()
	state := ""
	if cur != nil {
		state = cur.state
	}
	if state != from {
		return false // it moved since the decision
	}
	if err := p.cfg.Store.PutParked(ctx, store.ParkedNode{State: to, Since: now, Node: node}); err != nil {
		p.log.Error("parking: not recorded", "node", node.Name, "state", to, "error", err)
		return false
	}
	p.mu.Lock()
	next := &parkedNode{state: to, since: now, node: node}
	if cur != nil {
		next.wentDown = cur.wentDown
	}
	p.parked[node.Name] = next
	p.mu.Unlock()
	p.changedState()
	p.log.Info("parking: "+msg, "node", node.Name)
	p.notifyNode(ctx, "node_"+to, node.Name, "", now, msg)
	if program != "" {
		p.runPowerProgram(ctx, program, node.Name, to)
	}
	return true
}

// runPowerProgram runs Suspend or Resume for node beside the plan loop,
// to its end even when the plane stops (at most powerProgramTimeout). A
// Suspend that fails is noted for settleParked.
func (p *Plane) runPowerProgram(ctx context.Context, program, node, state string) {
	ctx = context.WithoutCancel(ctx)
	p.background.Add(1)
	go func() {
		defer p.background.Done()
		ctx, cancel := context.WithTimeout(ctx, powerProgramTimeout)
		defer cancel()
		out, err := exec.CommandContext(ctx, program, node).CombinedOutput()
		if err == nil {
			return
		}
		p.log.Error("parking: the power program failed", "program", program, "node", node, "state", state,
			"error", err, "output", string(out[max(len(out)-2000, 0):]))
		if state == powerParked {
			p.mu.Lock()
			p.suspendFailed = append(p.suspendFailed, node)
			p.mu.Unlock()
			p.wake()
		}
	}()
}

// notifyNode tells the webhooks of a node's change: a loan's (with its
// pool) or parking's.
func (p *Plane) notifyNode(ctx context.Context, typ, node, pool string, now time.Time, msg string) {
	if p.cfg.Notifier != nil {
		p.cfg.Notifier.Notify(ctx, LifecycleEvent{Type: typ, Time: now, Node: node, Pool: pool, Message: msg})
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
	return p.arrivals.rate(now)
}
