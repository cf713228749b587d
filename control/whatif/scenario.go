package whatif

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/control/live"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/executor/park"
	"github.com/prescient-sched/prescient/executor/sim"
	"github.com/prescient-sched/prescient/service"
)

func checkHorizon(h time.Duration) (time.Duration, error) {
	switch {
	case h < 0 || h > MaxWhatIfHorizon:
		return 0, fmt.Errorf("horizon %s: want up to %s: %w", h, MaxWhatIfHorizon, service.ErrInvalid)
	case h == 0:
		return DefaultWhatIfHorizon, nil
	}
	return h, nil
}

// baseScenario is the live state as a simulation's input.
func (p *WhatIf) baseScenario(lv *live.State) *scenario {
	sc := &scenario{nodes: lv.Nodes, fc: map[cluster.JobID]executor.Forecast{}, policy: p.d.Policy, planner: p.d.Planner,
		hypo: map[cluster.JobID]bool{}, usage: lv.In.UsageGPU, waits: lv.In.Waits}
	if p.d.Parked != nil {
		// The parked nodes are there to be woken, after a boot; the waking
		// ones are taken as up.
		nodes, states := p.d.Parked.Fleet(lv.Nodes)
		sc.nodes = slices.Clone(nodes)
		for i := range sc.nodes {
			if st := states[sc.nodes[i].Name]; st != "" {
				sc.nodes[i].State = cluster.NodeReady
				if st == park.Parked.String() {
					sc.parked = append(sc.parked, sc.nodes[i].Name)
				}
			}
		}
		sc.wake = p.d.Parked.BootTime()
	}
	for _, v := range lv.In.Queue {
		sc.addQueued(v)
	}
	for _, r := range lv.In.Running {
		if r.Stopping {
			// Being preempted: it goes back to the queue, with its progress
			// if it is writing a checkpoint, else from its last one.
			v := r.JobView
			if r.Job.State != cluster.StateCheckpointing {
				v.Progress = live.SavedProgress(r.Job)
			}
			sc.addQueued(&v)
			continue
		}
		pl := lv.Placements[r.Job.ID]
		remaining := r.RemainingP50()
		j := r.Job.Clone()
		j.Outcome.RunTime = r.Progress + remaining
		sc.running = append(sc.running, sim.Placed{Job: j, Allocations: r.Allocations, Started: r.Started,
			Progress: r.Progress, Forecast: r.Forecast, CheckpointEvery: pl.CheckpointEvery})
		sc.fc[j.ID] = r.Forecast
	}
	return sc
}

// addQueued adds a queued job whose work is what its forecast leaves.
func (sc *scenario) addQueued(v *executor.JobView) {
	j := v.Job.Clone()
	j.Outcome.RunTime = v.RemainingP50()
	f := v.Forecast
	f.DurationP50, f.DurationP90 = v.RemainingP50(), v.RemainingP90()
	sc.queued = append(sc.queued, j)
	sc.fc[j.ID] = f
}

