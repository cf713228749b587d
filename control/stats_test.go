package control

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/collector"
	"github.com/prescient-sched/prescient/collector/nvml"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/internal/influxtest"
	"github.com/prescient-sched/prescient/service"
	"github.com/prescient-sched/prescient/store"
)

// uuidFleet is one 4-GPU node whose GPUs have UUIDs, as telemetry names them.
func uuidFleet() *cluster.Fleet {
	f := fleetOf(1, 4)
	for i := range f.Nodes[0].GPUs {
		f.Nodes[0].GPUs[i].UUID = "GPU-" + string(rune('a'+i))
	}
	return f
}

// telemetryBackend is a place the collector writes samples and the plane
// reads them back.
type telemetryBackend struct {
	sink  collector.Sink
	query collector.TelemetryStore
}

// telemetryBackends are the embedded store and a real InfluxDB.
func telemetryBackends(t *testing.T, st *store.Store) map[string]telemetryBackend {
	t.Helper()
	embedded := collector.NewEmbeddedSink(st)
	srv := influxtest.Shared(t)
	bucket := fmt.Sprintf("control_%d/autogen", time.Now().UnixNano())
	if _, err := collector.EnsureBucket(context.Background(), http.DefaultClient, srv.URL, "", bucket); err != nil {
		t.Fatal(err)
	}
	sink, err := collector.NewInfluxSink(collector.InfluxOptions{URL: srv.URL, Bucket: bucket})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sink.Close() })
	q, err := collector.NewInfluxQuery(collector.InfluxOptions{URL: srv.URL, Bucket: bucket})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.Close)
	return map[string]telemetryBackend{"embedded": {sink: embedded, query: embedded}, "influxdb": {sink: sink, query: q}}
}

// gpuSample is a sample of one GPU of node n0 with every field read.
func gpuSample(uuid string, index int, at time.Time, utilPct, powerW float64, memUsed uint64) collector.Sample {
	return collector.Sample{Time: at, Node: "n0", DeviceInfo: nvml.DeviceInfo{UUID: uuid, Index: index, Model: "A100-80GB"},
		DeviceSample: nvml.DeviceSample{UtilGPUPct: utilPct, PowerW: powerW, MemUsedBytes: memUsed, MemTotalBytes: 80 << 30}}
}

func TestStatsFromHistoryAndTelemetry(t *testing.T) {
	e := newEnv(t, uuidFleet(), func(c *Config) {
		c.Prices = Prices{PerGPUHour: 2, PerKWh: 0.5, Currency: "EUR"}
	})
	backends := telemetryBackends(t, e.store)
	a := spec(1, 50*time.Minute)
	a.Labels[WorkloadLabel] = "train"
	e.submit("a", a)
	b := spec(2, time.Hour)
	b.Tenant = "t2"
	e.submit("b", b)
	e.clock.Advance(10 * time.Minute)
	e.plane.cycle(e.ctx) // both start after 10 minutes in the queue
	e.clock.Advance(time.Hour)
	e.event(executor.JobEvent{Type: executor.JobExited, Job: "a", Attempt: 1})
	e.event(executor.JobEvent{Type: executor.JobExited, Job: "b", Attempt: 1, ExitCode: 3, Message: "oom"})
	e.clock.Advance(50 * time.Minute) // now t0 + 2h
	batch := []collector.Sample{gpuSample("GPU-a", 0, t0.Add(40*time.Minute), 80, 300, 0), gpuSample("GPU-b", 1, t0.Add(40*time.Minute), 60, 300, 0)}
	for name, b := range backends {
		t.Run(name, func(t *testing.T) {
			if err := b.sink.Write(e.ctx, batch); err != nil {
				t.Fatal(err)
			}
			e.plane.cfg.Telemetry = b.query
			checkStats(t, e)
		})
	}
}

