package park

import (
	"fmt"
	"slices"
	"time"
)

// Policy is when nodes park and wake: parking.Config and the replay's
// Config.Park* fields carry one.
type Policy struct {
	// IdleAfter parks a node that has run nothing that long.
	IdleAfter time.Duration
	// Forecast parks an empty node before IdleAfter when the Outlook finds
	// it spare, keeps one after IdleAfter only while the others fall short
	// without it, and wakes parked nodes ahead of the demand.
	Forecast bool
	// Lookahead is how far the Outlook looks (default DefaultLookahead).
	Lookahead time.Duration
}

// Empty is an awake node that runs nothing and may be parked: the
// caller has left out the nodes that must stay up (work was planned on
// them, a failed park holds them, a backend says no).
type Empty struct {
	Node string
	// GPUs are its wholly free GPUs: its part of the Outlook's supply.
	GPUs  int
	Since time.Time // when it last ran something
}

// Asleep is a parked node that may be woken.
type Asleep struct {
	Node  string
	GPUs  int
	Since time.Time // when it parked
	// Needed says why waiting work needs it now (Needed); "" when none
	// does.
	Needed string
}

// Input is the state a decision reads.
type Input struct {
	Now time.Time
	// Outlook holds the demand and the supply without the parked nodes:
	// the nodes up (the empty ones too) and waking, the running jobs.
	Outlook Outlook
	// NodeGPUs is the largest node's GPUs: a node is spare when the
	// supply covers the demand and this much more.
	NodeGPUs int
	Empty    []Empty
	Asleep   []Asleep
}

// ActionKind is what to do with a node.
type ActionKind uint8

// The actions of a decision.
const (
	Wake ActionKind = iota + 1
	Park
)

func (k ActionKind) String() string {
	if k == Park {
		return "park"
	}
	return "wake"
}

// Action is one decision about a node, with why.
type Action struct {
	Kind   ActionKind
	Node   string
	Reason string
}

// Decide is parking's decision at one instant, in the order to carry it
// out: the wakes, then the parks.
//
//	asleep, longest parked first:  Needed             → wake ("job J waits for it")
//	                               Forecast, Short>0  → wake (each woken one adds its GPUs)
//	empty, longest empty first:    its GPUs taken out of the supply, then
//	                               Forecast, Spare    → park ("the forecast: ...")
//	                               idle ≥ IdleAfter, and with Forecast Short=0
//	                                                  → park ("it ran nothing for ...")
//	                               else               → stays up (its GPUs back in the supply)
//
// Ties keep the caller's order. A caller whose action fails decides again
// on the state as it then is: the rest is what Decide would have said.
func (p Policy) Decide(in Input) []Action {
	o := in.Outlook
	look := o.Look
	var out []Action
	asleep := slices.Clone(in.Asleep)
	slices.SortStableFunc(asleep, func(a, b Asleep) int { return a.Since.Compare(b.Since) })
	wake := make([]string, len(asleep))
	for k, a := range asleep {
		if a.Needed != "" {
			wake[k] = a.Needed
			o.Free(a.GPUs)
		}
	}
	for k, a := range asleep {
		if p.Forecast && wake[k] == "" && o.Short() > 0 {
			wake[k] = fmt.Sprintf("the forecast: %.1f GPUs wanted over the next %s, %.1f there", o.Demand(), look, o.Supply())
			o.Free(a.GPUs)
		}
	}
	for k, a := range asleep {
		if wake[k] != "" {
			out = append(out, Action{Kind: Wake, Node: a.Node, Reason: wake[k]})
		}
	}
	empty := slices.Clone(in.Empty)
	slices.SortStableFunc(empty, func(a, b Empty) int { return a.Since.Compare(b.Since) })
	for _, e := range empty {
		o.Free(-e.GPUs) // the supply without it
		idle := in.Now.Sub(e.Since)
		var why string
		switch {
		case p.Forecast && o.Spare(in.NodeGPUs):
			why = fmt.Sprintf("the forecast: %.1f GPUs there without it over the next %s, %.1f wanted and a node's %d more", o.Supply(), look, o.Demand(), in.NodeGPUs)
		case idle >= p.IdleAfter && (!p.Forecast || o.Short() == 0):
			why = fmt.Sprintf("it ran nothing for %s", idle.Round(time.Second))
		default:
			o.Free(e.GPUs)
			continue
		}
		out = append(out, Action{Kind: Park, Node: e.Node, Reason: why})
	}
	return out
}

// After is the input to decide again on once acts were carried out up
// to the park of node failed, which failed: the woken nodes' GPUs join
// the supply, the parked nodes' leave it, and the failed node stays up
// (its GPUs in the supply) and is no longer a candidate. Deciding on it
// gives what Decide would have said of the nodes left had it known.
func (in Input) After(acts []Action, failed string) Input {
	gpus := map[string]int{}
	for _, e := range in.Empty {
		gpus[e.Node] = e.GPUs
	}
	for _, a := range in.Asleep {
		gpus[a.Node] = a.GPUs
	}
	out := in
	out.Empty, out.Asleep = nil, nil
	done := map[string]bool{failed: true}
	for _, a := range acts {
		if a.Kind == Wake {
			out.Outlook.Free(gpus[a.Node])
			continue
		}
		if a.Node == failed {
			break
		}
		out.Outlook.Free(-gpus[a.Node])
		done[a.Node] = true
	}
	for _, e := range in.Empty {
		if !done[e.Node] {
			out.Empty = append(out.Empty, e)
		}
	}
	return out
}
