package collector_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/prescient-sched/prescient/collector"
	"github.com/prescient-sched/prescient/collector/nvml"
)

// The devices' latest samples are served as dcgm-exporter serves them:
// its names, labels and units, so that its dashboards work.
func TestTheLatestSamplesAreServedAsDCGMExporterNamesThem(t *testing.T) {
	sim, err := nvml.NewSim(nvml.SimOptions{Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer sim.Close()
	reg := prometheus.NewRegistry()
	c, err := collector.New(collector.Config{Hosts: []collector.HostSource{{Node: "gpu-07", Host: sim}}, Interval: time.Second,
		Metrics: collector.NewMetrics(reg)})
	if err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(reg, "DCGM_FI_DEV_GPU_UTIL"); n != 0 {
		t.Fatalf("%d GPU_UTIL series before any sample, want none", n)
	}
	samples := c.SampleOnce(time.Now())
	if len(samples) != 8 {
		t.Fatalf("%d samples, want the simulated host's 8", len(samples))
	}
	for _, name := range []string{"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_POWER_USAGE",
		"DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"} {
		if n := testutil.CollectAndCount(reg, name); n != 8 {
			t.Errorf("%s: %d series, want one per GPU (8)", name, n)
		}
	}
	s := samples[3]
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, mf := range mfs {
		if mf.GetName() != "DCGM_FI_DEV_FB_USED" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["UUID"] != s.UUID {
				continue
			}
			found = true
			if labels["gpu"] != "3" || labels["device"] != "nvidia3" || labels["Hostname"] != "gpu-07" || labels["modelName"] != s.Model {
				t.Errorf("labels %v", labels)
			}
			if got, want := m.GetGauge().GetValue(), float64(s.MemUsedBytes)/(1<<20); got != want {
				t.Errorf("FB_USED %g MiB, want %g (%d bytes)", got, want, s.MemUsedBytes)
			}
		}
	}
	if !found {
		t.Errorf("no FB_USED series of GPU 3 (%s)", s.UUID)
	}
}
