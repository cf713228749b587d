package nvml

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/prescient-sched/prescient/cluster"
)

// Assignment is a job placed on a simulated GPU: which job, how hard it
// works and which processes it runs there.
type Assignment struct {
	JobID    string
	Util     float64 // fraction of the GPU's time busy, 0 to 1
	MemBytes uint64  // GPU memory the job holds
	PIDs     []int   // its processes on the GPU (they share MemBytes)
}

// LoadModel is how the node agent or the simulator tells simulated GPUs
// what runs on them. A GPU with no assignment follows the stochastic load
// (or idles, with SimOptions.IdleUnassigned).
type LoadModel interface {
	Assign(gpuUUID string, a Assignment) error
	Release(gpuUUID string) error
}

// SimOptions configure a simulated host.
type SimOptions struct {
	// Node is the host to simulate: its name and GPUs (model, memory, power
	// limit, MIG enabled). Empty GPUs means 8 A100-SXM4-40GB.
	Node cluster.Node
	// Calibration of the stochastic load; zero means DefaultCalibration.
	Calibration Calibration
	Seed        uint64
	// Clock is read for every reading; default time.Now.
	Clock func() time.Time
	// Step is how often the load changes; default 1s.
	Step time.Duration
	// MeanSegmentSteps is the mean length of a steady load segment in
	// steps; default 30.
	MeanSegmentSteps float64
	// IdleUnassigned makes a GPU with no job assigned idle (no
	// utilization, no memory, idle power) instead of following the
	// stochastic load: for a node agent, which assigns every job it runs.
	IdleUnassigned bool
}

// Sim is a simulated GPU host on go-nvml's mock server. It is a Host and a
// LoadModel, and it knows which job each of its processes belongs to.
type Sim struct {
	*nvmlHost
	mu     sync.Mutex
	clock  func() time.Time
	step   time.Duration
	gpus   []*simGPU
	byUUID map[string]*simGPU
	xidq   []nvml.EventData
}

var _ LoadModel = (*Sim)(nil)

// simGPU is the state of one simulated GPU.
type simGPU struct {
	dev    *server.Device
	spec   gpuSpec
	rng    *rand.Rand
	load   stochasticLoad
	assign *Assignment
	idle   bool // unassigned: idle, not the stochastic load (IdleUnassigned)
	stepAt time.Time
	state  gpuState
	// energyMJ is the energy counter at stepAt, in mJ as NVML counts.
	energyMJ float64
	failing  map[string]bool // NVML calls that fail, by CallError.Call name
	migs     []*mock.Device
	// defaultW and minW are the power limit's default and lowest
	// settable value; spec.PowerLimitW is the limit in force.
	defaultW, minW float64
}

// NewSim builds a simulated host.
func NewSim(o SimOptions) (*Sim, error) {
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Step <= 0 {
		o.Step = time.Second
	}
	if o.MeanSegmentSteps <= 0 {
		o.MeanSegmentSteps = 30
	}
	if o.Calibration.Util.Value == nil {
		o.Calibration = DefaultCalibration()
	}
	node := o.Node
	if len(node.GPUs) == 0 {
		for i := range 8 {
			node.GPUs = append(node.GPUs, cluster.NewGPU(i, "A100-SXM4-40GB"))
		}
	}
	configs := make([]gpus.Config, len(node.GPUs))
	for i, g := range node.GPUs {
		configs[i] = mockConfig(g)
	}
	srv, err := server.New(server.WithGPUs(configs...), server.WithDriverVersion("550.54.15"),
		server.WithNVMLVersion("12.550.54.15"), server.WithCUDADriverVersion(12040))
	if err != nil {
		return nil, fmt.Errorf("nvml: simulated host %s: %w", node.Name, err)
	}
	s := &Sim{clock: o.Clock, step: o.Step, byUUID: map[string]*simGPU{}}
	now := o.Clock()
	for i, d := range srv.Devices {
		dev := d.(*server.Device)
		// Stable UUIDs: a restarted simulator continues the same series.
		dev.UUID = fmt.Sprintf("GPU-%s-%02d-%08x", safeName(node.Name), i, o.Seed&0xffffffff)
		rng := rand.New(rand.NewPCG(o.Seed, uint64(i)+1))
		g := &simGPU{dev: dev, spec: specOf(node.GPUs[i], configs[i]), rng: rng, stepAt: now, failing: map[string]bool{}, idle: o.IdleUnassigned,
			load: stochasticLoad{rng: rng, cal: o.Calibration, meanSegment: o.MeanSegmentSteps}}
		g.defaultW, g.minW = g.spec.PowerLimitW, node.GPUs[i].MinPowerLimitW
		if g.minW <= 0 || g.minW > g.defaultW {
			g.minW = 0.4 * g.defaultW
		}
		g.state = g.next()
		s.gpus = append(s.gpus, g)
		s.byUUID[dev.UUID] = g
		s.wire(g)
		if node.GPUs[i].MIGEnabled {
			s.wireMIG(g)
		}
	}
	srv.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) {
		return &mock.EventSet{WaitFunc: s.popXID, FreeFunc: func() nvml.Return { return nvml.SUCCESS }}, nvml.SUCCESS
	}
	h, err := newNVMLHost(srv)
	if err != nil {
		return nil, err
	}
	s.nvmlHost = h
	return s, nil
}

