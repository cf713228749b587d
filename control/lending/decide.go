package lending

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/control/advice"
	"github.com/prescient-sched/prescient/control/live"
	"github.com/prescient-sched/prescient/control/telemetry"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/executor/lend"
	"github.com/prescient-sched/prescient/models/idle"
	"github.com/prescient-sched/prescient/service"
)

// Reclaim, in autopilot, gives each node being taken back whose jobs are
// gone back to inference, and returns the stops of the jobs still on such
// nodes, each checkpointing and stopping by Notice after its node's
// take-back (the earliest, for a job on several): the plan loop carries
// them out.
func (p *Lending) Reclaim(ctx context.Context, lv *live.State) []executor.Preemption {
	if p.cfg == nil || p.d.Mode() != service.ModeAutopilot {
		return nil
	}
	notice := p.cfg.Notice
	on := map[string]map[cluster.JobID]bool{}
	for _, pl := range lv.Placements {
		for _, a := range pl.Allocations {
			if on[a.GPU.Node] == nil {
				on[a.GPU.Node] = map[cluster.JobID]bool{}
			}
			on[a.GPU.Node][pl.Job] = true
		}
	}
	p.mu.Lock()
	returning := map[string]nodeLoan{}
	for node, l := range p.loans {
		if l.state == lend.Returning {
			returning[node] = *l
		}
	}
	p.mu.Unlock()
	stops := map[cluster.JobID]executor.Preemption{} // a job on several nodes taken back stops by the earliest notice
	for node, l := range returning {
		if len(on[node]) == 0 {
			p.setLoan(ctx, node, l.pool, lend.Returning, lend.Serving, lv.Now, "node back to inference")
			continue
		}
		for id := range on[node] {
			if pr, ok := stops[id]; !ok || l.since.Add(notice).Before(pr.StopBy) {
				stops[id] = executor.Preemption{Job: id, CheckpointFirst: true, StopBy: l.since.Add(notice),
					Reason: fmt.Sprintf("node %s goes back to inference pool %s", node, l.pool)}
			}
		}
	}
	var out []executor.Preemption
	for id, pr := range stops {
		if pl := lv.Placements[id]; !pl.Stopping() {
			out = append(out, pr)
		}
	}
	return out
}

// loanPool is an inference pool as a lending decision reads it.
type loanPool struct {
	name  string
	nodes []string
	gpus  []int
	uuids [][]string // each node's GPUs with telemetry
	load  []int      // milli-GPUs of training on each node
	down  []bool
}

// decision is what a background read decided for the cycle to
// apply, made on the pool's loans as they were at generation gen.
type decision struct {
	at                        time.Time
	gen                       uint64
	pool                      string
	nodes                     []string
	takeBack, lend            []int
	ahead                     []float64
	busy, serving, keep, loan float64
	forecast                  bool // a forecast's decision, not a take-back of a pool all busy
}

// Watch starts, each minute and one at a time, a read of the inference
// pools' utilization beside the plan loop; it decides on loans for Apply
// to carry out at the next cycle.
func (p *Lending) Watch(ctx context.Context, lv *live.State) {
	if p.cfg == nil || p.d.Telemetry == nil {
		return
	}
	if !p.read.Due(lv.Now, telemetry.ReadEvery) {
		return
	}
	p.mu.Lock()
	forecast := p.forecastAt.IsZero() || lv.Now.Sub(p.forecastAt) >= p.cfg.Every
	p.mu.Unlock()
	pools, uuids := p.pools(lv)
	model, threshold := telemetry.Served(p.d.Idle)
	p.read.Go(func() { // the plan loop's context
		grids, read := p.d.Util.Read(ctx, lv.Now, threshold, uuids)
		// Another read under way (watchIdle's, a forecast's) reads for
		// this one too: wait for it, then take the copy.
		wait := time.NewTimer(telemetry.ReadTimeout)
		defer wait.Stop()
		for !read && p.d.Util.ReadUnderWay() {
			select {
			case <-ctx.Done():
				return
			case <-wait.C:
				return
			case <-time.After(50 * time.Millisecond):
			}
			grids, read = p.d.Util.Read(ctx, lv.Now, threshold, uuids)
		}
		if !read {
			return // the store did not answer: no decision this time
		}
		p.gpusByNode(pools, lv.Now, threshold, grids)
		var out []decision
		for _, lp := range pools {
			if d, ok := p.decideLoans(lv.Now, model, lp, grids, forecast); ok {
				out = append(out, d)
			}
		}
		p.mu.Lock()
		p.pending = append(p.pending, out...)
		if forecast && len(out) > 0 { // a pool was forecast (none before the nodes register)
			p.forecastAt = lv.Now
		}
		p.mu.Unlock()
		if len(out) > 0 {
			p.d.Poke()
		}
	})
}

