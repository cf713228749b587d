package control

import (
	"math"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/collector"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/store"
)

// A finished job keeps where each attempt ran, its run time, GPU-hours and
// the energy its GPUs drew, read from the power telemetry.
func TestAJobsHistoryOutlivesItsPlacement(t *testing.T) {
	fleet := fleetOf(2, 4)
	for i := range fleet.Nodes {
		for g := range fleet.Nodes[i].GPUs {
			fleet.Nodes[i].GPUs[g].UUID = "GPU-" + fleet.Nodes[i].Name + "-" + string(rune('0'+g))
		}
	}
	e := newEnv(t, fleet, func(c *Config) { c.Telemetry = collector.NewEmbeddedSink(c.Store) })
	e.submit("j1", spec(2, 20*time.Minute))
	e.plane.cycle(e.ctx)
	first := e.backend.of("start")[0].a.Allocations
	e.event(executor.JobEvent{Type: executor.JobStarted, Job: "j1", Attempt: 1, Node: first[0].GPU.Node})

	// 300 W on each of its GPUs, a sample every 10 s for 10 minutes.
	var rows []store.TelemetryRow
	for s := 0; s < 600; s += 10 {
		for _, a := range first {
			rows = append(rows, store.TelemetryRow{Time: t0.Add(time.Duration(s) * time.Second), Node: a.GPU.Node,
				GPUUUID: "GPU-" + a.GPU.Node + "-" + string(rune('0'+a.GPU.Index)), GPUIndex: a.GPU.Index,
				Values: map[string]float64{"power_w": 300}})
		}
	}
	if err := e.store.WriteTelemetry(e.ctx, rows); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(10 * time.Minute)
	e.event(executor.JobEvent{Type: executor.JobLost, Job: "j1", Attempt: 1, Node: first[0].GPU.Node, Message: "node down"})

	got, err := e.plane.Job(e.ctx, "j1")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.History) != 1 {
		t.Fatalf("history %+v, want one attempt", got.History)
	}
	a := got.History[0]
	if a.Attempt != 1 || len(a.Allocations) != 2 || a.Allocations[0].Node != first[0].GPU.Node || a.EndTime == nil ||
		a.EndedBy != string(store.EventRequeued) || a.RunS != 600 || a.GPUHours != 2*600.0/3600 {
		t.Errorf("attempt %+v: want attempt 1 on its 2 GPUs, requeued after 600 s, 1/3 GPU-hour", a)
	}
	// 2 GPUs × 300 W × 600 s = 0.1 kWh.
	if a.EnergyKWh == nil || math.Abs(*a.EnergyKWh-0.1) > 1e-9 || got.EnergyKWh == nil || *got.EnergyKWh != *a.EnergyKWh {
		t.Errorf("energy %v (job %v), unavailable %q: want 0.1 kWh", a.EnergyKWh, got.EnergyKWh, a.EnergyUnavailable)
	}

	// The second attempt runs; no telemetry from it: its energy is
	// unavailable and so is the job's, its run time counts to now.
	e.plane.cycle(e.ctx)
	starts := e.backend.of("start")
	if len(starts) != 2 {
		t.Fatalf("%d starts, want 2", len(starts))
	}
	e.clock.Advance(5 * time.Minute)
	got, err = e.plane.Job(e.ctx, "j1")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.History) != 2 || got.History[1].Attempt != 2 || got.History[1].EndTime != nil || got.History[1].RunS != 300 ||
		got.RunS != 900 || got.History[1].EnergyKWh != nil || got.History[1].EnergyUnavailable == "" || got.EnergyKWh != nil {
		t.Errorf("status %+v\nhistory %+v: want a running second attempt of 300 s, energy unavailable", got, got.History)
	}
	if got.State != cluster.StateRunning {
		t.Errorf("state %s, want running", got.State)
	}
}

func TestEnergyNeedsTelemetryOverMostOfTheAttempt(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	q := collector.SeriesQuery{Start: start.Add(30 * time.Second), End: start.Add(10 * time.Minute), Step: time.Minute}
	pts := func(n int, w float64) []collector.Point {
		var out []collector.Point
		for i := range n {
			t := start.Add(time.Duration(i) * time.Minute)
			if i == 0 {
				t = q.Start
			}
			out = append(out, collector.Point{Time: t, Value: w})
		}
		return out
	}
	// Half a GPU at 400 W for 570 s.
	kwh, why := energyKWh([]collector.Series{{GPU: "a", Points: pts(10, 400)}}, map[string]int{"a": 500}, q)
	if why != "" || math.Abs(kwh-400*570*0.5/3.6e6) > 1e-12 {
		t.Errorf("energy %g %q", kwh, why)
	}
	if _, why := energyKWh([]collector.Series{{GPU: "a", Points: pts(3, 400)}}, map[string]int{"a": 500}, q); why == "" {
		t.Error("telemetry over 3 of 10 minutes gave an energy")
	}
	if _, why := energyKWh(nil, map[string]int{"a": 1000}, q); why == "" {
		t.Error("no telemetry gave an energy")
	}
}
