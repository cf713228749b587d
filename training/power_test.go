package training_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/collector"
	"github.com/prescient-sched/prescient/collector/nvml"
	"github.com/prescient-sched/prescient/training"
)

// powerFleet is 6 hours of one sample a minute from four V100s (300 W
// limit: 45 W idle, 210 W working) and two A100s (400 W: 50 W, 300 W),
// each idle in odd hours and working in even ones, as NVML names them; the
// first V100 ran its first hour capped at 150 W.
func powerFleet(start time.Time) []collector.Sample {
	type gpu struct {
		model            string
		limit, idle, top float64
	}
	gpus := []gpu{{"Tesla V100-SXM2-32GB", 300, 45, 210}, {"Tesla V100-SXM2-32GB", 300, 45, 210}, {"Tesla V100-SXM2-32GB", 300, 45, 210},
		{"Tesla V100-SXM2-32GB", 300, 45, 210}, {"NVIDIA A100-SXM4-80GB", 400, 50, 300}, {"NVIDIA A100-SXM4-80GB", 400, 50, 300}}
	var out []collector.Sample
	for m := range 6 * 60 {
		at := start.Add(time.Duration(m)*time.Minute + 7*time.Second)
		working := (m/60)%2 == 0
		for i, g := range gpus {
			s := collector.Sample{Time: at, Node: fmt.Sprintf("n%d", i/4),
				DeviceInfo: nvml.DeviceInfo{UUID: fmt.Sprintf("GPU-%d", i), Index: i % 4, Model: g.model}}
			s.PowerLimitW, s.PowerW, s.UtilGPUPct = g.limit, g.idle, 0
			if working {
				s.PowerW, s.UtilGPUPct = g.top, 90
			}
			if i == 0 && m < 60 { // the first hour under a power cap: left out of the fit
				s.PowerLimitW, s.PowerW = 150, 140
			}
			out = append(out, s)
		}
	}
	return out
}

// The power model is measured per GPU model from the fleet's telemetry,
// from the embedded store and InfluxDB alike, and the simulator's power
// model takes it for the models it names.
func TestFitPowerFromTelemetry(t *testing.T) {
	ctx := context.Background()
	start := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	samples := powerFleet(start)
	_, emb := embeddedTelemetry(t, samples)
	iq := influxTelemetry(t, "power", samples)
	for name, ts := range map[string]collector.TelemetryStore{"embedded": emb, "influxdb": iq} {
		t.Run(name, func(t *testing.T) {
			fit, err := training.FitPower(ctx, ts, start, start.Add(6*time.Hour), 5)
			if err != nil {
				t.Fatal(err)
			}
			if len(fit.Models) != 2 {
				t.Fatalf("models %+v, want the A100 and the V100", fit.Models)
			}
			want := map[string][2]float64{"NVIDIA A100-SXM4-80GB": {50.0 / 400, 300.0 / 400}, "Tesla V100-SXM2-32GB": {45.0 / 300, 210.0 / 300}}
			for _, m := range fit.Models {
				w, ok := want[m.Model]
				busy := 180 * m.GPUs
				if m.Model == "Tesla V100-SXM2-32GB" {
					busy -= 60 // GPU 0's capped hour
				}
				if !ok || math.Abs(m.IdleFraction-w[0]) > 1e-9 || math.Abs(m.LoadFraction-w[1]) > 1e-9 || m.IdleMinutes != 180*m.GPUs || m.BusyMinutes != busy {
					t.Errorf("%+v, want fractions %v over 180 idle minutes per GPU and %d working ones", m, w, busy)
				}
			}
			power := fit.Power()
			if p := power(cluster.NewGPU(0, "V100")); math.Abs(p.IdleW-45) > 1e-9 || math.Abs(p.BusyW-210) > 1e-9 {
				t.Errorf("a fleet's V100: %+v, want 45 W idle, 210 W busy", p)
			}
			if p := power(cluster.NewGPU(0, "A100-SXM4-80GB")); math.Abs(p.IdleW-50) > 1e-9 || math.Abs(p.BusyW-300) > 1e-9 {
				t.Errorf("a fleet's A100: %+v, want 50 W idle, 300 W busy", p)
			}
			if p := power(cluster.NewGPU(0, "P100")); math.Abs(p.IdleW-0.15*250) > 1e-9 || math.Abs(p.BusyW-0.481*250) > 1e-9 {
				t.Errorf("an unmeasured P100: %+v, want the Zeus-seeded default", p)
			}
		})
	}
	if _, err := training.FitPower(ctx, emb, start, start.Add(30*time.Minute), 5); !errors.Is(err, training.ErrNoPowerData) {
		t.Errorf("half an hour, all working: %v, want ErrNoPowerData", err)
	}
}
