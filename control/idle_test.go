package control

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/collector"
	"github.com/prescient-sched/prescient/control/advice"
	"github.com/prescient-sched/prescient/control/telemetry"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/service"
	"github.com/prescient-sched/prescient/store"
)

// idleScene starts two one-GPU jobs on a 4-GPU node: "busy" (P50 30
// minutes) and "stuck" (P50 10 hours), and returns the UUIDs of their GPUs.
func idleScene(t *testing.T, e *env) (busy, stuck string) {
	t.Helper()
	e.submit("busy", spec(1, 30*time.Minute))
	e.submit("stuck", spec(1, 10*time.Hour))
	e.plane.cycle(e.ctx)
	uuid := map[cluster.GPURef]string{}
	for _, g := range e.fleet.Nodes[0].GPUs {
		uuid[cluster.GPURef{Node: "n0", Index: g.Index}] = g.UUID
	}
	for _, id := range []cluster.JobID{"busy", "stuck"} {
		e.event(executor.JobEvent{Type: executor.JobStarted, Job: id, Attempt: 1, Node: "n0"})
		pl, err := e.store.GetPlacement(e.ctx, id)
		if err != nil || len(pl.Allocations) != 1 {
			t.Fatalf("placement of %s: %+v (%v)", id, pl, err)
		}
		if id == "busy" {
			busy = uuid[pl.Allocations[0].GPU]
		} else {
			stuck = uuid[pl.Allocations[0].GPU]
		}
	}
	return busy, stuck
}

// utilSamples are a minute's utilization samples of the four GPUs from
// from for n minutes: the busy job's GPU at 90%, the others at 0%.
func utilSamples(from time.Time, n int, busy string) []collector.Sample {
	var out []collector.Sample
	for m := range n {
		for i, u := range []string{"GPU-a", "GPU-b", "GPU-c", "GPU-d"} {
			util := 0.0
			if u == busy {
				util = 90
			}
			out = append(out, gpuSample(u, i, from.Add(time.Duration(m)*time.Minute+10*time.Second), util, 100, 0))
		}
	}
	return out
}

func TestIdleForecastCombinesJobsQueueAndTelemetry(t *testing.T) {
	e := newEnv(t, uuidFleet(), nil)
	backends := telemetryBackends(t, e.store)
	busy, stuck := idleScene(t, e)
	batch := utilSamples(t0, 60, busy)
	e.clock.Advance(60 * time.Minute)
	for name, b := range backends {
		t.Run(name, func(t *testing.T) {
			if err := b.sink.Write(e.ctx, batch); err != nil {
				t.Fatal(err)
			}
			e.plane.readTelemetry(b.query) // a copy of the utilization of its own
			f, err := e.plane.IdleForecast(e.ctx, service.IdleQuery{})
			if err != nil {
				t.Fatal(err)
			}
			if len(f.LeadsS) != 24 || f.LeadsS[0] != 300 || len(f.GPUs) != 4 || f.TelemetryGPUs != 4 || f.ModelVersion != 0 || f.ThresholdPct != 5 {
				t.Fatalf("leads %v, %d GPUs, %d with telemetry, model %d, threshold %g", f.LeadsS, len(f.GPUs), f.TelemetryGPUs, f.ModelVersion, f.ThresholdPct)
			}
			// The stuck job's GPU has been idle for the hour it ran; the
			// busy one's not at all.
			if len(f.IdleJobs) != 1 || f.IdleJobs[0].Job != "stuck" || f.IdleJobs[0].IdleForS < 55*60 {
				t.Errorf("idle jobs %+v, want stuck idle for about an hour", f.IdleJobs)
			}
			for _, g := range f.GPUs {
				uuid := e.fleet.Nodes[0].GPUs[g.Index].UUID
				switch uuid {
				case busy:
					// P50 30 minutes, P90 45, and it has run an hour: past
					// its P90, it is still expected to end soon but not now.
					if g.Probability[0] >= 0.5 || g.Probability[23] <= g.Probability[0] {
						t.Errorf("busy job's GPU: %v, want unlikely idle now and likelier later", g.Probability)
					}
				case stuck:
					if g.Probability[23] > 0.05 {
						t.Errorf("stuck job's GPU (10 hours to go): %v, want not idle within 2 hours", g.Probability)
					}
				default:
					if g.Probability[0] != 1 || len(g.Windows) != 1 || !g.Windows[0].End.Equal(t0.Add(3*time.Hour)) {
						t.Errorf("free GPU %s: %v windows %+v, want idle throughout", uuid, g.Probability, g.Windows)
					}
				}
			}
			if len(f.Pools) != 1 || f.Pools[0].ID != "n0" || f.Pools[0].GPUs != 4 || f.Pools[0].Expected[0] < 2 || f.Pools[0].Expected[0] > 2.5 {
				t.Errorf("pools %+v, want n0 with about 2 idle GPUs now", f.Pools)
			}
		})
	}
	// Queued demand takes the free GPUs.
	e.submit("next", spec(2, time.Hour))
	f, err := e.plane.IdleForecast(e.ctx, service.IdleQuery{Horizon: time.Hour, Step: 10 * time.Minute, Node: "n0"})
	if err != nil {
		t.Fatal(err)
	}
	// Two GPUs free now and the busy job's within minutes, less the two
	// queued: one idle GPU by the end of the hour, less before.
	if c := f.Pools[0].Expected; f.QueuedGPUs != 2 || len(c) != 6 || c[5] < 0.95 || c[5] > 1.05 || c[0] >= c[5] {
		t.Errorf("with 2 GPUs queued: queued %g, expected idle %v; want the two free GPUs taken, one left by the end", f.QueuedGPUs, c)
	}
	// A pool or node that is not there, and bad queries.
	if _, err := e.plane.IdleForecast(e.ctx, service.IdleQuery{Pool: "nope"}); !errors.Is(err, service.ErrNotFound) {
		t.Errorf("unknown pool: %v, want ErrNotFound", err)
	}
	for _, q := range []service.IdleQuery{{Step: time.Second}, {Horizon: 48 * time.Hour}, {Horizon: 24 * time.Hour, Step: time.Minute}, {MinProbability: 2}} {
		if _, err := e.plane.IdleForecast(e.ctx, q); !errors.Is(err, service.ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", q, err)
		}
	}
}

