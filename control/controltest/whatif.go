package controltest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/service"
)

// The what-if policies the fake knows.
const (
	PolicyFIFO = "fifo" // by submit time (the default)
	PolicySJF  = "sjf"  // shortest P50 first
)

// simJob is one job as the what-if list scheduler sees it.
type simJob struct {
	id           cluster.JobID
	submit       time.Time
	milli        int
	dur          time.Duration
	deadline     time.Time
	runningSince time.Time // zero for a queued job
	hypothetical bool
}

type simResult struct{ start, end *time.Time }

// WhatIfsAsked are the what-if questions the fake was asked, in order
// (its answers ignore Tenants: a test of a client checks what it sent).
func (f *Fake) WhatIfsAsked() []service.WhatIfRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.asked)
}

// WhatIf simulates the live queue and the changed one with a greedy list
// scheduler over the fleet's total milli-GPUs (it ignores how shares pack
// onto single GPUs): running jobs end at their P50, queued jobs start in
// policy order, each at the first moment enough capacity is free and not
// before the one ahead of it.
func (f *Fake) WhatIf(_ context.Context, req service.WhatIfRequest) (service.WhatIfResult, error) {
	began := time.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.failure("WhatIf"); err != nil {
		return service.WhatIfResult{}, err
	}
	f.asked = append(f.asked, req)
	policy := cmp.Or(req.Policy, PolicyFIFO)
	if policy != PolicyFIFO && policy != PolicySJF {
		return service.WhatIfResult{}, fmt.Errorf("policy: %q is not %s or %s: %w", req.Policy, PolicyFIFO, PolicySJF, service.ErrInvalid)
	}
	if req.Horizon < 0 {
		return service.WhatIfResult{}, fmt.Errorf("horizon: %s is negative: %w", req.Horizon, service.ErrInvalid)
	}
	now := f.clock()
	until := now.Add(cmp.Or(req.Horizon, 7*24*time.Hour))

	// 1. The baseline: the live jobs on the live fleet, in FIFO order.
	base := f.liveJobs(nil)
	baseRes := simulate(now, until, capacity(f.nodes), base, PolicyFIFO)

	// 2. The scenario: the fleet and the queue changed as asked.
	nodes, removed, err := f.scenarioNodes(req)
	if err != nil {
		return service.WhatIfResult{}, err
	}
	scen, err := f.scenarioJobs(req, removed, now)
	if err != nil {
		return service.WhatIfResult{}, err
	}
	scenRes := simulate(now, until, capacity(nodes), scen, policy)

	// 3. Each job in both plans, and the summaries.
	res := service.WhatIfResult{
		Policy: policy, Jobs: []service.WhatIfJob{},
		Baseline: summarize(now, base, baseRes), Scenario: summarize(now, scen, scenRes),
	}
	for _, j := range scen {
		r, b := scenRes[j.id], baseRes[j.id]
		wj := service.WhatIfJob{Job: j.id, Hypothetical: j.hypothetical, Start: r.start, End: r.end, BaselineStart: b.start, BaselineEnd: b.end}
		if r.end != nil && b.end != nil {
			d := r.end.Sub(*b.end).Seconds()
			wj.DeltaEndS = &d
		}
		if !j.deadline.IsZero() {
			ok := r.end != nil && !r.end.After(j.deadline)
			wj.DeadlineFeasible = &ok
		}
		res.Jobs = append(res.Jobs, wj)
	}
	markHorizon(&res, now, until)
	res.WallS = time.Since(began).Seconds()
	return res, nil
}

// markHorizon says, as the plane does, that the plans were followed only
// until the horizon when a job starts after it in either; their
// makespans are then the horizon.
func markHorizon(res *service.WhatIfResult, now, until time.Time) {
	for i := range res.Jobs {
		j := &res.Jobs[i]
		j.BeyondHorizon = j.Start == nil
		j.BaselineBeyondHorizon = !j.Hypothetical && j.BaselineStart == nil
		if j.BeyondHorizon {
			res.Scenario.BeyondHorizon++
		}
		if j.BaselineBeyondHorizon {
			res.Baseline.BeyondHorizon++
		}
	}
	if res.Scenario.BeyondHorizon+res.Baseline.BeyondHorizon == 0 {
		return
	}
	res.Horizon, res.HorizonReason = &until, "horizon"
	res.Baseline.MakespanS, res.Scenario.MakespanS = until.Sub(now).Seconds(), until.Sub(now).Seconds()
}

// liveJobs is every job that is queued or runs; jobs running on a node in
// requeue count as queued.
func (f *Fake) liveJobs(requeue map[string]bool) []simJob {
	var out []simJob
	for _, e := range f.jobs {
		if e.job.State.Terminal() {
			continue
		}
		j := simJob{
			id: e.job.ID, submit: e.job.SubmitTime, milli: e.job.Spec.MilliGPUs(),
			dur: seconds(e.forecast.DurationP50S), deadline: e.job.Spec.Deadline,
		}
		if e.job.State.Active() && !onAny(e.placement, requeue) {
			j.runningSince = e.job.StartTime
		}
		out = append(out, j)
	}
	slices.SortFunc(out, func(a, b simJob) int { return cmp.Compare(a.id, b.id) })
	return out
}

func onAny(refs []cluster.GPURef, nodes map[string]bool) bool {
	for _, r := range refs {
		if nodes[r.Node] {
			return true
		}
	}
	return false
}

