package control

import (
	"cmp"
	"context"
	"errors"
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
	"github.com/prescient-sched/prescient/store"
)

// Lending lends the idle nodes of inference pools to training and takes
// them back before the inference demand returns (lend.Policy).
//
// An inference pool is the nodes whose cluster.PoolLabel is one of Pools. They
// serve inference and take no training unless lent. Each minute the
// plane reads the utilization of the pool's serving GPUs (the demand: a
// GPU at or above the idle threshold, or not seen, is busy); every Every
// it forecasts the pool's idle GPUs with the published idle model
// (lend.Model at Level, capped by what was idle throughout Recent) or,
// without one, with the reactive rule lend.Recent, and lend.Policy.Decide
// lends and takes back whole nodes. When every serving GPU is busy a lent
// node is taken back at once.
//
// In autopilot a lent node takes training Handover after the loan (the
// inference service moves its replicas off: it hears the node_lent,
// node_returning and node_serving webhooks, or reads the loans in GET
// /v1/fleet, each node's "loan"); a node taken back takes no new jobs,
// its jobs are told to checkpoint and stop within Notice (a job that
// cannot checkpoint stops at once), and it serves inference again once
// they are gone. Loans are kept in the store. In advisor mode the
// decisions are recommendations ("lend", "reclaim") and nothing is lent.
type Lending struct {
	Pools                  []string
	Every, MinLoan, Notice time.Duration
	// Level is the quantile of the idle model's forecast lent on (default
	// lend.DefaultLevel); Recent caps the model by what was idle throughout
	// the last Recent, and is the rule without a model. Zero Recent is the
	// model alone, as in simulate: without a published idle model nothing
	// is lent then.
	Level  float64
	Recent time.Duration
	// Handover is how long a lent node waits before training is placed
	// on it (default DefaultLendHandover).
	Handover time.Duration
	// Headroom is the GPUs kept idle for the service beyond the forecast
	// (lend.Policy.Headroom; default and at least 1): a loan leaves the
	// service an idle GPU, so that its every GPU being busy says the
	// demand grew.
	Headroom int
}

// The defaults of Lending.
const (
	DefaultLendHandover = time.Minute
	DefaultLendHeadroom = 1
)

// Check that the utilization the plane keeps covers the longest Recent.
const _ = uint(telemetry.History - telemetry.Step - lend.MaxRecent)

// withDefaults is l with its zero values at their defaults (New sets
// them); a zero Recent stays the model alone.
func (l Lending) withDefaults() Lending {
	pol := l.policy()
	l.Every, l.MinLoan, l.Notice = pol.Every, pol.MinLoan, pol.Notice
	l.Level = cmp.Or(l.Level, lend.DefaultLevel)
	l.Handover = cmp.Or(l.Handover, DefaultLendHandover)
	l.Headroom = cmp.Or(l.Headroom, DefaultLendHeadroom)
	return l
}

func (l Lending) policy() lend.Policy {
	return lend.Policy{Every: l.Every, MinLoan: l.MinLoan, Notice: l.Notice, Headroom: l.Headroom}.WithDefaults()
}

// Validate checks l as it is, without defaults: lend.Settings.Validate,
// the pools, and what the live plane needs beside (a handover, a GPU of
// headroom). Each error names its field after prefix, a flag's
// ("--lend-") or a config's.
func (l Lending) Validate(prefix string) error {
	var errs []error
	if len(l.Pools) == 0 {
		errs = append(errs, fmt.Errorf("%spools: no inference pools", prefix))
	}
	if slices.Contains(l.Pools, "") {
		errs = append(errs, fmt.Errorf("%spools: an empty pool name", prefix))
	}
	pol := lend.Policy{Every: l.Every, MinLoan: l.MinLoan, Notice: l.Notice, Headroom: l.Headroom}
	errs = append(errs, lend.Settings{Policy: pol, Level: l.Level, Recent: l.Recent}.Validate(prefix))
	if l.Handover <= 0 {
		errs = append(errs, fmt.Errorf("%shandover %s: want a positive duration", prefix, l.Handover))
	}
	if l.Headroom < 1 {
		errs = append(errs, fmt.Errorf("%sheadroom %d: at least 1 (a loan leaves the service an idle GPU, so that every GPU busy says the demand grew)", prefix, l.Headroom))
	}
	return errors.Join(errs...)
}