// idleCycles runs n plan cycles a minute apart, each waiting for the
// utilization read it started.
func idleCycles(t *testing.T, e *env, n int) {
	t.Helper()
	for range n {
		e.plane.cycle(e.ctx)
		e.plane.idleJobs.Wait()
		e.clock.Advance(telemetry.ReadEvery)
	}
}

func TestAJobHoldingIdleGPUsIsRecommendedOnceAndDismissedWhenBusy(t *testing.T) {
	// A store that can go away: the plane keeps what it read meanwhile.
	var away outage
	e := newEnv(t, uuidFleet(), func(c *Config) { c.Telemetry = &away })
	away.TelemetryStore = collector.NewEmbeddedSink(e.store)
	busy, stuck := idleScene(t, e)
	sink := collector.NewEmbeddedSink(e.store)
	if err := sink.Write(e.ctx, utilSamples(t0, 20, busy)); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(20 * time.Minute)
	idleRecs := func() []store.Recommendation {
		t.Helper()
		recs, err := e.store.ListRecommendations(e.ctx, time.Time{}, 100)
		if err != nil {
			t.Fatal(err)
		}
		var out []store.Recommendation
		for _, r := range recs {
			if r.Kind == advice.Idle {
				out = append(out, r)
			}
		}
		return out
	}
	// The first cycle reads the utilization; the next recommends.
	idleCycles(t, e, 3)
	recs := idleRecs()
	if len(recs) != 1 || recs[0].JobID != "stuck" || recs[0].Status != store.RecommendationOpen {
		t.Fatalf("idle recommendations %+v, want one open for stuck", recs)
	}
	// The telemetry store goes away for ten minutes: what was seen last
	// stands, nothing is dismissed or recorded again.
	away.down.Store(true)
	idleCycles(t, e, 10)
	if recs := idleRecs(); len(recs) != 1 || recs[0].Status != store.RecommendationOpen {
		t.Fatalf("during a telemetry outage: %+v, want the one recommendation still open", recs)
	}
	away.down.Store(false)
	if err := sink.Write(e.ctx, utilSamples(t0.Add(20*time.Minute), 13, busy)); err != nil { // the outage's minutes, as the collector's spool sends them
		t.Fatal(err)
	}
	// Busy again: the recommendation is dismissed.
	var again []collector.Sample
	for _, s := range utilSamples(t0.Add(33*time.Minute), 5, stuck) {
		if s.DeviceInfo.UUID == stuck {
			again = append(again, s)
		}
	}
	if err := sink.Write(e.ctx, again); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(3 * time.Minute)
	idleCycles(t, e, 2)
	if recs := idleRecs(); len(recs) != 1 || recs[0].Status != store.RecommendationDismissed {
		t.Fatalf("after the job got busy: %+v, want it dismissed", recs)
	}
}

