package control

import (
	"fmt"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/collector"
	"github.com/prescient-sched/prescient/collector/nvml"
	"github.com/prescient-sched/prescient/control/advice"
	"github.com/prescient-sched/prescient/control/lending"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/executor/lend"
	"github.com/prescient-sched/prescient/models/idle"
	"github.com/prescient-sched/prescient/service"
	"github.com/prescient-sched/prescient/store"
)

// lendingFleet is a training node n0 and two inference nodes inf-0 and
// inf-1, 4 GPUs each, the inference GPUs with UUIDs.
func lendingFleet() *cluster.Fleet {
	f := fleetOf(3, 4)
	for i := 1; i < 3; i++ {
		n := &f.Nodes[i]
		n.Name = fmt.Sprintf("inf-%d", i-1)
		n.Labels = map[string]string{cluster.PoolLabel: "inference"}
		for g := range n.GPUs {
			n.GPUs[g].UUID = fmt.Sprintf("GPU-%s-%d", n.Name, g)
		}
	}
	return f
}

// inferenceSamples are the inference GPUs' samples of minutes from to
// to (exclusive): the first busy0 GPUs of inf-0 and busy1 of inf-1 at 60%
// utilization, the others at 0.
func inferenceSamples(f *cluster.Fleet, from, to time.Time, busy0, busy1 int) []collector.Sample {
	var out []collector.Sample
	for at := from; at.Before(to); at = at.Add(time.Minute) {
		for i, busy := range map[int]int{1: busy0, 2: busy1} {
			n := &f.Nodes[i]
			for k, g := range n.GPUs {
				util := 0.0
				if k < busy {
					util = 60
				}
				out = append(out, collector.Sample{Time: at.Add(10 * time.Second), Node: n.Name, DeviceInfo: nvml.DeviceInfo{UUID: g.UUID, Index: g.Index, Model: g.Model},
					DeviceSample: nvml.DeviceSample{UtilGPUPct: util, PowerW: 100, MemTotalBytes: 80 << 30}})
			}
		}
	}
	return out
}

// lendingEnv is an env whose inference pool lends on the reactive rule
// (no idle model), reading a real InfluxDB, with the lifecycle events it
// posts.
func lendingEnv(t *testing.T, mode service.Mode) (*env, collector.Sink, *recordingNotifier) {
	return lendingEnvOf(t, mode, lendingFleet())
}

// lendingEnvOf is lendingEnv on fleet.
func lendingEnvOf(t *testing.T, mode service.Mode, fleet *cluster.Fleet) (*env, collector.Sink, *recordingNotifier) {
	e := newEnv(t, fleet, nil)
	b := telemetryBackends(t, e.store)["influxdb"]
	rec := &recordingNotifier{}
	e.mod = func(c *Config) {
		c.Mode, c.Telemetry, c.Notifier = mode, b.query, rec
		c.Lending = &lending.Config{Pools: []string{"inference"}, Recent: lend.DefaultRecent}
	}
	e.restart()
	return e, b.sink, rec
}

// lendCycle lets a background read of the pools under way finish, plans,
// lets the read it starts finish, and plans again to apply what it
// decided.
func (e *env) lendCycle() {
	e.t.Helper()
	e.plane.lending.Wait()
	e.plane.cycle(e.ctx)
	e.plane.lending.Wait()
	e.plane.cycle(e.ctx)
}

