package collector

import (
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/prescient-sched/prescient/collector/nvml"
)

// dcgmGauges serves each device's latest sample as NVIDIA's dcgm-exporter
// names, labels and units them (DCGM_FI_DEV_GPU_UTIL in %, FB_USED in MiB,
// POWER_USAGE in W, TOTAL_ENERGY_CONSUMPTION in mJ, ...), so that the
// dashboards and alerts written for it work on a host Prescient collects.
// A reading the device did not give is left out.
type dcgmGauges struct {
	mu     sync.Mutex
	latest map[string]Sample // by UUID
}

var (
	dcgmLabels = []string{"gpu", "UUID", "device", "modelName", "Hostname", "GPU_I_ID"}
	dcgmFields = []struct {
		desc  *prometheus.Desc
		kind  prometheus.ValueType
		field nvml.Field
		value func(*Sample) float64
	}{
		{dcgmDesc("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %)."), prometheus.GaugeValue, nvml.FieldUtilization,
			func(s *Sample) float64 { return s.UtilGPUPct }},
		{dcgmDesc("DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %)."), prometheus.GaugeValue, nvml.FieldUtilization,
			func(s *Sample) float64 { return s.UtilMemPct }},
		{dcgmDesc("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB)."), prometheus.GaugeValue, nvml.FieldMemory,
			func(s *Sample) float64 { return float64(s.MemUsedBytes) / (1 << 20) }},
		{dcgmDesc("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB)."), prometheus.GaugeValue, nvml.FieldMemory,
			func(s *Sample) float64 {
				return float64(s.MemTotalBytes-min(s.MemUsedBytes, s.MemTotalBytes)) / (1 << 20)
			}},
		{dcgmDesc("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W)."), prometheus.GaugeValue, nvml.FieldPower,
			func(s *Sample) float64 { return s.PowerW }},
		{dcgmDesc("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "Total energy consumption since boot (in mJ)."), prometheus.CounterValue, nvml.FieldEnergy,
			func(s *Sample) float64 { return s.EnergyJ * 1000 }},
		{dcgmDesc("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C)."), prometheus.GaugeValue, nvml.FieldTemperature,
			func(s *Sample) float64 { return s.TemperatureC }},
		{dcgmDesc("DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz)."), prometheus.GaugeValue, nvml.FieldSMClock,
			func(s *Sample) float64 { return s.SMClockMHz }},
		{dcgmDesc("DCGM_FI_DEV_POWER_MGMT_LIMIT", "Power management limit (in W)."), prometheus.GaugeValue, nvml.FieldPowerLimit,
			func(s *Sample) float64 { return s.PowerLimitW }},
		{dcgmDesc("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "Total number of single-bit volatile ECC errors."), prometheus.CounterValue, nvml.FieldECC,
			func(s *Sample) float64 { return float64(s.ECCCorrected) }},
		{dcgmDesc("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "Total number of double-bit volatile ECC errors."), prometheus.CounterValue, nvml.FieldECC,
			func(s *Sample) float64 { return float64(s.ECCUncorrected) }},
	}
)

func dcgmDesc(name, help string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, dcgmLabels, nil)
}

func newDCGMGauges() *dcgmGauges { return &dcgmGauges{latest: map[string]Sample{}} }

// update keeps the samples of one round as the latest.
func (g *dcgmGauges) update(samples []Sample) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, s := range samples {
		s.Processes = nil
		g.latest[s.UUID] = s
	}
}

func (g *dcgmGauges) Describe(ch chan<- *prometheus.Desc) {
	for _, f := range dcgmFields {
		ch <- f.desc
	}
}

func (g *dcgmGauges) Collect(ch chan<- prometheus.Metric) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, s := range g.latest {
		gi := ""
		if s.MIG {
			gi = strconv.Itoa(s.GPUInstanceID)
		}
		labels := []string{strconv.Itoa(s.Index), s.UUID, "nvidia" + strconv.Itoa(s.Index), s.Model, s.Node, gi}
		for _, f := range dcgmFields {
			if s.Has(f.field) {
				ch <- prometheus.MustNewConstMetric(f.desc, f.kind, f.value(&s), labels...)
			}
		}
	}
}
