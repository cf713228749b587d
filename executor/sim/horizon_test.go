package sim_test

import (
	"testing"
	"time"

	"github.com/prescient-sched/prescient/datasets"
	"github.com/prescient-sched/prescient/executor/sim"
)

// TestAReplayCutShortSaysWhere replays 300 Philly jobs in full, until a
// time, and with a wall-clock budget already spent: a full replay is not
// cut and its horizon is its last end; Until cuts at that time; the spent
// budget cuts after the first step. In each, the outcomes agree with the
// horizon: every start and end reported is at or before it, and a job
// that had started by then in the full replay is reported started.
func TestAReplayCutShortSaysWhere(t *testing.T) {
	jobs := phillySlice(t, 300)
	fleet, err := datasets.ReadFleet("uniform:4x8:V100")
	if err != nil {
		t.Fatal(err)
	}
	outcomes := func(mod func(*sim.Config)) *sim.Result {
		return replay(t, "prescient", fleet, jobs, func(c *sim.Config) {
			c.Outcomes = true
			if mod != nil {
				mod(c)
			}
		})
	}
	full := outcomes(nil)
	if full.Cut != "" || full.Finished != len(jobs) {
		t.Fatalf("full replay: cut %q, %d of %d finished", full.Cut, full.Finished, len(jobs))
	}
	var last time.Time
	for _, o := range full.Outcomes {
		if o.End.After(last) {
			last = o.End
		}
	}
	if !full.Horizon.Equal(last) {
		t.Errorf("full replay's horizon %s, want its last end %s", full.Horizon, last)
	}
	fullStart := map[string]time.Time{}
	for _, o := range full.Outcomes {
		fullStart[string(o.Job)] = o.Start
	}
	until := jobs[150].SubmitTime
	for name, c := range map[string]struct {
		mod  func(*sim.Config)
		cut  sim.Cut
		want func(h time.Time) bool
	}{
		"until":  {func(c *sim.Config) { c.Until = until }, sim.CutUntil, func(h time.Time) bool { return h.Equal(until) }},
		"budget": {func(c *sim.Config) { c.StopBy = time.Now() }, sim.CutBudget, func(h time.Time) bool { return h.Equal(jobs[0].SubmitTime) }},
	} {
		r := outcomes(c.mod)
		if r.Cut != c.cut || !c.want(r.Horizon) {
			t.Errorf("%s: cut %q at %s", name, r.Cut, r.Horizon)
		}
		for _, o := range r.Outcomes {
			if o.Start.After(r.Horizon) || o.End.After(r.Horizon) {
				t.Errorf("%s: %s starts %s and ends %s, after the horizon %s", name, o.Job, o.Start, o.End, r.Horizon)
			}
			if fs := fullStart[string(o.Job)]; name == "until" && !fs.IsZero() && fs.Before(r.Horizon) && !o.Start.Equal(fs) {
				t.Errorf("%s: %s starts %s, and at %s in the full replay, before the horizon", name, o.Job, o.Start, fs)
			}
		}
	}
}
