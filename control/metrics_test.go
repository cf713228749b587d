package control

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/store"
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

	// Every reason and tier, and both coverages, has a series from the
	// start (0 until it happens); these happened once.
	want := map[string]float64{
		`prescient_job_failures_total{reason="exit_code",tier="standard"}`: 1,
		`prescient_job_failures_total{reason="other",tier="standard"}`:     0,
		`prescient_job_failures_total{reason="exit_code",tier="batch"}`:    0,
		`prescient_forecast_p90_covered_total{covered="true"}`:             1,
		`prescient_forecast_p90_covered_total{covered="false"}`:            0,
	}
	got := map[string]float64{}
	counts := map[string]int{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			got[mf.GetName()+"{"+strings.Join(labels, ",")+"}"] = m.GetCounter().GetValue()
			counts[mf.GetName()]++
		}
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	if counts["prescient_job_failures_total"] != 3*len(cluster.Tiers()) || counts["prescient_job_events_total"] != len(store.EventTypes())*len(cluster.Tiers()) {
		t.Errorf("%d failure and %d event series, want one per reason or type and tier from the start", counts["prescient_job_failures_total"], counts["prescient_job_events_total"])
	}
	if n := testutil.CollectAndCount(reg, "prescient_job_wait_seconds"); n != 1 {
		t.Errorf("%d wait series, want 1 (tenant t1, tier standard)", n)
	}
	for _, mf := range mfs {
		switch mf.GetName() {
		case "prescient_job_wait_seconds":
			h := mf.GetMetric()[0].GetHistogram()
			if h.GetSampleCount() != 2 || h.GetSampleSum() != 360 {
				t.Errorf("waits: %d of sum %g s, want 2 of 360 s", h.GetSampleCount(), h.GetSampleSum())
			}
		case "prescient_forecast_abs_log_error":
			var n uint64
			var sum float64
			for _, m := range mf.GetMetric() { // the sources' series start at zero
				n, sum = n+m.GetHistogram().GetSampleCount(), sum+m.GetHistogram().GetSampleSum()
			}
			if want := 0.1823; n != 1 || sum < want-0.001 || sum > want+0.001 {
				t.Errorf("forecast error: %d of sum %g, want one of |ln(50/60)| = %g", n, sum, want)
			}
		case "prescient_job_events_total":
			got := map[string]float64{}
			for _, m := range mf.GetMetric() {
				got[m.GetLabel()[1].GetValue()] += m.GetCounter().GetValue() // labels sorted: tier, type
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