// pools is the inference pools as the nodes are now, with the training
// load on each node and every pool GPU's UUID.
func (p *Lending) pools(lv *live.State) ([]*loanPool, []string) {
	load := map[string]int{}
	for _, pl := range lv.Placements {
		for _, a := range pl.Allocations {
			load[a.GPU.Node] += a.Milli
		}
	}
	var pools []*loanPool
	byName := map[string]*loanPool{}
	var uuids []string
	for _, n := range p.d.Nodes.Nodes() {
		name, ok := p.Inference(&n)
		if !ok {
			continue
		}
		lp := byName[name]
		if lp == nil {
			lp = &loanPool{name: name}
			byName[name] = lp
			pools = append(pools, lp)
		}
		var us []string
		for _, g := range n.GPUs {
			if g.UUID != "" {
				us = append(us, g.UUID)
			}
		}
		lp.nodes, lp.gpus, lp.uuids = append(lp.nodes, n.Name), append(lp.gpus, len(n.GPUs)), append(lp.uuids, us)
		lp.load, lp.down = append(lp.load, load[n.Name]), append(lp.down, n.State == cluster.NodeFailed)
		uuids = append(uuids, us...)
	}
	return pools, uuids
}

// gpusByNode gives each pool node whose GPUs carry no UUIDs (a Kubernetes
// node's come from its labels) the GPUs the telemetry has seen on it, by
// the node name its samples carry, with their grids, and counts it as
// holding at least those: the GPUs that the inference servers, pods of
// another scheduler, hold are off the node as the backend lists it, and
// the service's demand is theirs.
func (p *Lending) gpusByNode(pools []*loanPool, now time.Time, threshold float64, grids map[string]idle.Grid) {
	var on map[string][]string
	for _, lp := range pools {
		for k, name := range lp.nodes {
			if len(lp.uuids[k]) > 0 {
				continue
			}
			if on == nil {
				on = p.d.Util.ByNode(now)
			}
			us := on[name]
			lp.uuids[k], lp.gpus[k] = us, max(lp.gpus[k], len(us))
			maps.Copy(grids, p.d.Util.Grids(us, now, threshold))
		}
	}
}

