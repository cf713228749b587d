package sim

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/executor/park"
)

// PowerModel is a GPU's draw: IdleW when nothing runs on it, BusyW when it
// is wholly allocated (a share draws in proportion).
type PowerModel struct {
	IdleW, BusyW float64
}

// IdleFraction is the idle draw as a fraction of the board power limit in
// DefaultPower: datacenter GPUs idle at roughly 10-20% of their limit
// (V100: ~40 of 300 W; A100: ~55 of 400 W).
const IdleFraction = 0.15

// fallbackLimitW is the power limit assumed for GPUs the catalog lacks.
const fallbackLimitW = 300

// LoadFraction is the average draw of a GPU training at its default power
// limit, as a fraction of that limit: the median over the Zeus (NSDI'23)
// workloads, batch sizes and optimizers at each GPU's largest limit
// (../shared/datasets/zeus/summary_power_*.csv; TestLoadFractionsMatchZeus
// recomputes them). Models Zeus did not measure use V100's figure
// (StandInModel), the closest data-centre part it has.
var LoadFraction = map[string]float64{
	"V100":    0.708,
	"P100":    0.481,
	"A40":     0.675,
	"RTX6000": 0.737,
}

// StandInModel is the model whose Zeus figures stand in for models Zeus
// did not measure (A100, H100, T4, K80, ...).
const StandInModel = "V100"

// loadFraction is LoadFraction for a model, matched by family ("V100M32"
// is a V100, "P100-12GB" a P100), else StandInModel's.
func loadFraction(model string) float64 {
	if f, ok := executor.ByFamily(LoadFraction, model); ok {
		return f
	}
	return LoadFraction[StandInModel]
}

// DefaultPower is the GPU power model: a busy GPU draws LoadFraction of its
// board power limit (Zeus), an idle one IdleFraction of it; failed nodes
// draw nothing.
func DefaultPower(g cluster.GPU) PowerModel {
	limit := g.PowerLimitW
	if limit <= 0 {
		limit = fallbackLimitW
	}
	return PowerModel{IdleW: IdleFraction * limit, BusyW: loadFraction(g.Model) * limit}
}

// NodePower is a host's draw beside its GPUs: BaseW while it is up (CPUs,
// memory, fans, network, GPU baseboard), ParkedW while parked (powered
// down, the BMC still on). Waking a parked node costs BaseW for WakeTime
// (booting) in energy.
type NodePower struct {
	BaseW, ParkedW float64
}

// The defaults of DefaultNodePower and of waking: estimates for a
// two-socket GPU server, not measurements (no public trace in
// ../shared/datasets records host power).
const (
	nodeBaseW       = 200 // W, a two-socket host at idle
	nodeBasePerGPUW = 50  // W per GPU slot: PCIe switches, NVSwitch, fans
	nodeParkedW     = 10  // W, BMC of a powered-down host
	// DefaultWakeTime is how long a parked node boots, drawing its base
	// power.
	DefaultWakeTime = 5 * time.Minute
)

// DefaultNodePower is 200 W + 50 W per GPU (600 W for an 8-GPU server) up,
// 10 W parked.
func DefaultNodePower(n cluster.Node) NodePower {
	return NodePower{BaseW: nodeBaseW + nodeBasePerGPUW*float64(len(n.GPUs)), ParkedW: nodeParkedW}
}