// Assign makes the GPU run a; it replaces what ran there.
func (s *Sim) Assign(gpuUUID string, a Assignment) error {
	if a.Util < 0 || a.Util > 1 {
		return fmt.Errorf("nvml: simulated GPU %s: utilization %g: want a fraction from 0 to 1", gpuUUID, a.Util)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.byUUID[gpuUUID]
	if !ok {
		return fmt.Errorf("nvml: simulated host has no GPU %s", gpuUUID)
	}
	a.PIDs = append([]int(nil), a.PIDs...)
	g.assign = &a
	return nil
}

// Release returns the GPU to the stochastic load.
func (s *Sim) Release(gpuUUID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.byUUID[gpuUUID]
	if !ok {
		return fmt.Errorf("nvml: simulated host has no GPU %s", gpuUUID)
	}
	g.assign = nil
	return nil
}

// JobOfPID returns the job an assigned process belongs to; it serves as a
// job registry for the simulated processes.
func (s *Sim) JobOfPID(pid int) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range s.gpus {
		if g.assign == nil {
			continue
		}
		for _, p := range g.assign.PIDs {
			if p == pid {
				return g.assign.JobID, true
			}
		}
	}
	return "", false
}

// UUIDs returns the UUIDs of the simulated GPUs in index order.
func (s *Sim) UUIDs() []string {
	out := make([]string, len(s.gpus))
	for i, g := range s.gpus {
		out[i] = g.dev.UUID
	}
	return out
}

// InjectXID makes the GPU report one XID critical error.
func (s *Sim) InjectXID(gpuUUID string, xid uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.byUUID[gpuUUID]
	if !ok {
		return fmt.Errorf("nvml: simulated host has no GPU %s", gpuUUID)
	}
	s.xidq = append(s.xidq, nvml.EventData{Device: g.dev, EventType: nvml.EventTypeXidCriticalError, EventData: xid})
	return nil
}

// FailCall makes one NVML call of one GPU fail (fail true) or work again;
// call is a CallError.Call name such as "power" or "utilization".
func (s *Sim) FailCall(gpuUUID, call string, fail bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.byUUID[gpuUUID]
	if !ok {
		return fmt.Errorf("nvml: simulated host has no GPU %s", gpuUUID)
	}
	g.failing[call] = fail
	return nil
}

func (s *Sim) popXID(uint32) (nvml.EventData, nvml.Return) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.xidq) == 0 {
		return nvml.EventData{}, nvml.ERROR_TIMEOUT
	}
	ev := s.xidq[0]
	s.xidq = s.xidq[1:]
	return ev, nvml.SUCCESS
}

// next is the state of the GPU's next step.
func (g *simGPU) next() gpuState {
	switch {
	case g.assign != nil:
		return jobLoad(g.rng, *g.assign, g.spec)
	case g.idle:
		return jobLoad(g.rng, Assignment{}, g.spec) // no load: idle power, clock and temperature
	}
	return g.load.step(g.spec)
}

// advance moves the GPU's state to now, one step at a time, integrating
// energy; after a long pause it jumps. The caller holds s.mu.
func (s *Sim) advance(g *simGPU) (gpuState, float64) {
	now := s.clock()
	if gap := now.Sub(g.stepAt); gap > 1000*s.step {
		g.energyMJ += g.state.PowerW * gap.Seconds() * 1000
		g.stepAt = now
		g.state = g.next()
	}
	for now.Sub(g.stepAt) >= s.step {
		g.energyMJ += g.state.PowerW * s.step.Seconds() * 1000
		g.stepAt = g.stepAt.Add(s.step)
		g.state = g.next()
	}
	return g.state, g.energyMJ + g.state.PowerW*now.Sub(g.stepAt).Seconds()*1000
}