// On Kubernetes the backend names no GPU (the device plugin picks a pod's
// GPUs): a job's GPUs are those its processes were sampled on, and a job
// holding idle GPUs is recommended as with the agent backend. With idle
// recommendations off the idle forecast still reads the jobs' GPUs.
func TestAJobWhoseGPUsTheBackendDoesNotNameIsFoundByItsProcesses(t *testing.T) {
	for _, tc := range []struct {
		name     string
		after    time.Duration
		wantRecs []string
	}{
		{"embedded", 0, []string{"stuck open"}},
		{"influxdb", 0, []string{"stuck open"}},
		{"embedded, idle recommendations off", -1, nil},
	} {
		name, _, _ := strings.Cut(tc.name, ",")
		t.Run(tc.name, func(t *testing.T) {
			var b telemetryBackend
			e := newEnv(t, fleetOf(1, 4), func(c *Config) {
				b = telemetryBackends(t, c.Store)[name]
				c.Telemetry, c.IdleJobAfter = b.query, tc.after
			})
			e.submit("busy", spec(1, 30*time.Minute))
			e.submit("stuck", spec(1, 10*time.Hour))
			e.plane.cycle(e.ctx)
			for _, id := range []cluster.JobID{"busy", "stuck"} {
				e.event(executor.JobEvent{Type: executor.JobStarted, Job: id, Attempt: 1, Node: "n0"})
			}
			// The GPUs' samples name them by UUID, whatever Prescient's
			// indices: busy's process runs on GPU-d at 90%, stuck's on
			// GPU-b, idle.
			var samples []collector.Sample
			for _, s := range utilSamples(t0, 20, "GPU-d") {
				switch s.DeviceInfo.UUID {
				case "GPU-d":
					s.Processes = []collector.ProcessSample{{PID: 10, JobID: "busy", MemUsedBytes: 1 << 30}}
				case "GPU-b":
					s.Processes = []collector.ProcessSample{{PID: 20, JobID: "stuck", MemUsedBytes: 1 << 30}}
				}
				samples = append(samples, s)
			}
			if err := b.sink.Write(e.ctx, samples); err != nil {
				t.Fatal(err)
			}
			e.clock.Advance(20 * time.Minute)
			idleCycles(t, e, 3)
			recs, err := e.store.ListRecommendations(e.ctx, time.Time{}, 100)
			if err != nil {
				t.Fatal(err)
			}
			var idle []string
			for _, r := range recs {
				if r.Kind == advice.Idle {
					idle = append(idle, string(r.JobID)+" "+string(r.Status))
				}
			}
			if !slices.Equal(idle, tc.wantRecs) {
				t.Errorf("idle recommendations %v, want %v", idle, tc.wantRecs)
			}
			// The idle forecast reads the two jobs' GPUs by their
			// processes' UUIDs too (the free ones stay unread).
			f, err := e.plane.IdleForecast(e.ctx, service.IdleQuery{})
			if err != nil {
				t.Fatal(err)
			}
			if f.TelemetryGPUs != 2 || len(f.IdleJobs) != 1 || f.IdleJobs[0].Job != "stuck" || f.IdleJobs[0].IdleForS < 15*60 {
				t.Errorf("idle forecast: %d GPUs with telemetry, idle jobs %+v; want 2, and stuck idle for about 20 minutes", f.TelemetryGPUs, f.IdleJobs)
			}
		})
	}
}

// With a power cap price, autopilot asks the node to cap a wide job's
// GPUs, records the cap with the placement, and asks again after a
// restart.
func TestPowerCapsReachTheBackendAndSurviveARestart(t *testing.T) {
	e := newEnv(t, fleetOf(1, 8), func(c *Config) { c.PowerCapPrice = 10 })
	e.submit("wide", spec(8, 2*time.Hour))
	e.plane.cycle(e.ctx)
	starts := e.backend.of("start")
	if len(starts) != 1 {
		t.Fatalf("%d starts, want 1", len(starts))
	}
	f := starts[0].a.PowerLimitFraction
	if !(f > 0 && f < 1) {
		t.Fatalf("an 8-GPU job at price 10: power limit fraction %g, want a cap", f)
	}
	pl, err := e.store.GetPlacement(e.ctx, "wide")
	if err != nil || pl.PowerLimitFraction != f {
		t.Fatalf("placement %+v (%v), want the cap %g recorded", pl, err, f)
	}
	e.restart() // not confirmed: the start is sent again, with its cap
	if err := e.plane.recover(e.ctx); err != nil {
		t.Fatal(err)
	}
	starts = e.backend.of("start")
	if last := starts[len(starts)-1]; last.job != "wide" || last.a.PowerLimitFraction != f {
		t.Errorf("resent start %+v, want wide with the cap %g", last, f)
	}
	if _, err := New(Config{Store: e.store, Nodes: service.StaticFleet{Fleet: e.fleet}, Backend: e.backend, Forecaster: labelForecaster{},
		Mode: service.ModeAutopilot, PowerCapPrice: -1}); err == nil {
		t.Error("a negative power cap price was accepted")
	}
}

