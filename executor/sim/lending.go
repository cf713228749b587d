package sim

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/executor/lend"
)

// Lending lends an inference pool's idle GPUs to training and takes them
// back before the inference demand returns (Config.Lending).
//
// The pool's nodes serve inference and run no training unless lent. The
// inference service needs, at each minute, as many GPUs as its replicas
// are busy then, on any of the nodes it holds (it consolidates onto
// them). Every Every the Lender forecasts the pool's idle GPUs ahead, in
// steps of Every: the replay lends whole nodes while the forecast keeps
// them spare for MinLoan, and takes nodes back when it says the demand
// returns within Every + Notice, rounded up to whole steps (10 minutes by
// default). Taking a node back tells its jobs to checkpoint and stop
// within Notice (a job that cannot checkpoint stops at once, losing the
// work since its last checkpoint); a node is the service's again once its
// jobs are gone (one taken back empty serves at once, but is not lent again
// in the same decision). Whenever the demand exceeds the GPUs the service
// holds, lent nodes are taken back at once and the missing GPU-time is
// counted as short.
type Lending struct {
	// Nodes are the fleet's inference nodes, by name; the last is lent
	// first (the service consolidates onto the first ones).
	Nodes []string
	// Replicas are the inference replicas' idleness per minute from the
	// replay's start: 1 idle, 0 busy, NaN not running (idle too). They are
	// repeated when the replay outlasts them.
	Replicas [][]float64
	// ReplicasStart is the time of the replicas' first minute on their own
	// clock (lend.Query.SeriesNow); zero: the replay's start.
	ReplicasStart time.Time
	// Lender forecasts the pool's idle GPUs.
	Lender lend.Lender
	// Every is how often loans are decided (default 5m); MinLoan the
	// shortest loan worth making (default 30m); Notice how long a taken
	// back node's jobs have to checkpoint (default 2m); Lookback how much
	// history the Lender is given (default 6h; less early in the replay).
	Every, MinLoan, Notice, Lookback time.Duration
}

// lending is the replay's side of Config.Lending.
type lending struct {
	cfg      Lending
	start    time.Time
	nodes    []int // fleet indices of cfg.Nodes
	gpus     []int
	state    []lend.State
	poolGPUs int
	busy     []float64 // busy replicas per minute of the replicas' period
	minute   int       // the current tick
	// quietSince is the last tick at which a job ran or arrived; ticking
	// is false once ticks have stopped (wake starts them again).
	quietSince int
	ticking    bool

	lentS, busyS, shortS        float64
	loans, reclaims, reclaimJob int
}

func (c *Lending) validate(f *cluster.Fleet, running []Placed) error {
	var errs []error
	if len(c.Nodes) == 0 {
		errs = append(errs, errors.New("sim: lending: no inference nodes"))
	}
	if len(c.Replicas) == 0 || len(c.Replicas[0]) == 0 {
		errs = append(errs, errors.New("sim: lending: no inference replicas"))
	}
	for i, r := range c.Replicas {
		if len(r) != len(c.Replicas[0]) {
			errs = append(errs, fmt.Errorf("sim: lending: replica %d has %d minutes, replica 0 %d", i, len(r), len(c.Replicas[0])))
			break
		}
	}
	if c.Lender == nil {
		errs = append(errs, errors.New("sim: lending: no lender"))
	}
	if c.Every < 0 || c.MinLoan < 0 || c.Notice < 0 {
		errs = append(errs, errors.New("sim: lending: negative duration"))
	} else if err := c.policy().Validate("sim: lending: "); err != nil {
		errs = append(errs, err)
	}
	if c.Lookback < 0 || c.Lookback != 0 && c.Lookback < time.Minute {
		errs = append(errs, fmt.Errorf("sim: lending: lookback %s is under a minute", c.Lookback))
	}
	inFleet := map[string]int{}
	for _, n := range f.Nodes {
		inFleet[n.Name]++
	}
	seen := map[string]bool{}
	for _, n := range c.Nodes {
		if inFleet[n] != 1 || seen[n] {
			errs = append(errs, fmt.Errorf("sim: lending: inference node %q is not in the fleet once, or is named twice", n))
		}
		seen[n] = true
	}
	for _, r := range running {
		for _, a := range r.Allocations {
			if seen[a.GPU.Node] {
				errs = append(errs, fmt.Errorf("sim: lending: running job %s holds a GPU of inference node %s", r.Job.ID, a.GPU.Node))
				break
			}
		}
	}
	return errors.Join(errs...)
}

// policy is the lending policy, its zero durations at their defaults.
func (c *Lending) policy() lend.Policy {
	return lend.Policy{Every: c.Every, MinLoan: c.MinLoan, Notice: c.Notice}.WithDefaults()
}