func (f *Fake) scenarioNodes(req service.WhatIfRequest) ([]cluster.Node, map[string]bool, error) {
	removed := map[string]bool{}
	var errs []error
	for i, name := range req.RemoveNodes {
		if f.node(name) == nil {
			errs = append(errs, fmt.Errorf("remove_nodes[%d]: no node %q", i, name))
		}
		removed[name] = true
	}
	var nodes []cluster.Node
	for _, n := range f.nodes {
		if !removed[n.Name] {
			nodes = append(nodes, n)
		}
	}
	for i, n := range req.AddNodes {
		switch {
		case n.Name == "":
			errs = append(errs, fmt.Errorf("add_nodes[%d].name: empty", i))
		case slices.ContainsFunc(nodes, func(m cluster.Node) bool { return m.Name == n.Name }):
			errs = append(errs, fmt.Errorf("add_nodes[%d].name: node %q exists", i, n.Name))
		}
		nodes = append(nodes, n)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", service.ErrInvalid, err)
	}
	return nodes, removed, nil
}

func (f *Fake) scenarioJobs(req service.WhatIfRequest, removedNodes map[string]bool, now time.Time) ([]simJob, error) {
	drop := map[cluster.JobID]bool{}
	var errs []error
	for i, id := range req.RemoveJobs {
		if e, ok := f.jobs[id]; !ok || e.job.State.Terminal() {
			errs = append(errs, fmt.Errorf("remove_jobs[%d]: no queued or running job %q", i, id))
		}
		drop[id] = true
	}
	var jobs []simJob
	for _, j := range f.liveJobs(removedNodes) {
		if !drop[j.id] {
			jobs = append(jobs, j)
		}
	}
	for i, a := range req.AddJobs {
		if err := a.Spec.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("add_jobs[%d]: %w", i, err))
			continue
		}
		id := cmp.Or(a.ID, cluster.JobID(fmt.Sprintf("whatif-%d", i+1)))
		if _, ok := f.jobs[id]; ok {
			errs = append(errs, fmt.Errorf("add_jobs[%d].id: job %q exists", i, id))
		}
		fc := f.forecast(a.Spec)
		jobs = append(jobs, simJob{
			id: id, submit: now, milli: a.Spec.MilliGPUs(), dur: seconds(fc.DurationP50S),
			deadline: a.Spec.Deadline, hypothetical: true,
		})
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%w: %w", service.ErrInvalid, err)
	}
	return jobs, nil
}

func capacity(nodes []cluster.Node) int {
	c := 0
	for _, n := range nodes {
		if n.State == "" || n.State == cluster.NodeReady {
			c += len(n.GPUs) * cluster.MilliGPU
		}
	}
	return c
}

// simulate starts the queued jobs of jobs in policy order, each at the first
// moment enough capacity is free and not before the job ahead of it; a job
// that would start after until, or needs more than the fleet has, does not
// start.
func simulate(now, until time.Time, capMilli int, jobs []simJob, policy string) map[cluster.JobID]simResult {
	out := map[cluster.JobID]simResult{}
	var holds []hold
	var queue []simJob
	for _, j := range jobs {
		if j.runningSince.IsZero() {
			queue = append(queue, j)
			continue
		}
		start, end := j.runningSince, later(now, j.runningSince.Add(j.dur))
		out[j.id] = simResult{start: &start, end: &end}
		holds = append(holds, hold{end, j.milli})
	}
	slices.SortFunc(queue, func(a, b simJob) int {
		if policy == PolicySJF {
			if c := cmp.Compare(a.dur, b.dur); c != 0 {
				return c
			}
		}
		return cmp.Or(a.submit.Compare(b.submit), cmp.Compare(a.id, b.id))
	})
	t := now
	for _, j := range queue {
		if j.milli > capMilli {
			out[j.id] = simResult{}
			continue
		}
		// The candidate moments are t and every later end of a hold.
		slices.SortFunc(holds, func(a, b hold) int { return a.end.Compare(b.end) })
		for _, c := range append([]time.Time{t}, endsAfter(holds, t)...) {
			busy := 0
			for _, h := range holds {
				if h.end.After(c) {
					busy += h.milli
				}
			}
			if capMilli-busy >= j.milli {
				t = c
				break
			}
		}
		if t.After(until) {
			out[j.id] = simResult{}
			continue
		}
		start, end := t, t.Add(j.dur)
		out[j.id] = simResult{start: &start, end: &end}
		holds = append(holds, hold{end, j.milli})
	}
	return out
}

// hold is capacity a job holds until end.
type hold struct {
	end   time.Time
	milli int
}

func endsAfter(holds []hold, t time.Time) []time.Time {
	var out []time.Time
	for _, h := range holds {
		if h.end.After(t) {
			out = append(out, h.end)
		}
	}
	return out
}

func summarize(now time.Time, jobs []simJob, res map[cluster.JobID]simResult) service.WhatIfSummary {
	var s service.WhatIfSummary
	var waitSum float64
	waited := 0
	for _, j := range jobs {
		r := res[j.id]
		if j.runningSince.IsZero() && r.start != nil {
			waitSum += r.start.Sub(j.submit).Seconds()
			waited++
		}
		if r.end != nil {
			s.MakespanS = max(s.MakespanS, r.end.Sub(now).Seconds())
		}
		if !j.deadline.IsZero() {
			s.DeadlinesTotal++
			if r.end != nil && !r.end.After(j.deadline) {
				s.DeadlinesMet++
			}
		}
	}
	if waited > 0 {
		s.MeanWaitS = waitSum / float64(waited)
	}
	return s
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