// changed applies a request's changes to a copy of the baseline.
func (p *WhatIf) changed(ctx context.Context, lv *live.State, base *scenario, req service.WhatIfRequest) (*scenario, error) {
	if len(req.AddJobs) > MaxWhatIfJobs {
		return nil, fmt.Errorf("add_jobs: %d jobs, at most %d: %w", len(req.AddJobs), MaxWhatIfJobs, service.ErrInvalid)
	}
	sc := &scenario{fc: maps.Clone(base.fc), policy: base.policy, planner: base.planner, hypo: map[cluster.JobID]bool{},
		usage: base.usage, waits: base.waits, parked: base.parked, wake: base.wake}
	if req.Policy != "" && req.Policy != p.d.Policy.Name {
		pol, planner, err := p.d.Source.Policy(req.Policy)
		if err != nil {
			return nil, fmt.Errorf("policy: %w: %w", service.ErrInvalid, err)
		}
		sc.policy, sc.planner = pol, planner
	}
	if err := sc.setNodes(base.nodes, req.AddNodes, req.RemoveNodes); err != nil {
		return nil, err
	}
	removed, err := jobSet(lv, req.RemoveJobs)
	if err != nil {
		return nil, err
	}
	sc.queued = make([]cluster.Job, 0, len(base.queued)+len(req.AddJobs)) // jobs are large: grown, they were copied twice over
	for _, j := range base.queued {
		if !removed[j.ID] {
			sc.queued = append(sc.queued, j)
		}
	}
	for _, r := range base.running {
		switch {
		case removed[r.Job.ID]:
		case allOn(r.Allocations, sc.nodes):
			sc.running = append(sc.running, r)
		default: // its node is gone: back to the queue, from its last checkpoint
			for _, v := range lv.In.Running {
				if v.Job.ID == r.Job.ID {
					sc.addQueued(&executor.JobView{Job: v.Job, Forecast: v.Forecast, Progress: live.SavedProgress(v.Job)})
				}
			}
		}
	}
	return sc, p.addHypothetical(ctx, lv, sc, req.AddJobs)
}

// setNodes is the baseline's nodes less the removed, plus the added.
func (sc *scenario) setNodes(base, add []cluster.Node, remove []string) error {
	names := map[string]bool{}
	for _, n := range base {
		names[n.Name] = true
	}
	gone := map[string]bool{}
	for i, name := range remove {
		if !names[name] {
			return fmt.Errorf("remove_nodes[%d]: no node %q: %w", i, name, service.ErrInvalid)
		}
		gone[name] = true
	}
	for _, n := range base {
		if !gone[n.Name] {
			sc.nodes = append(sc.nodes, n)
		}
	}
	for i, n := range add {
		if names[n.Name] && !gone[n.Name] {
			return fmt.Errorf("add_nodes[%d]: node %q exists: %w", i, n.Name, service.ErrInvalid)
		}
		sc.nodes = append(sc.nodes, n)
	}
	fleet := cluster.Fleet{Nodes: sc.nodes}
	if err := fleet.Validate(); err != nil {
		return fmt.Errorf("add_nodes: %w: %w", service.ErrInvalid, err)
	}
	if len(sc.nodes) == 0 {
		return fmt.Errorf("remove_nodes: no node would be left: %w", service.ErrInvalid)
	}
	return nil
}

// jobSet checks that the jobs to remove are queued or running.
func jobSet(lv *live.State, ids []cluster.JobID) (map[cluster.JobID]bool, error) {
	known := map[cluster.JobID]bool{}
	for _, v := range lv.In.Queue {
		known[v.Job.ID] = true
	}
	for _, r := range lv.In.Running {
		known[r.Job.ID] = true
	}
	out := map[cluster.JobID]bool{}
	for i, id := range ids {
		if !known[id] {
			return nil, fmt.Errorf("remove_jobs[%d]: %s is not queued or running: %w", i, id, service.ErrInvalid)
		}
		out[id] = true
	}
	return out, nil
}

func allOn(allocs []cluster.Allocation, nodes []cluster.Node) bool {
	for _, a := range allocs {
		if !slices.ContainsFunc(nodes, func(n cluster.Node) bool {
			return n.Name == a.GPU.Node && a.GPU.Index < len(n.GPUs)
		}) {
			return false
		}
	}
	return true
}