// parking accounts nodes that run nothing: after Config.ParkIdleAfter of
// idleness a node is parked and draws ParkedW instead of its base and idle
// GPU power, until a job wakes it (a boot of WakeTime at base power, which
// delays the jobs placed on it).
// An empty node's draw is taken out of the running idle draw and its
// energy added when the idle spell ends (a job, a failure, the end of the
// replay). A job placed on a parked node holds its GPUs at once but starts
// working WakeTime later, while the node boots (its GPUs count as busy
// meanwhile).
type parking struct {
	active  bool
	after   float64   // seconds
	afterOf []float64 // node i's current idle spell parks after this many seconds
	jobs    []int     // allocations on each node
	emptyAt []time.Time
	// bootUntil is when node i, woken, has booted: jobs placed on it
	// before then start working then.
	bootUntil []time.Time
	open      []bool // node i is in an idle spell (empty and up)
	// since is when node i's idle delay counts from: the start of its
	// spell, the end of its boot, the last plan that held it.
	since []time.Time
	// held is node i kept up for the jobs that wait (hold).
	held    []bool
	parkedS float64
	wakes   int
	// pending counts the steps due for review (evParkDue) not come yet;
	// reviewAt is the latest review due to look again at nodes left up.
	pending  int
	reviewAt time.Time
}

func (p *parking) init(s *Simulator, a *accounting) {
	if s.cfg.ParkIdleAfter <= 0 && len(s.cfg.ParkedAtStart) == 0 {
		return
	}
	p.active, p.after = true, s.cfg.ParkIdleAfter.Seconds()
	if s.cfg.ParkIdleAfter <= 0 {
		p.after = math.Inf(1) // the nodes parked at the start stay so until woken; no other parks
	}
	p.jobs = make([]int, len(s.snap.Nodes))
	p.afterOf = make([]float64, len(s.snap.Nodes))
	p.emptyAt = make([]time.Time, len(s.snap.Nodes))
	p.bootUntil = make([]time.Time, len(s.snap.Nodes))
	p.open = make([]bool, len(s.snap.Nodes))
	p.since = make([]time.Time, len(s.snap.Nodes))
	p.held = make([]bool, len(s.snap.Nodes))
	for i := range s.snap.Nodes {
		p.startSpell(s, a, i)
		if slices.Contains(s.cfg.ParkedAtStart, s.snap.Nodes[i].Name) {
			p.afterOf[i], p.emptyAt[i] = 0, s.now.Add(-time.Nanosecond) // parked already
		}
	}
}

// parked reports whether node i is parked now.
func (p *parking) parked(s *Simulator, i int) bool {
	return p.active && p.open[i] && s.now.Sub(p.emptyAt[i]).Seconds() > p.afterOf[i]
}

// bootDelay is how long a job placed on nodes now waits for them to boot:
// WakeTime when one of them is parked, what is left of a boot when one is
// booting.
func (p *parking) bootDelay(s *Simulator, allocs []cluster.Allocation) time.Duration {
	if !p.active {
		return 0
	}
	var d time.Duration
	for _, al := range allocs {
		i, ok := s.free.NodeIndex(al.GPU.Node)
		switch {
		case !ok:
		case p.parked(s, i):
			d = max(d, s.cfg.WakeTime)
		case p.bootUntil[i].After(s.now):
			d = max(d, p.bootUntil[i].Sub(s.now))
		}
	}
	return d
}

// draw is node i's draw while up and running nothing.
func (p *parking) draw(s *Simulator, i int) float64 {
	n := s.snap.Nodes[i]
	w := s.cfg.NodePower(n).BaseW
	for _, g := range n.GPUs {
		w += s.cfg.Power(g).IdleW
	}
	return w
}

func (p *parking) startSpell(s *Simulator, a *accounting, i int) {
	a.idleW -= p.draw(s, i)
	p.beginSpell(s, i)
}

// beginSpell opens node i's idle spell now.
func (p *parking) beginSpell(s *Simulator, i int) {
	p.emptyAt[i], p.open[i], p.held[i] = s.now, true, false
	p.countFrom(s, i, s.now)
}

// countFrom starts node i's idle delay at t: it parks ParkIdleAfter
// later, or, with forecast parking, at the step review finds it may (a
// step is due when ParkIdleAfter has passed). A lent inference node never
// parks: lending decides it, as in the control plane.
func (p *parking) countFrom(s *Simulator, i int, t time.Time) {
	p.since[i] = t
	switch {
	case s.inferenceNode(i):
		p.afterOf[i] = math.Inf(1)
	case p.forecast(s):
		p.afterOf[i] = math.Inf(1)
		p.due(s, t.Add(s.cfg.ParkIdleAfter))
	default:
		p.afterOf[i] = t.Sub(p.emptyAt[i]).Seconds() + p.after
	}
}

