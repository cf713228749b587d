package collector

import (
	"time"

	"github.com/prescient-sched/prescient/collector/nvml"
)

// Sample is one reading of one GPU or MIG device.
type Sample struct {
	Time time.Time
	Node string
	nvml.DeviceInfo
	nvml.DeviceSample
	Processes []ProcessSample
}

// ProcessSample is one compute process on the device at the sample's time.
type ProcessSample struct {
	PID          int
	MemUsedBytes uint64
	JobID        string // empty when no registry knows the process
	// LabelTags and LabelFields are the job's labels (experiment, run,
	// pipeline ids), written as tags label_KEY for the keys of
	// Config.TagLabels (low cardinality) and as string fields label_KEY
	// for all others; nil when the job has none or is unknown.
	LabelTags   map[string]string `json:",omitempty"`
	LabelFields map[string]string `json:",omitempty"`
}

// Measurement names, as written to InfluxDB and documented in
// docs/telemetry.md.
const (
	MeasurementGPU     = "gpu"
	MeasurementProcess = "gpu_process"
)

// Field is one numeric field of the gpu measurement: its name (with its
// unit) and how to read it from a Sample.
type Field struct {
	Name  string
	Int   bool // written as an integer
	Flag  nvml.Field
	Value func(*Sample) float64
	// IntValue is set for integer fields, to keep 64-bit counters exact.
	IntValue func(*Sample) int64
}

// Fields are the gpu measurement's fields, in the order they are written.
var Fields = []Field{
	{Name: "util_gpu_pct", Flag: nvml.FieldUtilization, Value: func(s *Sample) float64 { return s.UtilGPUPct }},
	{Name: "util_mem_pct", Flag: nvml.FieldUtilization, Value: func(s *Sample) float64 { return s.UtilMemPct }},
	{Name: "mem_used_bytes", Int: true, Flag: nvml.FieldMemory, IntValue: func(s *Sample) int64 { return int64(s.MemUsedBytes) }},
	{Name: "mem_total_bytes", Int: true, Flag: nvml.FieldMemory, IntValue: func(s *Sample) int64 { return int64(s.MemTotalBytes) }},
	{Name: "power_w", Flag: nvml.FieldPower, Value: func(s *Sample) float64 { return s.PowerW }},
	{Name: "energy_j", Flag: nvml.FieldEnergy, Value: func(s *Sample) float64 { return s.EnergyJ }},
	{Name: "temperature_c", Flag: nvml.FieldTemperature, Value: func(s *Sample) float64 { return s.TemperatureC }},
	{Name: "sm_clock_mhz", Flag: nvml.FieldSMClock, Value: func(s *Sample) float64 { return s.SMClockMHz }},
	{Name: "power_limit_w", Flag: nvml.FieldPowerLimit, Value: func(s *Sample) float64 { return s.PowerLimitW }},
	{Name: "throttle_reasons", Int: true, Flag: nvml.FieldThrottle, IntValue: func(s *Sample) int64 { return int64(s.ThrottleReasons) }},
	{Name: "ecc_corrected_total", Int: true, Flag: nvml.FieldECC, IntValue: func(s *Sample) int64 { return int64(s.ECCCorrected) }},
	{Name: "ecc_uncorrected_total", Int: true, Flag: nvml.FieldECC, IntValue: func(s *Sample) int64 { return int64(s.ECCUncorrected) }},
	{Name: "xid_errors_total", Int: true, Flag: nvml.FieldXID, IntValue: func(s *Sample) int64 { return int64(s.XIDErrors) }},
}

// FieldByName returns the field with the given name.
func FieldByName(name string) (Field, bool) {
	for _, f := range Fields {
		if f.Name == name {
			return f, true
		}
	}
	return Field{}, false
}

// value returns the field's value as a float64 (integers converted).
func (f Field) value(s *Sample) float64 {
	if f.Int {
		return float64(f.IntValue(s))
	}
	return f.Value(s)
}