// addHypothetical forecasts the hypothetical jobs, submitted now.
func (p *WhatIf) addHypothetical(ctx context.Context, lv *live.State, sc *scenario, reqs []service.SubmitRequest) error {
	if len(reqs) == 0 {
		return nil
	}
	jobs := make([]cluster.Job, len(reqs))
	ptrs := make([]*cluster.Job, len(reqs))
	taken := map[cluster.JobID]bool{}
	for _, j := range sc.queued {
		taken[j.ID] = true
	}
	for _, r := range sc.running {
		taken[r.Job.ID] = true
	}
	for i, r := range reqs {
		spec, err := p.d.Source.CheckSpec(r.Spec, fmt.Sprintf("add_jobs[%d].spec", i))
		if err != nil {
			return err
		}
		id := r.ID
		if id == "" {
			id = cluster.JobID(fmt.Sprintf("whatif-%d", i))
		}
		if taken[id] {
			return fmt.Errorf("add_jobs[%d].id: %s is taken: %w", i, id, service.ErrInvalid)
		}
		taken[id] = true
		jobs[i] = cluster.NewJob(id, spec, lv.Now)
		ptrs[i] = &jobs[i]
	}
	fc, err := p.d.Forecaster.Forecast(ctx, ptrs)
	if err != nil {
		return fmt.Errorf("what-if: forecasts: %w", err)
	}
	fcs := make(map[cluster.JobID]executor.Forecast, len(sc.fc)+len(fc))
	for id, f := range sc.fc {
		fcs[id] = f
	}
	for i, f := range fc {
		jobs[i].Outcome.RunTime = max(f.DurationP50, time.Second)
		fcs[f.Job] = f
		sc.queued = append(sc.queued, jobs[i])
		sc.hypo[f.Job] = true
	}
	sc.fc = fcs
	return nil
}