// read runs f on the GPU's current state unless the call is set to fail.
func (s *Sim) read(g *simGPU, call string, f func(st gpuState, energyMJ float64)) nvml.Return {
	s.mu.Lock()
	defer s.mu.Unlock()
	if g.failing[call] {
		return nvml.ERROR_UNKNOWN
	}
	st, e := s.advance(g)
	f(st, e)
	return nvml.SUCCESS
}

// wire sets the mock device's telemetry calls to read the load model.
func (s *Sim) wire(g *simGPU) {
	d := g.dev
	d.GetUtilizationRatesFunc = func() (u nvml.Utilization, r nvml.Return) {
		r = s.read(g, "utilization", func(st gpuState, _ float64) {
			u = nvml.Utilization{Gpu: uint32(st.UtilGPUPct), Memory: uint32(st.UtilMemPct)}
		})
		return
	}
	d.GetMemoryInfoFunc = func() (m nvml.Memory, r nvml.Return) {
		r = s.read(g, "memory", func(st gpuState, _ float64) {
			m = nvml.Memory{Total: g.spec.MemTotalBytes, Used: st.MemUsedBytes, Free: g.spec.MemTotalBytes - st.MemUsedBytes}
		})
		return
	}
	d.GetPowerUsageFunc = func() (mw uint32, r nvml.Return) {
		r = s.read(g, "power", func(st gpuState, _ float64) { mw = uint32(st.PowerW * 1000) })
		return
	}
	d.GetTotalEnergyConsumptionFunc = func() (mj uint64, r nvml.Return) {
		r = s.read(g, "energy", func(_ gpuState, e float64) { mj = uint64(e) })
		return
	}
	d.GetTemperatureFunc = func(nvml.TemperatureSensors) (c uint32, r nvml.Return) {
		r = s.read(g, "temperature", func(st gpuState, _ float64) { c = uint32(st.TemperatureC) })
		return
	}
	d.GetClockInfoFunc = func(nvml.ClockType) (mhz uint32, r nvml.Return) {
		r = s.read(g, "sm_clock", func(st gpuState, _ float64) { mhz = uint32(st.SMClockMHz) })
		return
	}
	d.GetEnforcedPowerLimitFunc = func() (mw uint32, r nvml.Return) {
		r = s.read(g, "power_limit", func(gpuState, float64) { mw = uint32(g.spec.PowerLimitW * 1000) })
		return
	}
	d.GetPowerManagementDefaultLimitFunc = func() (uint32, nvml.Return) { return uint32(g.defaultW * 1000), nvml.SUCCESS }
	d.GetPowerManagementLimitConstraintsFunc = func() (uint32, uint32, nvml.Return) {
		return uint32(g.minW * 1000), uint32(g.defaultW * 1000), nvml.SUCCESS
	}
	// A new limit holds from the next step: the load draws at most it,
	// and the clocks show the power cap when it binds.
	d.SetPowerManagementLimitFunc = func(mw uint32) nvml.Return {
		w := float64(mw) / 1000
		if w < g.minW || w > g.defaultW {
			return nvml.ERROR_INVALID_ARGUMENT
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		g.spec.PowerLimitW = w
		return nvml.SUCCESS
	}
	d.GetCurrentClocksEventReasonsFunc = func() (bits uint64, r nvml.Return) {
		r = s.read(g, "throttle_reasons", func(st gpuState, _ float64) { bits = st.ThrottleReasons })
		return
	}
	d.GetTotalEccErrorsFunc = func(nvml.MemoryErrorType, nvml.EccCounterType) (n uint64, r nvml.Return) {
		r = s.read(g, "ecc", func(gpuState, float64) {})
		return
	}
	d.GetComputeRunningProcessesFunc = func() (ps []nvml.ProcessInfo, r nvml.Return) {
		r = s.read(g, "processes", func(gpuState, float64) {
			if a := g.assign; a != nil && len(a.PIDs) > 0 {
				for _, pid := range a.PIDs {
					ps = append(ps, nvml.ProcessInfo{Pid: uint32(pid), UsedGpuMemory: min(a.MemBytes, g.spec.MemTotalBytes) / uint64(len(a.PIDs))})
				}
			}
		})
		return
	}
	d.RegisterEventsFunc = func(uint64, nvml.EventSet) nvml.Return { return nvml.SUCCESS }
}

// simMIGSlices is how many MIG devices a MIG-enabled simulated GPU has:
// two 3g slices, each with half the memory.
const simMIGSlices = 2

// wireMIG enables MIG on the GPU with two MIG devices. Like real NVML,
// a MIG device reports memory and processes but no utilization, power,
// temperature or clocks.
func (s *Sim) wireMIG(g *simGPU) {
	g.dev.MigMode = nvml.DEVICE_MIG_ENABLE
	for j := range simMIGSlices {
		m := &mock.Device{}
		uuid := fmt.Sprintf("MIG-%s-%d", strings.TrimPrefix(g.dev.UUID, "GPU-"), j)
		notSupported := func() nvml.Return { return nvml.ERROR_NOT_SUPPORTED }
		m.GetUUIDFunc = func() (string, nvml.Return) { return uuid, nvml.SUCCESS }
		m.GetNameFunc = func() (string, nvml.Return) { return g.dev.Config.Name + " MIG 3g", nvml.SUCCESS }
		m.IsMigDeviceHandleFunc = func() (bool, nvml.Return) { return true, nvml.SUCCESS }
		m.GetGpuInstanceIdFunc = func() (int, nvml.Return) { return j + 1, nvml.SUCCESS }
		m.GetComputeInstanceIdFunc = func() (int, nvml.Return) { return 0, nvml.SUCCESS }
		m.GetMemoryInfoFunc = func() (mem nvml.Memory, r nvml.Return) {
			r = s.read(g, "memory", func(st gpuState, _ float64) {
				total := g.spec.MemTotalBytes / simMIGSlices
				used := st.MemUsedBytes / simMIGSlices
				mem = nvml.Memory{Total: total, Used: used, Free: total - used}
			})
			return
		}
		m.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{}, notSupported() }
		m.GetPowerUsageFunc = func() (uint32, nvml.Return) { return 0, notSupported() }
		m.GetTotalEnergyConsumptionFunc = func() (uint64, nvml.Return) { return 0, notSupported() }
		m.GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) { return 0, notSupported() }
		m.GetClockInfoFunc = func(nvml.ClockType) (uint32, nvml.Return) { return 0, notSupported() }
		m.GetEnforcedPowerLimitFunc = func() (uint32, nvml.Return) { return 0, notSupported() }
		m.GetCurrentClocksEventReasonsFunc = func() (uint64, nvml.Return) { return 0, notSupported() }
		m.GetTotalEccErrorsFunc = func(nvml.MemoryErrorType, nvml.EccCounterType) (uint64, nvml.Return) {
			return 0, notSupported()
		}
		m.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.SUCCESS }
		g.migs = append(g.migs, m)
	}
	g.dev.GetMaxMigDeviceCountFunc = func() (int, nvml.Return) { return len(g.migs), nvml.SUCCESS }
	g.dev.GetMigDeviceHandleByIndexFunc = func(j int) (nvml.Device, nvml.Return) {
		if j < 0 || j >= len(g.migs) {
			return nil, nvml.ERROR_NOT_FOUND
		}
		return g.migs[j], nvml.SUCCESS
	}
}