// nodeLoan is an inference node that was lent: lent now, being taken
// back, or serving again.
type nodeLoan struct {
	pool  string
	state lend.State
	since time.Time // when it entered the state
	// spans are its loans of the last telemetry.History, oldest first, each
	// until idle.MaxGap after its take-back (a sample stands for that
	// long); the last is open while it is lent or returning.
	spans []store.LoanSpan
}

// served reports whether a node with loan l (nil: never lent) served
// inference at t: its utilization on loan is training's.
func (l *nodeLoan) served(t time.Time) bool {
	if l == nil {
		return true
	}
	for _, sp := range l.spans {
		if !t.Before(sp.From) && (sp.Until.IsZero() || t.Before(sp.Until)) {
			return false
		}
	}
	return true
}

// moved is l (nil: never lent) moved to state to at now: a loan opens a
// span, a return to serving closes it idle.MaxGap later; spans that ended
// before the history kept are dropped.
func (l *nodeLoan) moved(pool string, to lend.State, now time.Time) *nodeLoan {
	out := &nodeLoan{pool: pool, state: to, since: now}
	if l != nil {
		for _, sp := range l.spans {
			if sp.Until.IsZero() || sp.Until.After(now.Add(-telemetry.History)) {
				out.spans = append(out.spans, sp)
			}
		}
	}
	switch k := len(out.spans) - 1; {
	case to == lend.Lent && (k < 0 || !out.spans[k].Until.IsZero()):
		out.spans = append(out.spans, store.LoanSpan{From: now})
	case to == lend.Serving && k >= 0 && out.spans[k].Until.IsZero():
		out.spans[k].Until = now.Add(idle.MaxGap)
	}
	return out
}

// inferencePool is the inference pool node n belongs to, if any.
func (p *Plane) inferencePool(n *cluster.Node) (string, bool) {
	if p.cfg.Lending == nil {
		return "", false
	}
	pool := n.Labels[cluster.PoolLabel]
	return pool, pool != "" && slices.Contains(p.cfg.Lending.Pools, pool)
}