// initLending hands the inference nodes to the service and schedules the
// first tick.
func (s *Simulator) initLending() {
	c := *s.cfg.Lending
	pol := c.policy()
	c.Every, c.MinLoan, c.Notice = pol.Every, pol.MinLoan, pol.Notice
	c.Lookback = cmp.Or(c.Lookback, lend.DefaultLookback)
	l := &lending{cfg: c, start: s.now}
	if l.cfg.ReplicasStart.IsZero() {
		l.cfg.ReplicasStart = s.now
	}
	for _, name := range c.Nodes {
		i, _ := s.free.NodeIndex(name)
		l.nodes = append(l.nodes, i)
		l.gpus = append(l.gpus, len(s.snap.Nodes[i].GPUs))
		l.state = append(l.state, lend.Serving)
		l.poolGPUs += len(s.snap.Nodes[i].GPUs)
		s.setNodeUp(i, false, cluster.NodeDrained)
	}
	period := len(c.Replicas[0])
	l.busy = make([]float64, period)
	for _, r := range c.Replicas {
		for m, v := range r {
			if v == 0 {
				l.busy[m]++
			}
		}
	}
	l.ticking = true
	s.lend = l
	s.ev.push(event{at: s.now, kind: evLend})
}

// busyAt is the busy replicas at minute m of the replay.
func (l *lending) busyAt(m int) float64 { return l.busy[m%len(l.busy)] }

// idleAt is the pool's idle GPUs at minute m (at least 0).
func (l *lending) idleAt(m int) float64 { return math.Max(float64(l.poolGPUs)-l.busyAt(m), 0) }

// tick is one minute of the pool: nodes whose jobs are gone go back to
// the service, a demand beyond the service's GPUs takes lent nodes back,
// every Every the Lender's forecast lends and takes back, and the minute
// is accounted.
func (s *Simulator) tick() error {
	l := s.lend
	m := l.minute
	for k, i := range l.nodes {
		if l.state[k] == lend.Returning && s.nodeEmpty(i) {
			l.state[k] = lend.Serving
		}
	}
	busy := l.busyAt(m)
	if short := lend.Urgent(busy, float64(l.held(lend.Serving)+l.held(lend.Returning)), false); short > 0 {
		if err := s.takeBack(short); err != nil {
			return err
		}
	}
	if m%int(l.cfg.Every/time.Minute) == 0 {
		if err := s.decideLoans(); err != nil {
			return err
		}
	}
	l.busyS += busy * 60
	l.shortS += math.Max(busy-float64(l.held(lend.Serving)), 0) * 60
	l.lentS += float64(l.held(lend.Lent)+l.held(lend.Returning)) * 60
	if len(s.running) > 0 {
		l.quietSince = m
	}
	l.minute++
	// Ticks go on with the replay. They stop when every job is done, or
	// when nothing is left to arrive, no other event is pending and no job
	// has run or arrived for a whole period of the replicas and the
	// lender's lookback, loans or not: the queue waits for what will not
	// come, and the replay reports it stalled. A job that arrives or
	// starts later wakes them.
	done := s.acct.ended() >= len(s.jobs)
	arrivals := s.acct.ended()+len(s.running)+s.queueLen() < len(s.jobs)
	quiet := l.minute - l.quietSince
	others := s.ev.len() - s.acct.park.pending // the parking reviews' steps do not keep ticks going
	if !done && (arrivals || others > 0 || quiet <= len(l.busy)+int(l.cfg.Lookback/time.Minute)) {
		s.ev.push(event{at: l.start.Add(time.Duration(l.minute) * time.Minute), kind: evLend})
	} else {
		l.ticking = false
	}
	return nil
}

// inferenceNode reports whether node i is one of the inference pool's.
func (s *Simulator) inferenceNode(i int) bool {
	return s.lend != nil && slices.Contains(s.lend.nodes, i)
}

// wakeLending notes that jobs arrived or started, and restarts stopped
// ticks at the next whole minute not yet ticked.
func (s *Simulator) wakeLending() {
	l := s.lend
	if l == nil {
		return
	}
	next := max(int((s.now.Sub(l.start)+time.Minute-1)/time.Minute), l.minute)
	l.quietSince = next
	if l.ticking {
		return
	}
	l.ticking, l.minute = true, next
	s.ev.push(event{at: l.start.Add(time.Duration(l.minute) * time.Minute), kind: evLend})
}

// held is the GPUs of the inference nodes in state st.
func (l *lending) held(st lend.State) int {
	n := 0
	for k := range l.nodes {
		if l.state[k] == st {
			n += l.gpus[k]
		}
	}
	return n
}