// The fleet's sharing rule reaches the placement: shares of two tenants
// take one GPU together only when the fleet allows it.
func TestTheFleetsSharingRuleReachesThePlacement(t *testing.T) {
	for _, allow := range []bool{false, true} {
		fleet := fleetOf(1, 1)
		fleet.AllowCrossTenantSharing = allow
		e := newEnv(t, fleet, nil)
		for i, tenant := range []string{"t1", "t2"} {
			s := spec(1, time.Hour)
			s.Tenant, s.GPUMilli = tenant, 400
			e.submit(fmt.Sprintf("share%d", i), s)
		}
		e.plane.cycle(e.ctx)
		if want := map[bool]int{false: 1, true: 2}[allow]; len(e.backend.of("start")) != want {
			t.Errorf("cross-tenant sharing %v: %d of the two tenants' shares started on the one GPU, want %d", allow, len(e.backend.of("start")), want)
		}
	}
}

// outage is a telemetry store that does not answer while down.
type outage struct {
	collector.TelemetryStore
	down atomic.Bool
}

func (o *outage) Query(ctx context.Context, q collector.SeriesQuery) ([]collector.Series, error) {
	if o.down.Load() {
		return nil, errors.New("connection refused")
	}
	return o.TelemetryStore.Query(ctx, q)
}

// blockingTelemetry answers through query once released; entered is
// closed when the first query arrives.
type blockingTelemetry struct {
	query            collector.TelemetryStore
	entered, release chan struct{}
	once             *sync.Once
}

