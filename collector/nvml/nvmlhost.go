package nvml

import (
	"errors"
	"fmt"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// nvmlHost is a Host over an nvml.Interface: the real library or a mock
// server. It is safe for concurrent use.
type nvmlHost struct {
	lib     nvml.Interface
	devices []Device
	events  nvml.EventSet // nil when XID events are not supported

	mu   sync.Mutex
	xids map[string]uint64 // UUID → XID critical errors seen
	// byHandle finds the UUID of an event's device.
	byHandle map[nvml.Device]string
}

// newNVMLHost initialises lib and enumerates its devices.
func newNVMLHost(lib nvml.Interface) (*nvmlHost, error) {
	if ret := lib.Init(); ret != nvml.SUCCESS {
		if ret == nvml.ERROR_LIBRARY_NOT_FOUND {
			return nil, fmt.Errorf("nvml: init: %w (is the NVIDIA driver installed?)", ErrNoLibrary)
		}
		return nil, fmt.Errorf("nvml: init: %w", retErr(ret))
	}
	h := &nvmlHost{lib: lib, xids: map[string]uint64{}, byHandle: map[nvml.Device]string{}}
	if err := h.enumerate(); err != nil {
		lib.Shutdown()
		return nil, err
	}
	return h, nil
}

func (h *nvmlHost) enumerate() error {
	n, ret := h.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return fmt.Errorf("nvml: device count: %w", retErr(ret))
	}
	if set, ret := h.lib.EventSetCreate(); ret == nvml.SUCCESS {
		h.events = set
	}
	for i := range n {
		d, ret := h.lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			return fmt.Errorf("nvml: device %d: handle: %w", i, retErr(ret))
		}
		uuid, ret := d.GetUUID()
		if ret != nvml.SUCCESS {
			return fmt.Errorf("nvml: device %d: uuid: %w", i, retErr(ret))
		}
		gpu := &nvmlDevice{host: h, dev: d, uuid: uuid, index: i}
		h.devices = append(h.devices, gpu)
		h.byHandle[d] = uuid
		if h.events != nil {
			// XID events are best effort: a GPU that cannot report them
			// simply never counts one.
			_ = d.RegisterEvents(nvml.EventTypeXidCriticalError, h.events)
		}
		h.devices = append(h.devices, h.migDevices(gpu)...)
	}
	return nil
}

// migDevices returns the MIG devices of a MIG-enabled GPU.
func (h *nvmlHost) migDevices(parent *nvmlDevice) []Device {
	current, _, ret := parent.dev.GetMigMode()
	if ret != nvml.SUCCESS || current != nvml.DEVICE_MIG_ENABLE {
		return nil
	}
	max, ret := parent.dev.GetMaxMigDeviceCount()
	if ret != nvml.SUCCESS {
		return nil
	}
	var out []Device
	for j := range max {
		m, ret := parent.dev.GetMigDeviceHandleByIndex(j)
		if ret != nvml.SUCCESS {
			continue // an empty slot
		}
		uuid, ret := m.GetUUID()
		if ret != nvml.SUCCESS {
			continue
		}
		out = append(out, &nvmlDevice{host: h, dev: m, uuid: uuid, index: parent.index, parent: parent.uuid, migIndex: j})
	}
	return out
}

func (h *nvmlHost) Devices() ([]Device, error) { return h.devices, nil }

func (h *nvmlHost) Close() error {
	if h.events != nil {
		h.events.Free()
	}
	if ret := h.lib.Shutdown(); ret != nvml.SUCCESS {
		return fmt.Errorf("nvml: shutdown: %w", retErr(ret))
	}
	return nil
}

// xidCount drains pending XID events and returns the count for uuid.
func (h *nvmlHost) xidCount(uuid string) uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	for h.events != nil {
		ev, ret := h.events.Wait(0)
		if ret != nvml.SUCCESS {
			break
		}
		if ev.EventType&nvml.EventTypeXidCriticalError != 0 {
			h.xids[h.byHandle[ev.Device]]++
		}
	}
	return h.xids[uuid]
}

