package nvml

import (
	"errors"
	"fmt"
)

// Host is one GPU host: its GPUs and, for MIG-enabled GPUs, their MIG
// devices.
type Host interface {
	// Devices returns the host's devices: every GPU, and after a
	// MIG-enabled GPU its MIG devices. The list is fixed when the host is
	// opened.
	Devices() ([]Device, error)
	Close() error
}

// Device is one GPU or MIG device.
type Device interface {
	// Info returns what does not change while the host runs.
	Info() (DeviceInfo, error)
	// Sample reads the device's counters now. When some NVML calls fail it
	// still returns what the others read, with the failed fields in
	// DeviceSample.Missing, and an error joining one *CallError per failed
	// call. A field the device does not support (a MIG device has no power
	// reading) is missing without an error.
	Sample() (DeviceSample, error)
	// Processes returns the compute processes running on the device.
	Processes() ([]Process, error)
}

// DeviceInfo describes a device.
type DeviceInfo struct {
	UUID             string
	Index            int // the GPU's index on its host; for a MIG device its parent's
	Model            string
	MemoryTotalBytes uint64

	// MIG devices only.
	MIG               bool
	ParentUUID        string
	MIGIndex          int // index among the parent's MIG devices
	GPUInstanceID     int
	ComputeInstanceID int
}

// Field names one reading of a DeviceSample, for DeviceSample.Missing.
type Field uint16

// The fields of a sample.
const (
	FieldUtilization Field = 1 << iota // UtilGPUPct and UtilMemPct
	FieldMemory                        // MemUsedBytes and MemTotalBytes
	FieldPower
	FieldEnergy
	FieldTemperature
	FieldSMClock
	FieldPowerLimit
	FieldThrottle
	FieldECC // ECCCorrected and ECCUncorrected
	FieldXID
)

// DeviceSample is one reading of a device's counters.
type DeviceSample struct {
	UtilGPUPct      float64 // percent of time a kernel ran
	UtilMemPct      float64 // percent of time device memory was read or written
	MemUsedBytes    uint64
	MemTotalBytes   uint64
	PowerW          float64
	EnergyJ         float64 // energy counter since the driver loaded
	TemperatureC    float64
	SMClockMHz      float64
	PowerLimitW     float64 // enforced power limit
	ThrottleReasons uint64  // NVML clocks event reason bits
	ECCCorrected    uint64  // volatile ECC error counts
	ECCUncorrected  uint64
	XIDErrors       uint64 // XID critical errors seen since the host was opened

	// Missing has a bit set for every field that could not be read.
	Missing Field
}

// Has reports whether f was read.
func (s DeviceSample) Has(f Field) bool { return s.Missing&f == 0 }

// Process is a compute process on a device.
type Process struct {
	PID          int
	MemUsedBytes uint64
}

// CallError is the failure of one NVML call on one device.
type CallError struct {
	Device string // UUID, or the index when the UUID is unknown
	Call   string // short name: "power", "utilization", ...
	Err    error
}

func (e *CallError) Error() string {
	return fmt.Sprintf("nvml: device %s: %s: %v", e.Device, e.Call, e.Err)
}

func (e *CallError) Unwrap() error { return e.Err }

// ErrNotSupported is wrapped by errors for calls the device does not
// support.
var ErrNotSupported = errors.New("not supported by the device")

// ErrNoLibrary is wrapped by Open's error when libnvidia-ml.so does not
// load.
var ErrNoLibrary = errors.New("libnvidia-ml.so could not be loaded")

// PowerLimiter sets GPUs' power limits: the node agent caps a job's GPUs
// with it (the plan's per-job power caps) and lifts the cap when the job
// ends. The NVML host (real or simulated) is one; setting a limit needs
// root on a real GPU.
type PowerLimiter interface {
	// SetPowerLimitFraction sets the GPU's power limit to fraction of its
	// default limit, raised to the lowest limit NVML allows; it returns
	// the watts set.
	SetPowerLimitFraction(uuid string, fraction float64) (float64, error)
	// ResetPowerLimit sets the GPU's power limit back to its default.
	ResetPowerLimit(uuid string) error
}
