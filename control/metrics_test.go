package control

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
)

// The plane's metrics of its jobs: the wait to the first start by tenant
// and tier, the lifecycle events, failures by reason, and how far a
// finished job's run time was from its forecast.
func TestThePlaneCountsItsJobsLives(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := newEnv(t, fleetOf(1, 8), func(c *Config) { c.Metrics = reg })
	e.submit("ok", spec(2, time.Hour))
	e.submit("bad", spec(2, time.Hour))
	e.clock.Advance(3 * time.Minute) // both wait 3 minutes
	e.plane.cycle(e.ctx)
	for _, id := range []cluster.JobID{"ok", "bad"} {
		e.event(executor.JobEvent{Type: executor.JobStarted, Job: id, Attempt: 1, Node: "n0"})
	}
	e.clock.Advance(50 * time.Minute)
	e.event(executor.JobEvent{Type: executor.JobExited, Job: "ok", Attempt: 1, Node: "n0", ExitCode: 0})
	e.event(executor.JobEvent{Type: executor.JobExited, Job: "bad", Attempt: 1, Node: "n0", ExitCode: 2})

	want := `
# HELP prescient_job_failures_total Jobs failed, by reason: exit_code (the job's own), start_refused (the backend refused its every start), other.
# TYPE prescient_job_failures_total counter
prescient_job_failures_total{reason="exit_code",tier="standard"} 1
# HELP prescient_forecast_p90_covered_total Jobs that succeeded, by whether their run time was within the forecast P90 (covered=true): the P90's coverage is true over all.
# TYPE prescient_forecast_p90_covered_total counter
prescient_forecast_p90_covered_total{covered="true"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "prescient_job_failures_total", "prescient_forecast_p90_covered_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(reg, "prescient_job_wait_seconds"); n != 1 {
		t.Errorf("%d wait series, want 1 (tenant t1, tier standard)", n)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		switch mf.GetName() {
		case "prescient_job_wait_seconds":
			h := mf.GetMetric()[0].GetHistogram()
			if h.GetSampleCount() != 2 || h.GetSampleSum() != 360 {
				t.Errorf("waits: %d of sum %g s, want 2 of 360 s", h.GetSampleCount(), h.GetSampleSum())
			}
		case "prescient_forecast_abs_log_error":
			h := mf.GetMetric()[0].GetHistogram()
			if want := 0.1823; h.GetSampleCount() != 1 || h.GetSampleSum() < want-0.001 || h.GetSampleSum() > want+0.001 {
				t.Errorf("forecast error: %d of sum %g, want one of |ln(50/60)| = %g", h.GetSampleCount(), h.GetSampleSum(), want)
			}
		case "prescient_job_events_total":
			got := map[string]float64{}
			for _, m := range mf.GetMetric() {
				got[m.GetLabel()[1].GetValue()] = m.GetCounter().GetValue() // labels sorted: tier, type
			}
			if got["started"] != 2 || got["finished"] != 1 || got["failed"] != 1 || got["submitted"] != 2 {
				t.Errorf("events %v, want 2 submitted, 2 started, 1 finished, 1 failed", got)
			}
		}
	}
	if _, err := New(e.plane.cfg); err == nil {
		t.Error("a second plane on the same registry: no error")
	}
}