func (b blockingTelemetry) Query(ctx context.Context, q collector.SeriesQuery) ([]collector.Series, error) {
	b.once.Do(func() { close(b.entered) })
	select {
	case <-b.release:
		return b.query.Query(ctx, q)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// A forecast asked while a slow utilization read is under way does not
// wait for it: it answers from the jobs and the queue, and the read's
// samples serve the next one.
func TestAnIdleForecastDoesNotWaitForASlowUtilizationRead(t *testing.T) {
	e := newEnv(t, uuidFleet(), nil)
	sink := collector.NewEmbeddedSink(e.store)
	busy, _ := idleScene(t, e)
	if err := sink.Write(e.ctx, utilSamples(t0, 60, busy)); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(60 * time.Minute)
	slow := blockingTelemetry{query: sink, entered: make(chan struct{}), release: make(chan struct{}), once: &sync.Once{}}
	e.plane.readTelemetry(slow)
	done := make(chan bool)
	go func() {
		_, read := e.plane.util.Read(e.ctx, e.clock.Now(), 5, nil)
		done <- read
	}()
	<-slow.entered
	answered := make(chan service.IdleForecast)
	go func() {
		f, err := e.plane.IdleForecast(e.ctx, service.IdleQuery{})
		if err != nil {
			t.Error(err)
		}
		answered <- f
	}()
	select {
	case f := <-answered:
		if f.TelemetryGPUs != 0 || len(f.GPUs) != 4 {
			t.Errorf("during the read: %d GPUs with telemetry of %d, want none yet", f.TelemetryGPUs, len(f.GPUs))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the forecast waited for the utilization read")
	}
	close(slow.release)
	if !<-done {
		t.Fatal("the slow read failed")
	}
	f, err := e.plane.IdleForecast(e.ctx, service.IdleQuery{})
	if err != nil || f.TelemetryGPUs != 4 {
		t.Fatalf("after the read: %d GPUs with telemetry (%v), want 4", f.TelemetryGPUs, err)
	}
}

// A job whose GPUs the backend does not name is read by the GPUs its
// current attempt's processes ran on: once it is restarted elsewhere the
// earlier attempt's GPUs, still in the lookback, are not taken for it.
func TestAJobsGPUsByItsProcessesAreItsCurrentAttempts(t *testing.T) {
	e := newEnv(t, fleetOf(1, 4), func(c *Config) { c.Telemetry = collector.NewEmbeddedSink(c.Store) })
	start := e.clock.Now()
	e.submit("j", spec(2, 10*time.Hour))
	e.plane.cycle(e.ctx)
	e.event(executor.JobEvent{Type: executor.JobStarted, Job: "j", Attempt: 1, Node: "n0"})
	// Attempt 1's processes run on GPU-a and GPU-b for 27 minutes,
	// attempt 2's on GPU-c and GPU-d from minute 28.
	var samples []collector.Sample
	for _, s := range utilSamples(start, 40, "") {
		m := int(s.Time.Sub(start) / time.Minute)
		switch u := s.DeviceInfo.UUID; {
		case m < 28 && (u == "GPU-a" || u == "GPU-b"), m >= 28 && (u == "GPU-c" || u == "GPU-d"):
			s.Processes = []collector.ProcessSample{{PID: 10, JobID: "j", MemUsedBytes: 1 << 30}}
		}
		samples = append(samples, s)
	}
	if err := collector.NewEmbeddedSink(e.store).Write(e.ctx, samples); err != nil {
		t.Fatal(err)
	}
	found := func() []string {
		var out []string
		for _, u := range e.plane.idleJobs.UUIDsByProcess() {
			out = append(out, u)
		}
		slices.Sort(out)
		return out
	}
	e.clock.Advance(start.Add(20 * time.Minute).Sub(e.clock.Now()))
	idleCycles(t, e, 1)
	if got := found(); !slices.Equal(got, []string{"GPU-a", "GPU-b"}) {
		t.Fatalf("attempt 1's GPUs %v, want [GPU-a GPU-b]", got)
	}
	e.clock.Advance(start.Add(27*time.Minute + 30*time.Second).Sub(e.clock.Now()))
	e.event(executor.JobEvent{Type: executor.JobLost, Job: "j", Attempt: 1, Node: "n0", Message: "pod evicted"})
	e.plane.cycle(e.ctx)
	e.clock.Advance(start.Add(28 * time.Minute).Sub(e.clock.Now()))
	e.event(executor.JobEvent{Type: executor.JobStarted, Job: "j", Attempt: 2, Node: "n0"})
	e.clock.Advance(start.Add(33 * time.Minute).Sub(e.clock.Now())) // attempt 1's last samples are 6 minutes old: in the lookback
	idleCycles(t, e, 2)
	if got := found(); !slices.Equal(got, []string{"GPU-c", "GPU-d"}) {
		t.Errorf("attempt 2's GPUs %v, want [GPU-c GPU-d]: attempt 1's are not its", got)
	}
}

// A gang's GPUs found by its processes are paired with its GPUs node by
// node: which of a node's is which is not known, but not across nodes.
func TestAGangsGPUsByItsProcessesArePairedNodeByNode(t *testing.T) {
	e := newEnv(t, fleetOf(2, 4), func(c *Config) { c.Telemetry = collector.NewEmbeddedSink(c.Store) })
	start := e.clock.Now()
	g := spec(8, 10*time.Hour)
	g.GangSize = 2
	e.submit("g", g)
	e.plane.cycle(e.ctx)
	for _, n := range []string{"n0", "n1"} {
		e.event(executor.JobEvent{Type: executor.JobStarted, Job: "g", Attempt: 1, Node: n})
	}
	// n1's UUIDs sort before n0's: a pairing in UUID order alone would
	// cross the nodes.
	onNode := map[string]string{"GPU-a": "n1", "GPU-b": "n1", "GPU-c": "n1", "GPU-d": "n1",
		"GPU-w": "n0", "GPU-x": "n0", "GPU-y": "n0", "GPU-z": "n0"}
	var samples []collector.Sample
	for m := range 20 {
		for i, u := range slices.Sorted(maps.Keys(onNode)) {
			s := gpuSample(u, i%4, start.Add(time.Duration(m)*time.Minute+10*time.Second), 0, 100, 0)
			s.Node = onNode[u]
			s.Processes = []collector.ProcessSample{{PID: 10 + i, JobID: "g", MemUsedBytes: 1 << 30}}
			samples = append(samples, s)
		}
	}
	if err := collector.NewEmbeddedSink(e.store).Write(e.ctx, samples); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(20 * time.Minute)
	idleCycles(t, e, 1)
	byRef := e.plane.idleJobs.UUIDsByProcess()
	if len(byRef) != 8 {
		t.Fatalf("the gang's GPUs paired: %v, want all 8", byRef)
	}
	for ref, u := range byRef {
		if onNode[u] != ref.Node {
			t.Errorf("GPU %s paired with %s, sampled on %s", ref, u, onNode[u])
		}
	}
}