// decideLoans decides on one pool's loans: with forecast, on the lender's
// forecast; otherwise only whether a pool all busy takes a node back.
//
// The demand at a minute is the pool's GPUs that served inference then
// and were busy (at or above the idle threshold, or not seen); a node's
// minutes on loan are not the service's (nodeLoan.served). A node whose
// GPUs served lately (within Recent) is kept; a failed node is kept, and
// a failed serving node's GPUs count as busy (they serve nothing).
func (p *Lending) decideLoans(now time.Time, model *idle.Model, lp *loanPool, grids map[string]idle.Grid, forecast bool) (decision, bool) {
	cfg := p.cfg
	p.mu.Lock()
	loans := make([]*nodeLoan, len(lp.nodes))
	nodes := make([]lend.Node, len(lp.nodes))
	for k, name := range lp.nodes {
		nodes[k] = lend.Node{GPUs: lp.gpus[k], Load: lp.load[k], Down: lp.down[k], Keep: lp.down[k]}
		if l := p.loans[name]; l != nil {
			c := *l
			loans[k], nodes[k].State = &c, l.state
		}
	}
	gen := p.gen[lp.name]
	p.mu.Unlock()

	dm := p.demand(now, lp, grids, loans, nodes)
	busyNow := dm.busy[len(dm.busy)-1]
	d := decision{at: now, gen: gen, pool: lp.name, nodes: lp.nodes, busy: busyNow, serving: float64(dm.serving)}
	// Every serving GPU busy: the demand may be beyond them.
	d.takeBack = lend.TakeBack(nodes, lend.Urgent(float64(dm.servingBusy), float64(dm.serving), true))
	if !forecast {
		return d, len(d.takeBack) > 0
	}
	hist := make([]float64, len(dm.busy))
	for m := range hist {
		hist[m] = float64(dm.upGPUs) - dm.busy[m]
	}
	pol := cfg.policy()
	var lender lend.Lender
	switch {
	case model != nil:
		lender = lend.Model{Model: model, Level: cfg.Level, Recent: cfg.Recent}
	case cfg.Recent > 0:
		lender = lend.Recent{Window: cfg.Recent}
	default:
		p.log.Warn("lending: no idle model is published and Recent is 0 (the model alone): nothing lent this time", "pool", lp.name)
		return d, len(d.takeBack) > 0
	}
	ahead, err := lender.IdleAhead(lend.Query{Now: now, GPUs: dm.upGPUs, History: hist, Replicas: dm.reps, Step: pol.Every, Leads: pol.Leads()})
	if err != nil || len(ahead) < pol.Leads() {
		p.log.Warn("lending: no forecast; nothing lent this time", "pool", lp.name, "error", err)
		return d, len(d.takeBack) > 0
	}
	for _, k := range d.takeBack {
		nodes[k].State = lend.Returning
	}
	// A failed node's GPUs are busy to Decide: they serve nothing.
	dec := pol.Decide(ahead, nodes, busyNow+float64(dm.downGPUs))
	d.takeBack = append(d.takeBack, dec.TakeBack...)
	d.lend, d.ahead, d.keep, d.loan, d.forecast = dec.Lend, ahead, dec.Keep, dec.Loanable, true
	return d, true
}

// poolDemand is a pool's inference demand as a decision reads it.
type poolDemand struct {
	busy        []float64   // the busy GPUs up at each minute of the grids, the last now
	reps        [][]float64 // each seen GPU's idleness, its minutes on loan NaN
	upGPUs      int         // the GPUs of the nodes up (a failed lent node is up to the service)
	downGPUs    int         // the GPUs of the failed serving nodes
	serving     int         // the GPUs of the serving nodes
	servingBusy int         // of those, busy now
}

// demand is lp's demand: a GPU that served inference at a minute and was
// busy (at or above the idle threshold, or not seen) then; a node's
// minutes on loan are not the service's (nodeLoan.served). It marks the
// nodes whose GPUs served within Recent to Keep.
func (p *Lending) demand(now time.Time, lp *loanPool, grids map[string]idle.Grid, loans []*nodeLoan, nodes []lend.Node) poolDemand {
	n := int(telemetry.History / telemetry.Step) // the grids' minutes, the last now
	start := now.Truncate(telemetry.Step).Add(-time.Duration(n-1) * telemetry.Step)
	recent := min(int(p.cfg.Recent/telemetry.Step), n)
	dm := poolDemand{busy: make([]float64, n)}
	for k := range nodes {
		if lp.down[k] && nodes[k].State == lend.Serving {
			dm.downGPUs += lp.gpus[k] // a failed lent node stays lent: idle to the service
			continue
		}
		dm.upGPUs += lp.gpus[k]
		served := make([]bool, n)
		lent := false
		for m := range served {
			served[m] = loans[k].served(start.Add(time.Duration(m) * telemetry.Step))
			lent = lent || !served[m]
		}
		nodeBusy := make([]float64, n)
		seen := 0
		for _, u := range lp.uuids[k] {
			g, ok := grids[u]
			if !ok {
				continue
			}
			seen++
			series := g.Idle
			if lent { // its minutes on loan are not the service's
				series = slices.Clone(series)
			}
			for m, v := range series {
				switch {
				case !served[m]:
					series[m] = math.NaN()
				case v != 1:
					nodeBusy[m]++
				}
			}
			dm.reps = append(dm.reps, series)
		}
		for m := range nodeBusy {
			if served[m] {
				nodeBusy[m] += float64(lp.gpus[k] - seen)
			}
			dm.busy[m] += nodeBusy[m]
		}
		for _, v := range nodeBusy[n-recent:] {
			nodes[k].Keep = nodes[k].Keep || v > 0
		}
		if nodes[k].State == lend.Serving {
			dm.serving += lp.gpus[k]
			dm.servingBusy += int(nodeBusy[n-1])
		}
	}
	return dm
}