func checkStats(t *testing.T, e *env) {
	st, err := e.plane.Stats(e.ctx, service.StatsQuery{Window: 2 * time.Hour, Step: 30 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if !st.From.Equal(t0) || len(st.Series) != 4 {
		t.Fatalf("window from %s with %d points, want from t0 with 4", st.From, len(st.Series))
	}
	// Both run from 10m to 70m on 3 GPUs: [0,30m) 20 of 30 minutes,
	// [30m,60m) all of it, [60m,90m) 10 minutes, [90m,120m) nothing.
	wantBusy := []float64{2, 3, 1, 0}
	for i, w := range wantBusy {
		if got := st.Series[i].GPUsBusy; got < w-1e-9 || got > w+1e-9 {
			t.Errorf("step %d: %g GPUs busy, want %g", i, got, w)
		}
	}
	if p := st.Series[1]; p.UtilizationPct != 70 || p.PowerW != 600 {
		t.Errorf("step 1: utilization %g%%, power %gW; want 70%% and 600W", p.UtilizationPct, p.PowerW)
	}
	if st.Completed != 1 || st.Failed != 1 || len(st.Failures) != 1 || st.Failures[0].Reason != "exited with code 3: oom" {
		t.Errorf("completed %d failed %d failures %+v", st.Completed, st.Failed, st.Failures)
	}
	if len(st.WaitByTenant) != 2 || st.WaitByTenant[0].Key != "t1" || st.WaitByTenant[0].MeanS != 600 || st.WaitByTenant[0].Jobs != 1 {
		t.Errorf("wait by tenant %+v, want 600s each", st.WaitByTenant)
	}
	if len(st.WaitByTier) != 1 || st.WaitByTier[0].Key != "standard" || st.WaitByTier[0].Jobs != 2 {
		t.Errorf("wait by tier %+v", st.WaitByTier)
	}
	if len(st.Cost) != 2 || st.Cost[0].Workload != "t1/train" || st.Cost[1].Workload != "t2" {
		t.Fatalf("cost %+v, want t1/train and t2", st.Cost)
	}
	if c := st.Cost[0]; c.GPUHours != 1 || c.EnergyKWh != 0.3 || c.Cost != 2.15 || c.Currency != "EUR" {
		t.Errorf("t1/train: %+v, want 1 GPU-h, 0.3 kWh at 300W, 2.15 EUR", c)
	}
	if len(st.Forecasts) != 1 || st.Forecasts[0].Job != "a" || st.Forecasts[0].DurationP50S != 3000 || st.Forecasts[0].ActualS != 3600 {
		t.Errorf("forecast checks %+v, want a: 3000s forecast against 3600s", st.Forecasts)
	}
	for _, q := range []service.StatsQuery{{Window: -time.Hour}, {Step: time.Millisecond}, {Window: time.Hour, Step: 2 * time.Hour}, {Window: 24 * time.Hour, Step: time.Second}} {
		if _, err := e.plane.Stats(e.ctx, q); !errors.Is(err, service.ErrInvalid) {
			t.Errorf("Stats(%+v) = %v, want ErrInvalid", q, err)
		}
	}
}

func TestFleetShowsAllocationsAndLatestTelemetry(t *testing.T) {
	e := newEnv(t, uuidFleet(), nil)
	e.submit("a", spec(2, time.Hour))
	e.submit("b", spec(4, time.Hour))
	e.plane.cycle(e.ctx)
	batch := []collector.Sample{gpuSample("GPU-a", 0, t0.Add(-time.Minute), 95, 350, 1<<30), gpuSample("GPU-b", 1, t0.Add(-time.Hour), 5, 60, 0)}
	for name, b := range telemetryBackends(t, e.store) {
		t.Run(name, func(t *testing.T) {
			if err := b.sink.Write(e.ctx, batch); err != nil {
				t.Fatal(err)
			}
			e.plane.cfg.Telemetry = b.query
			checkFleet(t, e)
		})
	}
}

func checkFleet(t *testing.T, e *env) {
	fs, err := e.plane.Fleet(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if fs.GPUs != 4 || fs.GPUsBusy != 2 || fs.Running != 1 || fs.Queued != 1 || fs.Mode != service.ModeAutopilot || len(fs.Nodes) != 1 {
		t.Fatalf("fleet %+v", fs)
	}
	busy := 0
	for _, g := range fs.Nodes[0].GPUs {
		if g.AllocatedMilli == cluster.MilliGPU && len(g.Jobs) == 1 && g.Jobs[0] == "a" {
			busy++
		}
		switch g.Index {
		case 0:
			if g.UtilizationPct == nil || *g.UtilizationPct != 95 || *g.MemoryUsedBytes != 1<<30 || *g.PowerW != 350 {
				t.Errorf("gpu 0 telemetry: %+v", g)
			}
		case 1:
			if g.UtilizationPct != nil {
				t.Errorf("gpu 1 shows a sample an hour old: %v", *g.UtilizationPct)
			}
		}
	}
	if busy != 2 {
		t.Errorf("%d GPUs held by a, want 2: %+v", busy, fs.Nodes[0].GPUs)
	}
}