// hold, with Config.WakeLast, keeps up the empty nodes the waiting jobs
// were planned on (park.Needed), as the control plane does: their idle
// delay starts again at every plan that plans on them. A node it held
// that no plan needs now counts its delay from now (or from the end of
// its boot).
func (p *parking) hold(s *Simulator, planned map[string]bool) {
	for i, n := range s.snap.Nodes {
		switch {
		case !p.open[i] || p.parked(s, i):
		case planned[n.Name]:
			p.held[i], p.afterOf[i] = true, math.Inf(1)
		case p.held[i]:
			p.held[i] = false
			p.countFrom(s, i, latest(s.now, p.bootUntil[i]))
		}
	}
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// due makes a step happen at t, after which review runs.
func (p *parking) due(s *Simulator, t time.Time) {
	p.pending++
	s.ev.push(event{at: t, kind: evParkDue})
}

// dueDone notes that a step due for review came.
func (p *parking) dueDone() { p.pending-- }

// forecast reports whether the forecasts decide when nodes park.
func (p *parking) forecast(s *Simulator) bool {
	return p.active && s.cfg.ParkForecast && !math.IsInf(p.after, 1)
}

// review, with Config.ParkForecast, gathers the state park.Policy.Decide
// reads (the empty nodes up, not booting; the parked ones; the outlook
// of the nodes up, booting ones too, and of the running jobs) and carries
// out its decision: a woken node starts a boot of WakeTime, a parked one
// parks from now on. It runs after every step of the replay, and while a
// node it leaves up may still park (jobs run or are yet to arrive) it
// makes a step happen within ParkReview, as the plane's cycles come.
func (p *parking) review(s *Simulator) {
	if !p.forecast(s) {
		return
	}
	var in park.Input
	for i := range s.snap.Nodes {
		n := &s.snap.Nodes[i]
		switch {
		case !p.open[i] || s.down[i] || s.inferenceNode(i) || p.held[i]:
		case p.parked(s, i):
			in.Asleep = append(in.Asleep, park.Asleep{Node: n.Name, GPUs: len(n.GPUs), Since: p.parkedAt(i)})
		case !p.bootUntil[i].After(s.now):
			in.Empty = append(in.Empty, park.Empty{Node: n.Name, GPUs: s.free.WholeFree(i), Since: p.since[i]})
		}
	}
	if len(in.Empty) == 0 && len(in.Asleep) == 0 {
		return
	}
	pol := park.Policy{IdleAfter: s.cfg.ParkIdleAfter, Forecast: true, Lookahead: cmp.Or(s.cfg.ParkLookahead, park.DefaultLookahead)}
	in.Now, in.NodeGPUs = s.now, s.free.MaxNodeGPUs()
	queue := s.queue
	if s.sorted != nil {
		queue = s.sorted.Jobs()
	}
	in.Outlook = park.Outlook{Look: pol.Lookahead, Queued: park.QueuedDemand(queue, s.running, s.snap.Nodes, s.snap.Tenants), Rate: s.arrivalRate()}
	for k := range s.snap.Nodes {
		if !s.down[k] && !p.parked(s, k) {
			in.Outlook.Free(s.free.WholeFree(k))
		}
	}
	for k, r := range s.running {
		j := s.runJobs[k]
		ran := j.seg.saved
		if s.now.After(j.seg.start) {
			ran += s.now.Sub(j.seg.start)
		}
		in.Outlook.Running(float64(j.job.Spec.MilliGPUs())/cluster.MilliGPU, ran, r.Forecast.DurationP50, r.Forecast.DurationP90)
	}
	parks := 0
	for _, a := range pol.Decide(in) {
		i, _ := s.free.NodeIndex(a.Node)
		if a.Kind == park.Wake {
			p.wake(s, i)
			continue
		}
		p.afterOf[i] = s.now.Sub(p.emptyAt[i]).Seconds() // parked from now on
		parks++
	}
	up := parks < len(in.Empty)
	more := len(s.running) > 0 || s.acct.ended()+s.queueLen() < len(s.jobs)
	if up && more && !p.reviewAt.After(s.now) {
		p.reviewAt = s.now.Add(ParkReview)
		p.due(s, p.reviewAt)
	}
}

// parkedAt is when node i, parked, parked.
func (p *parking) parkedAt(i int) time.Time {
	return p.emptyAt[i].Add(time.Duration(p.afterOf[i] * float64(time.Second)))
}

// wake wakes parked node i now: it boots for WakeTime, drawing its base
// power, and the replay plans again once it is up.
func (p *parking) wake(s *Simulator, i int) {
	p.endSpell(s, &s.acct, i, true)
	p.emptyAt[i], p.open[i], p.held[i] = s.now, true, false
	p.countFrom(s, i, p.bootUntil[i]) // the plane counts a node empty once it is up
	s.ev.push(event{at: p.bootUntil[i], kind: evWake})
}

// ParkReview is how soon, with forecast parking, the replay looks again
// at the empty nodes it left up.
const ParkReview = time.Minute

// endSpell adds the energy of node i's idle spell up to now: its draw
// until it parked, ParkedW after. A job that wakes it starts a boot of
// WakeTime, whose base power the node's being up from now accounts.
func (p *parking) endSpell(s *Simulator, a *accounting, i int, wake bool) {
	d := s.now.Sub(p.emptyAt[i]).Seconds()
	idle, parked := min(d, p.afterOf[i]), max(d-p.afterOf[i], 0)
	np := s.cfg.NodePower(s.snap.Nodes[i])
	a.energyJ += p.draw(s, i)*idle + np.ParkedW*parked
	parkAt := p.emptyAt[i].Add(time.Duration(idle * float64(time.Second)))
	a.co2g += s.gramsOf(p.draw(s, i), p.emptyAt[i], parkAt) + s.gramsOf(np.ParkedW, parkAt, s.now)
	if parked > 0 {
		p.parkedS += parked
		if wake {
			p.wakes++
			p.bootUntil[i] = s.now.Add(s.cfg.WakeTime)
		}
	}
	p.open[i] = false
}

// jobOn counts an allocation of a job on node i (delta ±1).
func (p *parking) jobOn(s *Simulator, a *accounting, node string, delta int) {
	if !p.active {
		return
	}
	i, ok := s.free.NodeIndex(node)
	if !ok {
		return
	}
	was := p.jobs[i]
	p.jobs[i] += delta
	switch {
	case was == 0 && p.jobs[i] > 0 && p.open[i]:
		p.endSpell(s, a, i, true)
		a.idleW += p.draw(s, i)
	case was > 0 && p.jobs[i] == 0 && !s.down[i]:
		p.startSpell(s, a, i)
	}
}

// nodeState handles a node failing (up=false) or coming back; it reports
// whether it did (parking on), so that the plain idle draw is left alone.
func (p *parking) nodeState(s *Simulator, a *accounting, i int, up bool) bool {
	if !p.active {
		return false
	}
	if !up {
		if p.open[i] {
			p.endSpell(s, a, i, false)
		} else {
			a.idleW -= p.draw(s, i) // not expected: a failed node's jobs are stopped first
		}
		return true
	}
	if p.jobs[i] == 0 {
		p.beginSpell(s, i)
	} else {
		a.idleW += p.draw(s, i)
	}
	return true
}

// finish closes the idle spells still open at the end of the replay.
func (p *parking) finish(s *Simulator, a *accounting) {
	if !p.active {
		return
	}
	for i := range p.open {
		if p.open[i] {
			p.endSpell(s, a, i, false)
			p.emptyAt[i], p.open[i] = s.now, true
		}
	}
}