// simulate runs a scenario from now and returns every job's outcome.
func simulate(ctx context.Context, now, until time.Time, budget time.Duration, sc *scenario, tenants []cluster.Tenant) (*simRun, error) {
	cfg := sim.Config{Fleet: &cluster.Fleet{Nodes: slices.Clone(sc.nodes), Tenants: tenants}, Jobs: sc.queued,
		Running: sc.running, Planner: sc.planner, Forecaster: known(sc.fc), Order: sc.policy.Order,
		Preemptive: sc.policy.Preemptor != nil, Start: now, Until: until, StopBy: time.Now().Add(budget), Outcomes: true, Seed: 1,
		Usage: sc.usage, Waits: sc.waits, Logger: slog.New(slog.DiscardHandler)}
	if len(sc.parked) > 0 {
		// The nodes parked now, woken only for what the awake nodes leave
		// waiting, as the plane wakes them; the simulation parks no more.
		cfg.ParkedAtStart, cfg.WakeTime, cfg.WakeLast = sc.parked, sc.wake, true
	}
	r, err := sim.Run(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &simRun{out: r.Outcomes, cut: r.Cut, horizon: r.Horizon}, nil
}

// simRun is one simulation's outcomes and, when it was cut short, why and
// how far it got.
type simRun struct {
	out     []sim.JobOutcome
	cut     sim.Cut
	horizon time.Time
}

// commonHorizon is how far both runs were followed: the earlier horizon of
// those cut short and why, in the words of service.WhatIfResult; zero when
// neither was.
func commonHorizon(a, b *simRun) (time.Time, string) {
	var h time.Time
	var why sim.Cut
	for _, r := range []*simRun{a, b} {
		if r.cut != "" && (h.IsZero() || r.horizon.Before(h)) {
			h, why = r.horizon, r.cut
		}
	}
	reason := map[sim.Cut]string{sim.CutUntil: "horizon", sim.CutBudget: "budget", sim.CutStalled: "stalled"}[why]
	return h, reason
}

// within is t when it is known and not after the horizon h (zero: none),
// else zero.
func within(t, h time.Time) time.Time {
	if !h.IsZero() && t.After(h) {
		return time.Time{}
	}
	return t
}

var _ executor.Forecaster = known(nil)

// known is a Forecaster over forecasts known already.
type known map[cluster.JobID]executor.Forecast

func (k known) Forecast(_ context.Context, jobs []*cluster.Job) ([]executor.Forecast, error) {
	out := make([]executor.Forecast, len(jobs))
	for i, j := range jobs {
		f, ok := k[j.ID]
		if !ok {
			return nil, fmt.Errorf("job %s: %w", j.ID, executor.ErrUnknownJob)
		}
		out[i] = f
	}
	return out, nil
}

// compare lines up the scenario's outcomes against the baseline's, both
// up to their common horizon.
func compare(now time.Time, sc *scenario, base, scen *simRun) service.WhatIfResult {
	h, reason := commonHorizon(base, scen)
	byID := make(map[cluster.JobID]sim.JobOutcome, len(base.out))
	for _, o := range base.out {
		byID[o.Job] = o
	}
	jobs := map[cluster.JobID]*cluster.Job{}
	for i := range sc.queued {
		jobs[sc.queued[i].ID] = &sc.queued[i]
	}
	for i := range sc.running {
		jobs[sc.running[i].Job.ID] = &sc.running[i].Job
	}
	res := service.WhatIfResult{Jobs: make([]service.WhatIfJob, 0, len(scen.out)), Horizon: timePtr(h), HorizonReason: reason}
	for _, o := range scen.out {
		start, end := within(o.Start, h), within(o.End, h)
		// A job with no start and no horizon never starts (it fits nowhere).
		wj := service.WhatIfJob{Job: o.Job, Hypothetical: sc.hypo[o.Job], Start: timePtr(start), End: timePtr(end),
			BeyondHorizon: start.IsZero() && !h.IsZero()}
		if b, ok := byID[o.Job]; ok {
			bStart, bEnd := within(b.Start, h), within(b.End, h)
			wj.BaselineStart, wj.BaselineEnd = timePtr(bStart), timePtr(bEnd)
			wj.BaselineBeyondHorizon = bStart.IsZero() && !h.IsZero()
			if !end.IsZero() && !bEnd.IsZero() {
				d := end.Sub(bEnd).Seconds()
				wj.DeltaEndS = &d
			}
		}
		if j := jobs[o.Job]; j != nil && j.Spec.HasDeadline() {
			wj.DeadlineFeasible = deadlineMet(j, end, h)
		}
		res.Jobs = append(res.Jobs, wj)
	}
	res.Scenario = summarize(now, h, scen.out, jobs)
	res.Baseline = summarize(now, h, base.out, jobs)
	return res
}

// deadlineMet is whether a job that ends at end (zero: after the
// horizon h) meets its deadline; nil when the horizon leaves it unknown.
func deadlineMet(j *cluster.Job, end, h time.Time) *bool {
	met := !end.IsZero() && !end.After(j.Spec.Deadline)
	if end.IsZero() && !h.IsZero() && j.Spec.Deadline.After(h) {
		return nil // it may still end in time after the horizon
	}
	return &met
}

// summarize sums up one simulation up to the horizon h (zero: none): the
// mean wait from now (or from submission, for later jobs) of the jobs
// that start in it, the time until the last job ends (the horizon, when
// jobs start or end after it), the deadlines known met, and the jobs that
// start after the horizon.
func summarize(now, h time.Time, outs []sim.JobOutcome, jobs map[cluster.JobID]*cluster.Job) service.WhatIfSummary {
	var s service.WhatIfSummary
	var waitSum float64
	waits := 0
	last := now
	for _, o := range outs {
		j := jobs[o.Job]
		if j == nil {
			continue
		}
		start, end := within(o.Start, h), within(o.End, h)
		switch {
		case start.IsZero():
			if !h.IsZero() {
				s.BeyondHorizon++
			}
		case !start.Before(now):
			waitSum += start.Sub(later(now, j.SubmitTime)).Seconds()
			waits++
		}
		if end.IsZero() && !h.IsZero() {
			last = h
		}
		if end.After(last) {
			last = end
		}
		if j.Spec.HasDeadline() {
			if met := deadlineMet(j, end, h); met != nil {
				s.DeadlinesTotal++
				if *met {
					s.DeadlinesMet++
				}
			}
		}
	}
	if waits > 0 {
		s.MeanWaitS = waitSum / float64(waits)
	}
	s.MakespanS = last.Sub(now).Seconds()
	return s
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