// nvmlDevice is a GPU or MIG device of an nvmlHost.
type nvmlDevice struct {
	host     *nvmlHost
	dev      nvml.Device
	uuid     string
	index    int
	parent   string // MIG devices only
	migIndex int
}

func (d *nvmlDevice) Info() (DeviceInfo, error) {
	info := DeviceInfo{UUID: d.uuid, Index: d.index, MIG: d.parent != "", ParentUUID: d.parent, MIGIndex: d.migIndex}
	var errs []error
	if name, ret := d.dev.GetName(); ret == nvml.SUCCESS {
		info.Model = name
	} else {
		errs = append(errs, d.callErr("name", ret))
	}
	if mem, ret := d.dev.GetMemoryInfo(); ret == nvml.SUCCESS {
		info.MemoryTotalBytes = mem.Total
	} else {
		errs = append(errs, d.callErr("memory", ret))
	}
	if info.MIG {
		if id, ret := d.dev.GetGpuInstanceId(); ret == nvml.SUCCESS {
			info.GPUInstanceID = id
		}
		if id, ret := d.dev.GetComputeInstanceId(); ret == nvml.SUCCESS {
			info.ComputeInstanceID = id
		}
	}
	return info, errors.Join(errs...)
}

func (d *nvmlDevice) Sample() (DeviceSample, error) {
	var s DeviceSample
	var errs []error
	// fail marks f missing and keeps the error unless the device does not
	// support the call.
	fail := func(f Field, call string, ret nvml.Return) {
		s.Missing |= f
		if ret != nvml.ERROR_NOT_SUPPORTED {
			errs = append(errs, d.callErr(call, ret))
		}
	}
	if u, ret := d.dev.GetUtilizationRates(); ret == nvml.SUCCESS {
		s.UtilGPUPct, s.UtilMemPct = float64(u.Gpu), float64(u.Memory)
	} else {
		fail(FieldUtilization, "utilization", ret)
	}
	if m, ret := d.dev.GetMemoryInfo(); ret == nvml.SUCCESS {
		s.MemUsedBytes, s.MemTotalBytes = m.Used, m.Total
	} else {
		fail(FieldMemory, "memory", ret)
	}
	if mw, ret := d.dev.GetPowerUsage(); ret == nvml.SUCCESS {
		s.PowerW = float64(mw) / 1000
	} else {
		fail(FieldPower, "power", ret)
	}
	if mj, ret := d.dev.GetTotalEnergyConsumption(); ret == nvml.SUCCESS {
		s.EnergyJ = float64(mj) / 1000
	} else {
		fail(FieldEnergy, "energy", ret)
	}
	if c, ret := d.dev.GetTemperature(nvml.TEMPERATURE_GPU); ret == nvml.SUCCESS {
		s.TemperatureC = float64(c)
	} else {
		fail(FieldTemperature, "temperature", ret)
	}
	if mhz, ret := d.dev.GetClockInfo(nvml.CLOCK_SM); ret == nvml.SUCCESS {
		s.SMClockMHz = float64(mhz)
	} else {
		fail(FieldSMClock, "sm_clock", ret)
	}
	if mw, ret := d.dev.GetEnforcedPowerLimit(); ret == nvml.SUCCESS {
		s.PowerLimitW = float64(mw) / 1000
	} else {
		fail(FieldPowerLimit, "power_limit", ret)
	}
	if r, ret := d.dev.GetCurrentClocksEventReasons(); ret == nvml.SUCCESS {
		s.ThrottleReasons = r
	} else {
		fail(FieldThrottle, "throttle_reasons", ret)
	}
	corr, ret1 := d.dev.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_CORRECTED, nvml.VOLATILE_ECC)
	unc, ret2 := d.dev.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC)
	switch {
	case ret1 != nvml.SUCCESS:
		fail(FieldECC, "ecc", ret1)
	case ret2 != nvml.SUCCESS:
		fail(FieldECC, "ecc", ret2)
	default:
		s.ECCCorrected, s.ECCUncorrected = corr, unc
	}
	if d.parent == "" && d.host.events != nil {
		s.XIDErrors = d.host.xidCount(d.uuid)
	} else {
		s.Missing |= FieldXID // MIG devices report their XIDs on the parent
	}
	return s, errors.Join(errs...)
}

