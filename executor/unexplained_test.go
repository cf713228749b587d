package executor_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/executor/policies"
)

// planner builds the named policy's planner with the limits changed by mod.
func planner(t testing.TB, name string, mod func(*executor.Limits)) *executor.Framework {
	t.Helper()
	pol, err := policies.New(name, policies.Options{})
	if err != nil {
		t.Fatal(err)
	}
	l := executor.DefaultLimits()
	mod(&l)
	f, err := executor.New(pol, executor.WithLimits(l))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// withoutReasons is a plan's decisions: the plan less its reasons.
func withoutReasons(p executor.Plan) executor.Plan {
	p.Waiting = nil
	p.Placements = slices.Clone(p.Placements)
	for i := range p.Placements {
		p.Placements[i].Reason = ""
	}
	p.Preemptions = slices.Clone(p.Preemptions)
	for i := range p.Preemptions {
		p.Preemptions[i].Reason = ""
	}
	return p
}

// The simulator plans with PlanInput.Unexplained and the queue's Facts;
// the planner then skips formatting reasons, reads the facts instead of
// walking the queue for them, and stops its walk of the queue as soon as
// no job left can start or preempt. Against a planner that explains every
// waiting job
// (and so walks as far as the limits let it), the decisions must be the
// same: placements, preemptions, deadline reports and the next replan.
func TestUnexplainedPlanMakesTheSameDecisions(t *testing.T) {
	base := bigInput(t)
	// Some running jobs are stopping (their GPUs are pending) and a few
	// queued jobs tie on everything but their IDs.
	stopping := base
	stopping.Running = slices.Clone(base.Running)
	for i := 0; i < len(stopping.Running); i += 97 {
		r := *stopping.Running[i]
		r.Stopping = true
		stopping.Running[i] = &r
	}
	stopping.Queue = slices.Clone(base.Queue)
	for i := 1; i < len(stopping.Queue); i += 50 {
		v := *stopping.Queue[i]
		j := *v.Job
		j.SubmitTime, j.Spec.Tier, j.Spec.Tenant = stopping.Queue[0].Job.SubmitTime, stopping.Queue[0].Job.Spec.Tier, stopping.Queue[0].Job.Spec.Tenant
		v.Job, v.QueuedSince, v.Forecast = &j, stopping.Queue[0].QueuedSince, stopping.Queue[0].Forecast
		v.Forecast.Job = j.ID
		stopping.Queue[i] = &v
	}
	inputs := map[string]executor.PlanInput{"busy fleet": base, "busy fleet with stopping jobs and ties": stopping}
	for _, name := range policies.Names() {
		for what, in := range inputs {
			t.Run(fmt.Sprintf("%s/%s", name, what), func(t *testing.T) {
				full := planner(t, name, func(l *executor.Limits) { l.Explained = len(in.Queue) })
				want, err := full.Plan(t.Context(), in)
				if err != nil {
					t.Fatal(err)
				}
				quiet := in
				facts := executor.QueueFactsOf(in.Queue, in.Now) // as a simulator keeps them: the cycle walks no queue for them
				quiet.Unexplained, quiet.Facts = true, &facts
				got, err := planner(t, name, func(*executor.Limits) {}).Plan(t.Context(), quiet)
				if err != nil {
					t.Fatal(err)
				}
				if len(got.Waiting) > 0 {
					t.Errorf("unexplained plan has %d waiting reasons", len(got.Waiting))
				}
				for _, p := range got.Placements {
					if p.Reason != "" {
						t.Fatalf("unexplained placement of %s has the reason %q", p.Job, p.Reason)
					}
				}
				if len(want.Placements)+len(want.Preemptions) == 0 {
					t.Fatal("the input decides nothing: the test would prove nothing")
				}
				want = withoutReasons(want)
				if !slices.EqualFunc(got.Placements, want.Placements, func(a, b executor.Placement) bool { return fmt.Sprint(a) == fmt.Sprint(b) }) {
					t.Errorf("placements differ: %d unexplained, %d explained", len(got.Placements), len(want.Placements))
				}
				if fmt.Sprint(got.Preemptions) != fmt.Sprint(want.Preemptions) {
					t.Errorf("preemptions differ:\n%v\n%v", got.Preemptions, want.Preemptions)
				}
				if fmt.Sprint(got.Deadlines) != fmt.Sprint(want.Deadlines) || !got.NextReplan.Equal(want.NextReplan) {
					t.Error("deadline reports or next replan differ")
				}
			})
		}
	}
}