func (e *env) loan(node string) *service.NodeLoan {
	e.t.Helper()
	fs, err := e.plane.Fleet(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, n := range fs.Nodes {
		if n.Name == node {
			return n.Loan
		}
	}
	e.t.Fatalf("node %s not in the fleet", node)
	return nil
}

func (e *env) placedOn(id string) string {
	e.t.Helper()
	pl, err := e.store.GetPlacement(e.ctx, cluster.JobID(id))
	if err != nil || len(pl.Allocations) == 0 {
		return ""
	}
	return pl.Allocations[0].GPU.Node
}

// Recent 0 is the idle model alone, as simulate's --lend-recent 0: with
// no model published, nothing is lent, however idle the pool.
func TestWithRecentZeroAndNoIdleModelNothingIsLent(t *testing.T) {
	e, sink, _ := lendingEnv(t, service.ModeAutopilot)
	mod := e.mod
	e.mod = func(c *Config) {
		mod(c)
		c.Lending.Recent = 0
	}
	e.restart()
	now := t0.Add(time.Hour)
	if err := sink.Write(e.ctx, inferenceSamples(e.fleet, t0, now, 0, 0)); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(now.Sub(e.clock.Now()))
	e.lendCycle()
	for _, n := range []string{"inf-0", "inf-1"} {
		if l := e.loan(n); l == nil || l.State != "serving" {
			t.Errorf("%s: %+v, want serving: no model, and Recent 0 is the model alone", n, l)
		}
	}
}

func TestAnIdleInferenceNodeIsLentAndTakenBackWhenTheDemandReturns(t *testing.T) {
	e, sink, rec := lendingEnv(t, service.ModeAutopilot)
	e.submit("a", spec(4, 10*time.Hour))
	e.plane.cycle(e.ctx)
	if on := e.placedOn("a"); on != "n0" {
		t.Fatalf("a placed on %q, want n0: the inference nodes take no training unless lent", on)
	}
	b := spec(4, 10*time.Hour)
	b.Checkpointable = true
	e.submit("b", b)
	// An hour of telemetry: inf-0 serves on 2 GPUs, inf-1 idles. 6 GPUs
	// idle less a GPU of headroom: one node may go.
	now := t0.Add(time.Hour)
	if err := sink.Write(e.ctx, inferenceSamples(e.fleet, t0, now, 2, 0)); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(now.Sub(e.clock.Now()))
	e.lendCycle()
	if l := e.loan("inf-1"); l == nil || l.State != "lent" || !l.Usable.Equal(now.Add(time.Minute)) {
		t.Fatalf("inf-1: %+v, want lent, usable after a minute's handover", l)
	}
	if l := e.loan("inf-0"); l == nil || l.State != "serving" {
		t.Fatalf("inf-0: %+v, want serving: its GPUs are busy", l)
	}
	if on := e.placedOn("b"); on != "" {
		t.Fatalf("b placed on %s during the handover", on)
	}
	// A restart keeps the loan; after the handover b runs on inf-1.
	e.restart()
	now = now.Add(time.Minute)
	if err := sink.Write(e.ctx, inferenceSamples(e.fleet, now.Add(-time.Minute), now, 2, 0)); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(now.Sub(e.clock.Now()))
	e.lendCycle()
	if on := e.placedOn("b"); on != "inf-1" {
		t.Fatalf("b placed on %q, want inf-1, lent", on)
	}
	e.event(executor.JobEvent{Type: executor.JobStarted, Job: "b", Attempt: 1, Node: "inf-1"})
	// The demand comes back: every GPU the service still holds is busy,
	// so inf-1 is taken back at once and b is told to checkpoint and stop
	// within the 2-minute notice.
	now = now.Add(time.Minute)
	if err := sink.Write(e.ctx, inferenceSamples(e.fleet, now.Add(-time.Minute), now, 4, 0)); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(now.Sub(e.clock.Now()))
	e.lendCycle()
	if l := e.loan("inf-1"); l == nil || l.State != "returning" || !l.Since.Equal(now) {
		t.Fatalf("inf-1: %+v, want returning since %s", l, now)
	}
	if cps := e.backend.of("checkpoint"); len(cps) != 1 || cps[0].job != "b" {
		t.Fatalf("checkpoint requests %+v, want b's", cps)
	}
	if pl, err := e.store.GetPlacement(e.ctx, "b"); err != nil || !pl.StopBy.Equal(now.Add(2*time.Minute)) {
		t.Fatalf("b's placement %+v (%v), want it stopping by the notice", pl, err)
	}
	if len(e.backend.of("stop")) != 0 {
		t.Fatal("b stopped before its notice ran out")
	}
	// Its checkpoint does not land: the notice runs out and it is stopped.
	e.clock.Advance(2 * time.Minute)
	e.plane.cycle(e.ctx)
	if stops := e.backend.of("stop"); len(stops) == 0 || stops[0].job != "b" {
		t.Fatalf("stops %+v, want b's once the notice ran out", stops)
	}
	e.event(executor.JobEvent{Type: executor.JobExited, Job: "b", Attempt: 1, Stopped: true})
	e.plane.cycle(e.ctx)
	if l := e.loan("inf-1"); l == nil || l.State != "serving" {
		t.Fatalf("inf-1: %+v, want serving once b is gone", l)
	}
	if got := e.job("b"); got.State != cluster.StateQueued || e.placedOn("b") != "" {
		t.Errorf("b: %s on %q, want queued again and not placed on an inference node", got.State, e.placedOn("b"))
	}
	var heard []string
	rec.mu.Lock()
	for _, ev := range rec.events {
		if ev.Node != "" {
			heard = append(heard, ev.Type+" "+ev.Node+" "+ev.Pool)
		}
	}
	rec.mu.Unlock()
	if want := "[node_lent inf-1 inference node_returning inf-1 inference node_serving inf-1 inference]"; fmt.Sprint(heard) != want {
		t.Errorf("node events %v, want %s", heard, want)
	}
	loans, err := e.store.Loans(e.ctx)
	if want := []store.LoanSpan{{From: t0.Add(time.Hour), Until: now.Add(2*time.Minute + idle.MaxGap)}}; err != nil || len(loans) != 1 || loans[0].State != "serving" || fmt.Sprint(loans[0].Spans) != fmt.Sprint(want) {
		t.Errorf("stored loans %+v (%v), want inf-1 serving, its loan from %s until 5 minutes after its return", loans, err, t0.Add(time.Hour))
	}
}

// On Kubernetes the nodes' GPUs carry no UUIDs, and the GPUs the
// inference servers (another scheduler's pods) hold are off the nodes as
// the backend lists them: a pool node's GPUs are then those its telemetry
// names it with.
func TestAPoolNodeWithoutGPUUUIDsIsReadByTheNodeItsTelemetryNames(t *testing.T) {
	withUUIDs := lendingFleet()
	fleet := lendingFleet()
	for i, listed := range map[int]int{1: 2, 2: 3} { // inf-0's servers hold 2 GPUs, inf-1's 1
		n := &fleet.Nodes[i]
		n.GPUs = n.GPUs[:listed]
		for g := range n.GPUs {
			n.GPUs[g].UUID = ""
		}
	}
	e, sink, _ := lendingEnvOf(t, service.ModeAutopilot, fleet)
	b := spec(4, 10*time.Hour)
	b.Checkpointable = true
	e.submit("a", spec(4, 10*time.Hour))
	e.submit("b", b)
	// An hour of telemetry of all 4 GPUs of each: inf-0 serves on 2,
	// inf-1 idles. 6 of the pool's 8 GPUs idle less a GPU of headroom:
	// inf-1, all 4 of its GPUs idle, may go.
	now := t0.Add(time.Hour)
	if err := sink.Write(e.ctx, inferenceSamples(withUUIDs, t0, now, 2, 0)); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(now.Sub(e.clock.Now()))
	e.lendCycle()
	if l := e.loan("inf-1"); l == nil || l.State != "lent" {
		t.Fatalf("inf-1: %+v, want lent", l)
	}
	if l := e.loan("inf-0"); l == nil || l.State != "serving" {
		t.Fatalf("inf-0: %+v, want serving: its GPUs are busy", l)
	}
}

func TestTheAdvisorRecommendsLoansAndLendsNothing(t *testing.T) {
	e, sink, _ := lendingEnv(t, service.ModeAdvisor)
	now := t0.Add(time.Hour)
	if err := sink.Write(e.ctx, inferenceSamples(e.fleet, t0, now, 0, 0)); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(now.Sub(e.clock.Now()))
	e.lendCycle()
	recs, err := e.plane.Recommendations(e.ctx, time.Time{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	var lent []string
	for _, r := range recs {
		if r.Kind == advice.Lend && r.Status == "open" {
			lent = append(lent, fmt.Sprint(r.Details["node"]))
		}
	}
	// All 8 GPUs idle for an hour: one node may go, the other keeps the
	// GPU of headroom.
	if fmt.Sprint(lent) != "[inf-1]" {
		t.Errorf("lend recommendations for %v, want inf-1 (%+v)", lent, recs)
	}
	for _, n := range []string{"inf-0", "inf-1"} {
		if l := e.loan(n); l == nil || l.State != "serving" {
			t.Errorf("%s: %+v, want serving: the advisor lends nothing", n, l)
		}
	}
}

// A read before any inference node registered (agents register after the
// plane starts) does not spend the forecast's slot: the pool is forecast
// as soon as its nodes are there.
func TestThePoolIsForecastAsSoonAsItsNodesRegister(t *testing.T) {
	e, sink, _ := lendingEnv(t, service.ModeAutopilot)
	all := e.fleet.Nodes
	e.fleet.Nodes = all[:1] // only the training node so far
	now := t0.Add(time.Hour)
	if err := sink.Write(e.ctx, inferenceSamples(&cluster.Fleet{Nodes: all}, t0, now, 2, 0)); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(now.Sub(e.clock.Now()))
	e.lendCycle()
	e.fleet.Nodes = all
	now = now.Add(time.Minute)
	if err := sink.Write(e.ctx, inferenceSamples(e.fleet, now.Add(-time.Minute), now, 2, 0)); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Minute)
	e.lendCycle()
	if l := e.loan("inf-1"); l == nil || l.State != "lent" {
		t.Errorf("inf-1 a minute after it registered: %+v, want lent", l)
	}
}

// servedModel serves one idle model, as the predictor does once one is
// published.
type servedModel struct{ m *idle.Model }

func (s servedModel) Current() (*idle.Model, int) { return s.m, 1 }

// twoHourModel is an idle model trained on 16 replicas idle for two
// hours from midnight (UTC), busy for the next two, and so on, for four
// days.
func twoHourModel(t *testing.T) *idle.Model {
	t.Helper()
	start := time.Date(2026, 5, 20, 0, 0, 0, 0, time.UTC)
	var grids []idle.Grid
	for r := range 16 {
		g := idle.Grid{ID: fmt.Sprintf("replica-%d", r), Start: start, Step: time.Minute, Idle: make([]float64, 4*24*60)}
		for m := range g.Idle {
			if !busyHour(start.Add(time.Duration(m) * time.Minute)) {
				g.Idle[m] = 1
			}
		}
		grids = append(grids, g)
	}
	cfg := idle.DefaultConfig()
	cfg.Groupings, cfg.OriginEvery = 1, 10*time.Minute
	m, err := idle.Fit(t.Context(), cfg, idle.PoolsFromGrids(grids, cfg.PoolSize, 1), grids, nil)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// busyHour reports whether the two-hour pattern is busy at t: from 02:00
// to 04:00, 06:00 to 08:00, ...
func busyHour(t time.Time) bool { return t.Hour()/2%2 == 1 }

// A served idle model decides the loans live: an inference pool idle
// since 08:00 after two busy hours is lent a node at 08:35, and not at
// 09:45, when the model has learnt that the demand comes back at 10:00;
// the reactive rule alone would lend then too.
func TestAServedIdleModelKeepsANodeFromALoanBeforeTheDemandItForesees(t *testing.T) {
	model := twoHourModel(t)
	lent := func(at time.Duration, m *idle.Model) []string {
		t.Helper()
		e, sink, _ := lendingEnv(t, service.ModeAutopilot)
		if m != nil {
			mod := e.mod
			e.mod = func(c *Config) { mod(c); c.Idle = servedModel{m} }
			e.restart()
		}
		now := t0.Truncate(24 * time.Hour).Add(at)
		for from := now.Add(-4 * time.Hour); from.Before(now); from = from.Add(time.Minute) {
			busy := 0
			if busyHour(from) {
				busy = 4
			}
			if err := sink.Write(e.ctx, inferenceSamples(e.fleet, from, from.Add(time.Minute), busy, busy)); err != nil {
				t.Fatal(err)
			}
		}
		e.clock.Advance(now.Sub(e.clock.Now()))
		e.lendCycle()
		var out []string
		for _, n := range []string{"inf-0", "inf-1"} {
			if l := e.loan(n); l != nil && l.State == "lent" {
				out = append(out, n)
			}
		}
		return out
	}
	if got := lent(8*time.Hour+35*time.Minute, model); len(got) != 1 {
		t.Errorf("the model at 08:35: lent %v, want one node (7 GPUs idle less the headroom)", got)
	}
	if got := lent(9*time.Hour+45*time.Minute, nil); len(got) != 1 {
		t.Errorf("the reactive rule at 09:45: lent %v, want one node", got)
	}
	if got := lent(9*time.Hour+45*time.Minute, model); len(got) != 0 {
		t.Errorf("the model at 09:45: lent %v, want none: it foresees the demand at 10:00", got)
	}
}
