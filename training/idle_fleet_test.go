package training_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/collector"
	"github.com/prescient-sched/prescient/collector/nvml"
	"github.com/prescient-sched/prescient/datasets"
	"github.com/prescient-sched/prescient/internal/testenv"
	"github.com/prescient-sched/prescient/models/idle"
	"github.com/prescient-sched/prescient/training"
)

// genaiFleet is the GenAI containers' duty cycle as a fleet's collector
// would have recorded it: each container a GPU of a node, its samples
// moved so that the trace ends at end.
func genaiFleet(t *testing.T, end time.Time) []collector.Sample {
	t.Helper()
	series, err := datasets.ReadSeries("genai:" + testenv.Dataset(t, "alibaba-genai", "pod_gpu_duty_cycle_anon.csv.gz"))
	if err != nil {
		t.Fatal(err)
	}
	var last time.Time
	for _, s := range series {
		if l := s.Times[len(s.Times)-1]; l.After(last) {
			last = l
		}
	}
	shift := end.Sub(last)
	var out []collector.Sample
	for i, s := range series {
		node := fmt.Sprintf("node-%02d", i/8)
		for k, at := range s.Times {
			out = append(out, collector.Sample{Time: at.Add(shift), Node: node,
				DeviceInfo:   nvml.DeviceInfo{UUID: "GPU-" + s.ID, Index: i % 8, Model: "A100-80GB"},
				DeviceSample: nvml.DeviceSample{UtilGPUPct: s.Values[k]}})
		}
	}
	return out
}

// The idle model retrains from the fleet's own utilization, read from the
// embedded store or InfluxDB alike, behind its gate.
func TestRetrainIdleFromFleetTelemetry(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	samples := genaiFleet(t, now.Add(-time.Minute))
	_, emb := embeddedTelemetry(t, samples)
	iq := influxTelemetry(t, "idle", samples)
	reg := training.Registry{Dir: t.TempDir()}
	for i, src := range []struct {
		name string
		ts   collector.TelemetryStore
	}{{"embedded", emb}, {"influxdb", iq}} {
		t.Run(src.name, func(t *testing.T) {
			rep, err := training.RetrainIdle(ctx, src.ts, reg, training.DefaultIdleConfig(), now)
			if err != nil {
				t.Fatal(err)
			}
			// 78 of the containers still report in the trace's last hour.
			if rep.Series != 78 || len(rep.ScoredSeries) < 15 || len(rep.Horizons) != 12 {
				t.Fatalf("%d series read, %d scored, %d horizons; want the 78 containers that report at the end, a quarter scored", rep.Series, len(rep.ScoredSeries), len(rep.Horizons))
			}
			t.Logf("%s: %d series, %d scored; MAE at 30 and 60 minutes %.3f and %.3f, persistence %.3f and %.3f; gate %q", src.name,
				rep.Series, len(rep.ScoredSeries), rep.Horizons[5].MAE, rep.Horizons[11].MAE, rep.Horizons[5].MAEPersistence,
				rep.Horizons[11].MAEPersistence, rep.Gate)
			// The GenAI goal holds on the fleet's copy of the trace: the
			// model beats persistence on containers it did not see.
			for _, h := range rep.Horizons {
				if (h.HorizonS == 1800 || h.HorizonS == 3600) && h.MAE >= h.MAEPersistence {
					t.Errorf("at %.0f s: MAE %.3f, persistence %.3f", h.HorizonS, h.MAE, h.MAEPersistence)
				}
			}
			cur, err := reg.Current(idle.Target)
			if err != nil {
				t.Fatal(err)
			}
			switch i {
			case 0:
				if !*rep.Published || cur != 1 || rep.Gate != "no serving model" {
					t.Fatalf("first retraining: published %v, current %d, gate %q", *rep.Published, cur, rep.Gate)
				}
			default: // the same data again, through the gate
				if !strings.HasPrefix(rep.Gate, "passed: ") && !strings.HasPrefix(rep.Gate, "refused: ") {
					t.Fatalf("second retraining: gate %q, want a comparison with version 1", rep.Gate)
				}
			}
		})
	}
	t.Run("too few GPUs", func(t *testing.T) {
		_, err := training.RetrainIdle(ctx, emb, reg, training.DefaultIdleConfig(), now.Add(48*time.Hour))
		if err == nil || !strings.Contains(err.Error(), "0 GPUs reported") {
			t.Fatalf("err = %v", err)
		}
	})
}