// notAvailable is NVML's NVML_VALUE_NOT_AVAILABLE as an unsigned value.
const notAvailable = ^uint64(0)

func (d *nvmlDevice) Processes() ([]Process, error) {
	ps, ret := d.dev.GetComputeRunningProcesses()
	if ret != nvml.SUCCESS {
		return nil, d.callErr("processes", ret)
	}
	out := make([]Process, 0, len(ps))
	for _, p := range ps {
		// NVML says "not available" (all bits set) under WDDM and for some
		// MIG and permission cases; such a process is left out rather than
		// reported with a memory figure that would spoil what is learned.
		if p.UsedGpuMemory == notAvailable {
			continue
		}
		out = append(out, Process{PID: int(p.Pid), MemUsedBytes: p.UsedGpuMemory})
	}
	return out, nil
}

func (d *nvmlDevice) callErr(call string, ret nvml.Return) error {
	return &CallError{Device: d.uuid, Call: call, Err: retErr(ret)}
}

// retErr turns an nvml.Return into an error that does not leak the type.
func retErr(ret nvml.Return) error {
	if ret == nvml.ERROR_NOT_SUPPORTED {
		return ErrNotSupported
	}
	return fmt.Errorf("%s (NVML return %d)", nvml.ErrorString(ret), int32(ret))
}

var _ PowerLimiter = (*nvmlHost)(nil)

// gpu is the whole GPU (not a MIG device) of that UUID.
func (h *nvmlHost) gpu(uuid string) (*nvmlDevice, error) {
	for _, d := range h.devices {
		if nd, ok := d.(*nvmlDevice); ok && nd.uuid == uuid && nd.parent == "" {
			return nd, nil
		}
	}
	return nil, fmt.Errorf("nvml: no GPU %s on this host", uuid)
}

// SetPowerLimitFraction implements PowerLimiter with NVML's default limit,
// its limit constraints and its limit setter.
func (h *nvmlHost) SetPowerLimitFraction(uuid string, fraction float64) (float64, error) {
	if !(fraction > 0 && fraction <= 1) {
		return 0, fmt.Errorf("nvml: GPU %s: power limit fraction %g: want (0, 1]", uuid, fraction)
	}
	d, err := h.gpu(uuid)
	if err != nil {
		return 0, err
	}
	def, ret := d.dev.GetPowerManagementDefaultLimit()
	if ret != nvml.SUCCESS {
		return 0, d.callErr("power_default_limit", ret)
	}
	lo, hi, ret := d.dev.GetPowerManagementLimitConstraints()
	if ret != nvml.SUCCESS {
		return 0, d.callErr("power_limit_constraints", ret)
	}
	mw := min(max(uint32(fraction*float64(def)), lo), hi)
	if ret := d.dev.SetPowerManagementLimit(mw); ret != nvml.SUCCESS {
		return 0, d.callErr("set_power_limit", ret)
	}
	return float64(mw) / 1000, nil
}

// ResetPowerLimit implements PowerLimiter.
func (h *nvmlHost) ResetPowerLimit(uuid string) error {
	d, err := h.gpu(uuid)
	if err != nil {
		return err
	}
	def, ret := d.dev.GetPowerManagementDefaultLimit()
	if ret != nvml.SUCCESS {
		return d.callErr("power_default_limit", ret)
	}
	if ret := d.dev.SetPowerManagementLimit(def); ret != nvml.SUCCESS {
		return d.callErr("set_power_limit", ret)
	}
	return nil
}