// mockConfig picks go-nvml's mock configuration for a fleet GPU, keeping
// the fleet's name and memory.
func mockConfig(g cluster.GPU) gpus.Config {
	m := strings.ToUpper(g.Model)
	var c gpus.Config
	switch {
	case strings.Contains(m, "H200"):
		c = gpus.H200_SXM5_141GB
	case strings.Contains(m, "H100"):
		c = gpus.H100_SXM5_80GB
	case strings.Contains(m, "B200"):
		c = gpus.B200_SXM5_180GB
	case strings.Contains(m, "A30"):
		c = gpus.A30_PCIE_24GB
	case strings.Contains(m, "A100") && strings.Contains(m, "80"):
		c = gpus.A100_SXM4_80GB
	default:
		c = gpus.A100_SXM4_40GB
	}
	if g.Model != "" {
		c.Name = "NVIDIA " + strings.TrimPrefix(g.Model, "NVIDIA ")
	}
	if g.MemoryBytes > 0 {
		c.MemoryMB = uint64(g.MemoryBytes) >> 20
	}
	return c
}

// specOf fills in what the load model needs, from the fleet and the mock
// configuration.
func specOf(g cluster.GPU, c gpus.Config) gpuSpec {
	limit := g.PowerLimitW
	if limit <= 0 {
		limit = 400
	}
	maxMHz := 1410.0 // A100
	switch c.Architecture {
	case nvml.DEVICE_ARCH_HOPPER, nvml.DEVICE_ARCH_BLACKWELL:
		maxMHz = 1980
	}
	return gpuSpec{MemTotalBytes: c.MemoryMB << 20, PowerLimitW: limit, IdleW: 0.15 * limit, MaxSMClockMHz: maxMHz, IdleMHz: 210}
}

// safeName keeps letters, digits and dashes of a node name for a UUID.
func safeName(s string) string {
	if s == "" {
		return "sim"
	}
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, s)
}
