// Package park decides when nodes that run nothing power down and when
// parked nodes wake: Policy.Decide, from the state a caller gathers, with
// no state of its own. The control plane (parking.Config, at each cycle)
// and the replay (executor/sim, after each step with Config.ParkForecast)
// both carry out its decisions.
//
// A node's power is a State; the plane keeps a Record of each node that
// is not Awake and moves it as Decide, Power.Ended (a Suspend or Resume
// program's end) and Power.Observe (what a cycle sees of the node) say:
//
//	Awake   Decide: park                               → Parked  Suspend runs (Suspending)
//	Parked  Decide: wake (Wakeable)                    → Waking  Resume runs
//	Parked  Suspend failed, up, never seen down        → Awake   held IdleAfter
//	Parked  ready after it was seen down               → Awake   came back up
//	Waking  up (seen down since, or no Suspend)        → Awake   its boot learnt
//	Waking  ready WakeTimeout after its wake           → Awake
//	Waking  Resume failed, or not ready by WakeTimeout → Parked  not woken for WakeTimeout
//	Waking  down after its wake, the first time        → Waking  Resume runs again
//
// Where other schedulers share the fleet a parked node bears a mark that
// replicas with stores of their own share; OnMark says which marks the
// plane keeps, adopts as parked nodes, or takes off.
//
// An Outlook weighs, over a lookahead, the GPUs that will be there — free
// now on the nodes that are up, or freed by the running jobs, each with
// its chance of ending by then given how long it has run
// (executor.DurationDist through its forecast's P50 and P90) — against the
// GPUs that will be asked for: the queue's and the recent arrivals' at
// their rate (Arrivals, decayed over an hour) over the lookahead. A node
// is spare when the supply covers the demand and a whole node's GPUs
// more; the awake nodes are short by what the demand exceeds the supply.
// The node's worth of slack between the two keeps a node that was just
// woken from looking spare again.
package park

import (
	"math"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
)

// DefaultLookahead is how far ahead an Outlook looks unless told.
const DefaultLookahead = 30 * time.Minute

// Outlook is the GPU supply and demand over the next Look. Its zero value
// with Look set is empty; add the supply with Free and Running.
type Outlook struct {
	Look time.Duration
	// Queued is the GPUs the queue asks for; Rate the GPUs arriving per
	// second lately.
	Queued, Rate float64
	supply       float64
}

// Free adds GPUs free now on a node that is up (or will be within Look).
func (o *Outlook) Free(gpus int) { o.supply += float64(gpus) }

// Running adds the GPUs of a running job that has run for ran, with the
// chance that it ends within Look.
func (o *Outlook) Running(gpus float64, ran, p50, p90 time.Duration) {
	o.supply += gpus * executor.NewDurationDist(p50, p90).EndWithin(ran, o.Look)
}

// Supply is the GPUs expected to be there within Look.
func (o *Outlook) Supply() float64 { return o.supply }

// Demand is the GPUs expected to be asked for within Look.
func (o *Outlook) Demand() float64 { return o.Queued + o.Rate*o.Look.Seconds() }

// Spare reports whether a node of nodeGPUs GPUs, left out of the supply,
// is not expected to be needed: the supply covers the demand and a node's
// GPUs more.
func (o *Outlook) Spare(nodeGPUs int) bool { return o.supply >= o.Demand()+float64(nodeGPUs) }

// Short is how many GPUs the supply lacks to cover the demand; zero when
// it covers it.
func (o *Outlook) Short() float64 { return max(o.Demand()-o.supply, 0) }

// ArrivalTau is the time constant Arrivals decay with.
const ArrivalTau = time.Hour

// Arrivals are the GPUs of the jobs seen arriving, decayed with a time
// constant of ArrivalTau: the recent arrivals an Outlook's Rate is. Its
// zero value has seen none.
type Arrivals struct {
	gpus float64
	at   time.Time
}

func (a *Arrivals) decay(now time.Time) {
	if !a.at.IsZero() && now.After(a.at) {
		a.gpus *= math.Exp(-now.Sub(a.at).Seconds() / ArrivalTau.Seconds())
	}
	if now.After(a.at) {
		a.at = now
	}
}

// Add counts a job of gpus GPUs submitted at submit and seen first at now
// (the later, the less it weighs).
func (a *Arrivals) Add(now, submit time.Time, gpus float64) {
	a.decay(now)
	a.gpus += gpus * math.Exp(-max(now.Sub(submit), 0).Seconds()/ArrivalTau.Seconds())
}

// Rate is the GPUs arriving per second lately: the decayed arrivals over
// their time constant.
func (a *Arrivals) Rate(now time.Time) float64 {
	a.decay(now)
	return a.gpus / ArrivalTau.Seconds()
}

// QueuedDemand is the GPUs of the queued jobs that more awake nodes could
// serve, the Outlook's Queued: every queued job's, but those no node of
// the fleet (nodes: all of it, parked nodes too) could ever hold (a gang
// whose equal tasks fit no node, a job larger than the GPUs of its
// models) and those their tenant's quota holds back (the running jobs'
// GPUs and those of the queued jobs before them counted against it).
func QueuedDemand(queue []*executor.JobView, running []*executor.RunningJob, nodes []cluster.Node, tenants []cluster.Tenant) float64 {
	type room struct{ node, total int } // the most GPUs of a model on one node, and in all
	byModel, whole := map[string]room{}, room{}
	for i := range nodes {
		per := map[string]int{}
		for _, g := range nodes[i].GPUs {
			per[g.Model]++
		}
		for m, k := range per {
			r := byModel[m]
			r.node, r.total = max(r.node, k), r.total+k
			byModel[m] = r
		}
		whole.node, whole.total = max(whole.node, len(nodes[i].GPUs)), whole.total+len(nodes[i].GPUs)
	}
	var fleet *cluster.Snapshot // indexed only if a quota by model asks
	quotas := executor.NewQuotas(tenants, running, func(g cluster.GPURef) string {
		if fleet == nil {
			fleet = cluster.NewSnapshot(&cluster.Fleet{Nodes: nodes}, time.Time{})
		}
		return fleet.GPUModel(g)
	})
	demand := 0.0
	for _, v := range queue {
		spec := &v.Job.Spec
		if spec.GPUs == 0 {
			continue
		}
		r := whole
		if len(spec.GPUModels) > 0 {
			r = room{}
			for _, m := range spec.GPUModels {
				r.node, r.total = max(r.node, byModel[m].node), r.total+byModel[m].total
			}
		}
		if !spec.Splits(r.node) || spec.GPUs > r.total {
			continue // as the placer splits it: no node, or not all of them, could hold it
		}
		if quotas != nil && !quotas.Reserve(v.Job) {
			continue // its tenant's quota holds it back
		}
		demand += float64(spec.MilliGPUs()) / cluster.MilliGPU
	}
	return demand
}