// Apply carries out the decisions the background reads made: in
// autopilot it records the loans and take-backs (Reclaim stops the jobs);
// in advisor mode it recommends them. A decision made on loans that have
// changed since, or older than two reads' interval (the plan loop was
// held up), is dropped, and of a pool's decisions only the newest stands:
// the next read decides again.
func (p *Lending) Apply(ctx context.Context, now time.Time) {
	p.mu.Lock()
	pending := p.pending
	p.pending = nil
	p.mu.Unlock()
	pending = slices.DeleteFunc(pending, func(d decision) bool { return now.Sub(d.at) > 2*telemetry.ReadEvery })
	newest := map[string]int{} // each pool's newest decision stands
	for i, d := range pending {
		newest[d.pool] = i
	}
	var stand []decision
	for i, d := range pending {
		if newest[d.pool] == i {
			stand = append(stand, d)
		}
	}
	pending = stand
	if p.d.Mode() != service.ModeAutopilot {
		current, decided := map[string]bool{}, false
		for _, d := range pending {
			if d.forecast {
				p.recommendLoans(ctx, now, d, current)
				decided = true
			}
		}
		if decided {
			p.d.Advice.Dismiss(ctx, current, advice.Lend, advice.Reclaim)
		}
		return
	}
	for _, d := range pending {
		p.mu.Lock()
		stale := p.gen[d.pool] != d.gen
		p.mu.Unlock()
		if stale {
			continue
		}
		attrs := []any{"busy_gpus", d.busy, "serving_gpus", d.serving, "idle_kept", d.keep, "idle_for_loan", d.loan, "forecast", d.forecast}
		for _, k := range d.takeBack {
			p.setLoan(ctx, d.nodes[k], d.pool, lend.Lent, lend.Returning, now, "node taken back for inference", attrs...)
		}
		for _, k := range d.lend {
			p.setLoan(ctx, d.nodes[k], d.pool, lend.Serving, lend.Lent, now, "node lent to training", attrs...)
		}
	}
}

// recommendLoans records the advisor's lend and reclaim recommendations
// of one pool's decision, and marks them current.
func (p *Lending) recommendLoans(ctx context.Context, now time.Time, d decision, current map[string]bool) {
	detail := func(node string) advice.Details {
		return advice.Details{Node: node, Pool: d.pool, IdleAhead: d.ahead, BusyGPUs: &d.busy, IdleForLoan: &d.loan}
	}
	for _, k := range d.takeBack {
		p.d.Advice.Add(ctx, now, current, advice.Reclaim, "", fmt.Sprintf("inference pool %s: %g of its serving %g GPUs busy, %g forecast to stay idle until the next decision: take node %s back from training",
			d.pool, d.busy, d.serving, d.keep, d.nodes[k]), detail(d.nodes[k]))
	}
	for _, k := range d.lend {
		p.d.Advice.Add(ctx, now, current, advice.Lend, "", fmt.Sprintf("inference pool %s: %g of its serving %g GPUs busy, %g forecast to stay idle for %s: lend node %s to training",
			d.pool, d.busy, d.serving, d.loan, p.cfg.MinLoan, d.nodes[k]), detail(d.nodes[k]))
	}
}