// seriesTime is minute m of the replay on the replicas' own clock.
func (l *lending) seriesTime(m int) time.Time {
	return l.cfg.ReplicasStart.Add(time.Duration(m%len(l.busy)) * time.Minute)
}

// decideLoans asks the Lender and lends or takes back nodes
// (lend.Policy.Decide).
func (s *Simulator) decideLoans() error {
	l := s.lend
	c := &l.cfg
	pol := lend.Policy{Every: c.Every, MinLoan: c.MinLoan, Notice: c.Notice}
	step := c.Every
	leads := pol.Leads()
	m := l.minute
	from := max(m-int(c.Lookback/time.Minute)+1, 0)
	hist := make([]float64, 0, m-from+1)
	for h := from; h <= m; h++ {
		hist = append(hist, l.idleAt(h))
	}
	reps := make([][]float64, len(c.Replicas))
	for r, rep := range c.Replicas {
		reps[r] = periodic(rep, from, m)
	}
	future := make([]float64, leads*int(step/time.Minute))
	for f := range future {
		future[f] = l.idleAt(m + 1 + f)
	}
	ahead, err := c.Lender.IdleAhead(lend.Query{Now: s.now, SeriesNow: l.seriesTime(m), GPUs: l.poolGPUs, History: hist, Replicas: reps, Step: step, Leads: leads, Future: future})
	if err != nil {
		return fmt.Errorf("sim: lending at %s: %w", s.now.Format(time.RFC3339), err)
	}
	if len(ahead) < leads {
		return fmt.Errorf("sim: lending at %s: the lender answered %d leads, want %d", s.now.Format(time.RFC3339), len(ahead), leads)
	}
	d := pol.Decide(ahead, s.loanNodes(), l.busyAt(m))
	for _, k := range d.TakeBack {
		if err := s.giveBack(k); err != nil {
			return err
		}
	}
	for _, k := range d.Lend {
		l.state[k] = lend.Lent
		l.loans++
		s.setNodeUp(l.nodes[k], true, cluster.NodeReady)
	}
	return nil
}

// loanNodes is the inference nodes as lend's decisions see them.
func (s *Simulator) loanNodes() []lend.Node {
	l := s.lend
	out := make([]lend.Node, len(l.nodes))
	for k, i := range l.nodes {
		out[k] = lend.Node{State: l.state[k], GPUs: l.gpus[k], Load: s.nodeLoad(i), Down: s.snap.Nodes[i].State == cluster.NodeFailed}
	}
	return out
}

// periodic is minutes from to to (inclusive) of a series that repeats: a
// slice of it where the stretch does not wrap (shared: read-only), a copy
// where it does.
func periodic(xs []float64, from, to int) []float64 {
	p := len(xs)
	if from/p == to/p {
		return xs[from%p : to%p+1 : to%p+1]
	}
	out := make([]float64, 0, to-from+1)
	for h := from; h <= to; h++ {
		out = append(out, xs[h%p])
	}
	return out
}

// takeBack takes lent nodes back, those running the least training first,
// until at least gpus GPUs are back (lend.TakeBack).
func (s *Simulator) takeBack(gpus float64) error {
	for _, k := range lend.TakeBack(s.loanNodes(), gpus) {
		if err := s.giveBack(k); err != nil {
			return err
		}
	}
	return nil
}

// giveBack takes inference node k back: its jobs checkpoint and stop
// within the notice; it takes no new ones.
func (s *Simulator) giveBack(k int) error {
	l := s.lend
	i := l.nodes[k]
	for _, j := range s.jobsOn(i) {
		if j.run.Stopping { // stopping already, by its own grace
			continue
		}
		pr := executor.Preemption{Job: j.job.ID, CheckpointFirst: j.job.Spec.Checkpointable, StopBy: s.now}
		if pr.CheckpointFirst {
			pr.StopBy = s.now.Add(l.cfg.Notice)
		}
		if err := s.preempt(pr); err != nil {
			return err
		}
		l.reclaimJob++
	}
	l.reclaims++
	l.state[k] = lend.Returning
	if s.nodeEmpty(i) {
		l.state[k] = lend.Serving
	}
	s.setNodeUp(i, false, cluster.NodeDrained)
	return nil
}

// nodeLoad is the milli-GPUs allocated on node i.
func (s *Simulator) nodeLoad(i int) int {
	load := 0
	for g := range s.snap.Nodes[i].GPUs {
		load += cluster.MilliGPU - s.free.FreeMilli(i, g)
	}
	return load
}

func (s *Simulator) nodeEmpty(i int) bool { return s.nodeLoad(i) == 0 }
