package lend

import (
	"cmp"
	"math"
	"time"
)

// The defaults of Policy's durations.
const (
	DefaultEvery    = 5 * time.Minute
	DefaultMinLoan  = 30 * time.Minute
	DefaultNotice   = 2 * time.Minute
	DefaultLookback = 6 * time.Hour
)

// Policy is when loans are made and ended. Every Every a Lender forecasts
// the pool's idle GPUs ahead, in steps of Every: whole nodes are lent
// while the forecast keeps them spare for MinLoan, and taken back when it
// says the demand returns within Every + Notice (the next decision and
// the jobs' notice to checkpoint), rounded up to whole steps. Headroom
// GPUs are kept idle for the service beyond the forecast: a live service
// whose every GPU is busy may want more than it shows.
type Policy struct {
	Every, MinLoan, Notice time.Duration
	Headroom               int
}

// WithDefaults is p with its zero durations at their defaults.
func (p Policy) WithDefaults() Policy {
	p.Every = cmp.Or(p.Every, DefaultEvery)
	p.MinLoan = cmp.Or(p.MinLoan, DefaultMinLoan)
	p.Notice = cmp.Or(p.Notice, DefaultNotice)
	return p
}

// Leads is how many steps of Every a decision needs forecast.
func (p Policy) Leads() int { return int(max(p.MinLoan, p.Every+p.Notice)/p.Every) + 1 }

// State is an inference node's state.
type State int

const (
	Serving   State = iota // the service's
	Lent                   // training's
	Returning              // taken back: its jobs checkpoint and stop
)

func (s State) String() string {
	switch s {
	case Lent:
		return "lent"
	case Returning:
		return "returning"
	}
	return "serving"
}

// Node is an inference node as a decision sees it.
type Node struct {
	State State
	GPUs  int
	// Load is how much training runs on it (any unit): of the lent nodes
	// the least loaded is taken back first.
	Load int
	// Down is a failed node: it is not taken back, which would give the
	// service nothing until its repair.
	Down bool
	// Keep is a serving node not to lend (its GPUs served lately, or it is
	// down): the others are lent around it.
	Keep bool
}

// held is the GPUs of nodes in state st.
func held(nodes []Node, st State) int {
	n := 0
	for _, nd := range nodes {
		if nd.State == st {
			n += nd.GPUs
		}
	}
	return n
}

// Decision is what a forecast decided: the nodes (indices) to take back
// and to lend, in order, and the idle GPUs the forecast counts on until
// the next decision (Keep) and for a new loan (Loanable).
type Decision struct {
	TakeBack, Lend []int
	Keep, Loanable float64
}

// Decide turns a Lender's forecast (Leads steps of Every) into take-backs
// and loans of nodes, given the GPUs the service is busy on now. Lent
// nodes beyond what stays idle until the next decision and the notice,
// less the headroom, are taken back (the least loaded first, TakeBack);
// then serving nodes are lent, the last first (the service consolidates
// onto the first ones; those to Keep are passed over), while the lent
// ones and the new one stay idle for MinLoan, the headroom aside, and the
// serving ones left still cover the busy GPUs and the headroom. A
// forecast with NaN lends nothing and keeps nothing.
func (p Policy) Decide(ahead []float64, nodes []Node, busy float64) Decision {
	within := func(d time.Duration) float64 {
		low := math.Inf(1)
		for k := 0; k < len(ahead) && time.Duration(k)*p.Every < d; k++ {
			if math.IsNaN(ahead[k]) { // no forecast: nothing is spare
				return 0
			}
			low = math.Min(low, ahead[k])
		}
		return math.Floor(low + 1e-9)
	}
	h := float64(p.Headroom)
	d := Decision{Keep: within(p.Every+p.Notice) - h, Loanable: within(p.MinLoan) - h}
	st := make([]Node, len(nodes))
	copy(st, nodes)
	if over := float64(held(st, Lent)) - d.Keep; over > 0 {
		d.TakeBack = TakeBack(st, over)
		for _, k := range d.TakeBack {
			st[k].State = Returning
		}
	}
	for k := len(st) - 1; k >= 0; k-- {
		if st[k].State != Serving || st[k].Keep {
			continue
		}
		if float64(held(st, Lent)+held(st, Returning)+st[k].GPUs) > d.Loanable || float64(held(st, Serving)-st[k].GPUs) < busy+h {
			break
		}
		st[k].State = Lent
		d.Lend = append(d.Lend, k)
	}
	return d
}

// TakeBack picks lent nodes to take back, the least loaded first, until
// they hold at least gpus GPUs or none is left (a node that is down is
// left lent).
func TakeBack(nodes []Node, gpus float64) []int {
	taken := make([]bool, len(nodes))
	var out []int
	for gpus > 0 {
		best, bestLoad := -1, math.MaxInt
		for k, n := range nodes {
			if n.State != Lent || n.Down || taken[k] {
				continue
			}
			if n.Load < bestLoad {
				best, bestLoad = k, n.Load
			}
		}
		if best < 0 {
			break
		}
		taken[best] = true
		out = append(out, best)
		gpus -= float64(nodes[best].GPUs)
	}
	return out
}

// Urgent is how many GPUs to take back at once, before the next
// forecast: the demand beyond the GPUs the service holds (held). Where
// the demand is seen only on the GPUs that serve (censored: a live
// service's utilization), a service whose every GPU is busy may want
// more (one that holds none is blind), and a GPU's worth is taken back.
func Urgent(busy, held float64, censored bool) float64 {
	switch {
	case !censored:
		return max(busy-held, 0)
	case busy >= held:
		return 1
	}
	return 0
}