// forTraining reports whether training may be placed on node n at now
// (its state aside): any node but an inference node not lent at least
// Handover ago.
func (p *Plane) forTraining(n *cluster.Node, now time.Time) bool {
	if _, ok := p.inferencePool(n); !ok {
		return true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.loans[n.Name]
	return l != nil && l.state == lend.Lent && !now.Before(l.since.Add(p.cfg.Lending.Handover))
}

// restoreLoans reads the loans from the store; those of nodes no longer
// in an inference pool (the configuration changed) are forgotten.
func (p *Plane) restoreLoans(ctx context.Context) error {
	loans, err := p.cfg.Store.Loans(ctx)
	if err != nil {
		return err
	}
	pools := map[string]string{}
	for _, n := range p.cfg.Nodes.Nodes() {
		if pool, ok := p.inferencePool(&n); ok {
			pools[n.Name] = pool
		}
	}
	restored := map[string]*nodeLoan{}
	for _, l := range loans {
		pool, ok := pools[l.Node]
		if p.cfg.Lending == nil || (!ok && !slices.Contains(p.cfg.Lending.Pools, l.Pool)) {
			p.log.Info("lending: a loan is forgotten: its node is no longer in an inference pool", "node", l.Node, "pool", l.Pool, "state", l.State)
			if err := p.cfg.Store.DeleteLoan(ctx, l.Node); err != nil {
				return err
			}
			continue
		}
		st := lend.Serving
		switch l.State {
		case lend.Lent.String():
			st = lend.Lent
		case lend.Returning.String():
			st = lend.Returning
		}
		restored[l.Node] = &nodeLoan{pool: cmp.Or(pool, l.Pool), state: st, since: l.Since, spans: l.Spans}
	}
	p.mu.Lock()
	p.loans = restored
	p.mu.Unlock()
	return nil
}

// reclaim, in autopilot, tells the jobs on nodes being taken back to
// checkpoint and stop by Notice after the take-back, and gives each node
// whose jobs are gone back to inference.
func (p *Plane) reclaim(ctx context.Context, lv *live.State) {
	if p.cfg.Lending == nil || p.Mode() != service.ModeAutopilot {
		return
	}
	notice := p.cfg.Lending.Notice
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
	stopBy := map[cluster.JobID]time.Time{} // a job on several nodes taken back stops by the earliest notice
	why := map[cluster.JobID]string{}
	for node, l := range returning {
		if len(on[node]) == 0 {
			p.setLoan(ctx, node, l.pool, lend.Returning, lend.Serving, lv.Now, "node back to inference")
			continue
		}
		for id := range on[node] {
			if by, ok := stopBy[id]; !ok || l.since.Add(notice).Before(by) {
				stopBy[id], why[id] = l.since.Add(notice), fmt.Sprintf("node %s goes back to inference pool %s", node, l.pool)
			}
		}
	}
	for id, by := range stopBy {
		if pl := lv.Placements[id]; pl.Stopping() {
			continue
		}
		if err := p.preempt(ctx, lv, executor.Preemption{Job: id, CheckpointFirst: true, StopBy: by, Reason: why[id]}); err != nil {
			p.log.Error("lending: a job on a node taken back was not stopped", "job", id, "error", err)
		}
	}
}

// setLoan moves a node from state from (if it is still there) to state
// to at now, in the store first, and counts a change of its pool.
func (p *Plane) setLoan(ctx context.Context, node, pool string, from, to lend.State, now time.Time, msg string, attrs ...any) bool {
	p.mu.Lock()
	cur := p.loans[node]
	p.mu.Unlock()
	state := lend.Serving
	if cur != nil {
		state = cur.state
	}
	if state != from {
		return false // it moved since the decision
	}
	next := cur.moved(pool, to, now)
	if err := p.cfg.Store.PutLoan(ctx, store.Loan{Node: node, Pool: pool, State: to.String(), Since: now, Spans: next.spans}); err != nil {
		p.log.Error("lending: not recorded", "node", node, "state", to, "error", err)
		return false
	}
	p.mu.Lock()
	p.loans[node] = next
	p.loanGen[pool]++
	p.mu.Unlock()
	p.log.Info("lending: "+msg, append([]any{"node", node, "pool", pool}, attrs...)...)
	p.changedState()
	p.notifyNode(ctx, "node_"+to.String(), node, pool, now, msg)
	return true
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

// lendingDecision is what a background read decided for the cycle to
// apply, made on the pool's loans as they were at generation gen.
type lendingDecision struct {
	at                        time.Time
	gen                       uint64
	pool                      string
	nodes                     []string
	takeBack, lend            []int
	ahead                     []float64
	busy, serving, keep, loan float64
	forecast                  bool // a forecast's decision, not a take-back of a pool all busy
}

// watchLoans starts, each minute and one at a time, a read of the
// inference pools' utilization beside the plan loop; it decides on loans
// for applyLoans to carry out at the next cycle.
func (p *Plane) watchLoans(ctx context.Context, lv *live.State) {
	if p.cfg.Lending == nil || p.cfg.Telemetry == nil {
		return
	}
	p.mu.Lock()
	due := !p.lendReading && (p.lendReadAt.IsZero() || lv.Now.Sub(p.lendReadAt) >= telemetry.ReadEvery)
	forecast := due && (p.lendForecastAt.IsZero() || lv.Now.Sub(p.lendForecastAt) >= p.cfg.Lending.Every)
	if due {
		p.lendReading, p.lendReadAt = true, lv.Now
	}
	p.mu.Unlock()
	if !due {
		return
	}
	load := map[string]int{}
	for _, pl := range lv.Placements {
		for _, a := range pl.Allocations {
			load[a.GPU.Node] += a.Milli
		}
	}
	var pools []*loanPool
	byName := map[string]*loanPool{}
	var uuids []string
	for _, n := range p.cfg.Nodes.Nodes() {
		name, ok := p.inferencePool(&n)
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
	model, threshold := telemetry.Served(p.cfg.Idle)
	p.beside(&p.lendReading, func() { // the plan loop's context
		grids, read := p.util.Read(ctx, lv.Now, threshold, uuids)
		// Another read under way (watchIdle's, a forecast's) reads for
		// this one too: wait for it, then take the copy.
		wait := time.NewTimer(telemetry.ReadTimeout)
		defer wait.Stop()
		for !read && p.util.ReadUnderWay() {
			select {
			case <-ctx.Done():
				return
			case <-wait.C:
				return
			case <-time.After(50 * time.Millisecond):
			}
			grids, read = p.util.Read(ctx, lv.Now, threshold, uuids)
		}
		if !read {
			return // the store did not answer: no decision this time
		}
		p.gpusByNode(pools, lv.Now, threshold, grids)
		var out []lendingDecision
		for _, lp := range pools {
			if d, ok := p.decideLoans(lv.Now, model, lp, grids, forecast); ok {
				out = append(out, d)
			}
		}
		p.mu.Lock()
		p.lendPending = append(p.lendPending, out...)
		if forecast && len(out) > 0 { // a pool was forecast (none before the nodes register)
			p.lendForecastAt = lv.Now
		}
		p.mu.Unlock()
		if len(out) > 0 {
			p.wake()
		}
	})
}

// gpusByNode gives each pool node whose GPUs carry no UUIDs (a Kubernetes
// node's come from its labels) the GPUs the telemetry has seen on it, by
// the node name its samples carry, with their grids, and counts it as
// holding at least those: the GPUs that the inference servers, pods of
// another scheduler, hold are off the node as the backend lists it, and
// the service's demand is theirs.
func (p *Plane) gpusByNode(pools []*loanPool, now time.Time, threshold float64, grids map[string]idle.Grid) {
	var on map[string][]string
	for _, lp := range pools {
		for k, name := range lp.nodes {
			if len(lp.uuids[k]) > 0 {
				continue
			}
			if on == nil {
				on = p.util.ByNode(now)
			}
			us := on[name]
			lp.uuids[k], lp.gpus[k] = us, max(lp.gpus[k], len(us))
			maps.Copy(grids, p.util.Grids(us, now, threshold))
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
func (p *Plane) decideLoans(now time.Time, model *idle.Model, lp *loanPool, grids map[string]idle.Grid, forecast bool) (lendingDecision, bool) {
	cfg := p.cfg.Lending
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
	gen := p.loanGen[lp.name]
	p.mu.Unlock()

	n := int(telemetry.History / telemetry.Step) // the grids' minutes, the last now
	start := now.Truncate(telemetry.Step).Add(-time.Duration(n-1) * telemetry.Step)
	recent := min(int(cfg.Recent/telemetry.Step), n)
	busy := make([]float64, n) // the demand on the GPUs up
	var reps [][]float64
	upGPUs, downGPUs, serving, servingBusy := 0, 0, 0, 0
	for k := range nodes {
		if lp.down[k] && nodes[k].State == lend.Serving {
			downGPUs += lp.gpus[k] // a failed lent node stays lent: idle to the service
			continue
		}
		upGPUs += lp.gpus[k]
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
			reps = append(reps, series)
		}
		for m := range nodeBusy {
			if served[m] {
				nodeBusy[m] += float64(lp.gpus[k] - seen)
			}
			busy[m] += nodeBusy[m]
		}
		for _, v := range nodeBusy[n-recent:] {
			nodes[k].Keep = nodes[k].Keep || v > 0
		}
		if nodes[k].State == lend.Serving {
			serving += lp.gpus[k]
			servingBusy += int(nodeBusy[n-1])
		}
	}
	d := lendingDecision{at: now, gen: gen, pool: lp.name, nodes: lp.nodes, busy: busy[n-1], serving: float64(serving)}
	if servingBusy >= serving && serving < upGPUs {
		// Every serving GPU is busy: the demand may be beyond them.
		d.takeBack = lend.TakeBack(nodes, 1)
	}
	if !forecast {
		return d, len(d.takeBack) > 0
	}
	hist := make([]float64, n)
	for m := range hist {
		hist[m] = float64(upGPUs) - busy[m]
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
	ahead, err := lender.IdleAhead(lend.Query{Now: now, GPUs: upGPUs, History: hist, Replicas: reps, Step: pol.Every, Leads: pol.Leads()})
	if err != nil || len(ahead) < pol.Leads() {
		p.log.Warn("lending: no forecast; nothing lent this time", "pool", lp.name, "error", err)
		return d, len(d.takeBack) > 0
	}
	for _, k := range d.takeBack {
		nodes[k].State = lend.Returning
	}
	// A failed node's GPUs are busy to Decide: they serve nothing.
	dec := pol.Decide(ahead, nodes, busy[n-1]+float64(downGPUs))
	d.takeBack = append(d.takeBack, dec.TakeBack...)
	d.lend, d.ahead, d.keep, d.loan, d.forecast = dec.Lend, ahead, dec.Keep, dec.Loanable, true
	return d, true
}

// applyLoans carries out the decisions the background reads made: in
// autopilot it records the loans and take-backs (reclaim stops the jobs);
// in advisor mode it recommends them. A decision made on loans that have
// changed since, or older than two reads' interval (the plan loop was
// held up), is dropped, and of a pool's decisions only the newest stands:
// the next read decides again.
func (p *Plane) applyLoans(ctx context.Context, now time.Time) {
	p.mu.Lock()
	pending := p.lendPending
	p.lendPending = nil
	p.mu.Unlock()
	pending = slices.DeleteFunc(pending, func(d lendingDecision) bool { return now.Sub(d.at) > 2*telemetry.ReadEvery })
	newest := map[string]int{} // each pool's newest decision stands
	for i, d := range pending {
		newest[d.pool] = i
	}
	var stand []lendingDecision
	for i, d := range pending {
		if newest[d.pool] == i {
			stand = append(stand, d)
		}
	}
	pending = stand
	if p.Mode() != service.ModeAutopilot {
		current, decided := map[string]bool{}, false
		for _, d := range pending {
			if d.forecast {
				p.recommendLoans(ctx, now, d, current)
				decided = true
			}
		}
		if decided {
			p.advice.Dismiss(ctx, current, advice.Lend, advice.Reclaim)
		}
		return
	}
	for _, d := range pending {
		p.mu.Lock()
		stale := p.loanGen[d.pool] != d.gen
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
func (p *Plane) recommendLoans(ctx context.Context, now time.Time, d lendingDecision, current map[string]bool) {
	detail := func(node string) advice.Details {
		return advice.Details{Node: node, Pool: d.pool, IdleAhead: d.ahead, BusyGPUs: &d.busy, IdleForLoan: &d.loan}
	}
	for _, k := range d.takeBack {
		p.advice.Add(ctx, now, current, advice.Reclaim, "", fmt.Sprintf("inference pool %s: %g of its serving %g GPUs busy, %g forecast to stay idle until the next decision: take node %s back from training",
			d.pool, d.busy, d.serving, d.keep, d.nodes[k]), detail(d.nodes[k]))
	}
	for _, k := range d.lend {
		p.advice.Add(ctx, now, current, advice.Lend, "", fmt.Sprintf("inference pool %s: %g of its serving %g GPUs busy, %g forecast to stay idle for %s: lend node %s to training",
			d.pool, d.busy, d.serving, d.loan, p.cfg.Lending.MinLoan, d.nodes[k]), detail(d.nodes[k]))
	}
}

// loanOf is node n's loan state; nil when it is not an inference node.
func (p *Plane) loanOf(n *cluster.Node) *service.NodeLoan {
	pool, ok := p.inferencePool(n)
	if !ok {
		return nil
	}
	out := &service.NodeLoan{Pool: pool, State: lend.Serving.String()}
	p.mu.Lock()
	defer p.mu.Unlock()
	if l := p.loans[n.Name]; l != nil {
		out.State, out.Since = l.state.String(), l.since
		if l.state == lend.Lent {
			out.Usable = l.since.Add(p.cfg.Lending.Handover)
		}
	}
	return out
}

// notifyNode tells the webhooks of a node's change: a loan's (with its
// pool) or parking's.
func (p *Plane) notifyNode(ctx context.Context, typ, node, pool string, now time.Time, msg string) {
	if p.cfg.Notifier != nil {
		p.cfg.Notifier.Notify(ctx, service.LifecycleEvent{Type: typ, Time: now, Node: node, Pool: pool, Message: msg})
	}
}
