package nvml_test

import (
	"errors"
	"math"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/collector/nvml"
	"github.com/prescient-sched/prescient/internal/testenv"
)

// fakeClock is a clock the test moves.
type fakeClock struct{ t time.Time }

func (c *fakeClock) Now() time.Time      { return c.t }
func (c *fakeClock) Add(d time.Duration) { c.t = c.t.Add(d) }
func newClock() *fakeClock               { return &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }
func newSim(t *testing.T, o nvml.SimOptions) *nvml.Sim {
	t.Helper()
	s, err := nvml.NewSim(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestSimulatedHostHasEightA100sWithEveryField(t *testing.T) {
	s := newSim(t, nvml.SimOptions{Seed: 1})
	devs, err := s.Devices()
	if err != nil || len(devs) != 8 {
		t.Fatalf("Devices() = %d devices, %v; want 8", len(devs), err)
	}
	seen := map[string]bool{}
	for i, d := range devs {
		info, err := d.Info()
		if err != nil {
			t.Fatal(err)
		}
		if info.Index != i || info.MIG || !strings.Contains(info.Model, "A100") || info.MemoryTotalBytes != 40<<30 || seen[info.UUID] {
			t.Errorf("device %d: info %+v", i, info)
		}
		seen[info.UUID] = true
		smp, err := d.Sample()
		if err != nil || smp.Missing != 0 {
			t.Fatalf("device %d: Sample() missing %b, err %v", i, smp.Missing, err)
		}
		if smp.PowerLimitW != 400 || smp.PowerW < 40 || smp.PowerW > 400 || smp.MemTotalBytes != 40<<30 || smp.SMClockMHz == 0 {
			t.Errorf("device %d: implausible sample %+v", i, smp)
		}
	}
}

func TestAssignedJobDrivesTheGPUAndOwnsItsProcesses(t *testing.T) {
	clk := newClock()
	s := newSim(t, nvml.SimOptions{Seed: 2, Clock: clk.Now})
	uuid := s.UUIDs()[3]
	if err := s.Assign(uuid, nvml.Assignment{JobID: "job-7", Util: 0.9, MemBytes: 30 << 30, PIDs: []int{100, 101}}); err != nil {
		t.Fatal(err)
	}
	clk.Add(time.Second)
	devs, _ := s.Devices()
	smp, err := devs[3].Sample()
	if err != nil {
		t.Fatal(err)
	}
	if smp.UtilGPUPct < 80 || smp.UtilGPUPct > 100 || smp.MemUsedBytes != 30<<30 || smp.PowerW < 300 {
		t.Errorf("sample of a GPU running a job at 90%%: %+v", smp)
	}
	ps, err := devs[3].Processes()
	if err != nil || len(ps) != 2 || ps[0].PID != 100 || ps[0].MemUsedBytes != 15<<30 {
		t.Errorf("Processes() = %+v, %v; want pids 100 and 101 with 15 GiB each", ps, err)
	}
	if job, ok := s.JobOfPID(101); !ok || job != "job-7" {
		t.Errorf("JobOfPID(101) = %q, %v; want job-7", job, ok)
	}
	if err := s.Release(uuid); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.JobOfPID(101); ok {
		t.Error("a released job still owns its pids")
	}
	if err := s.Assign("GPU-nope", nvml.Assignment{}); err == nil {
		t.Error("Assign to an unknown GPU succeeded")
	}
	if err := s.Assign(uuid, nvml.Assignment{Util: 1.5}); err == nil {
		t.Error("Assign with utilization 1.5 succeeded")
	}
}

func TestEnergyCounterIntegratesPower(t *testing.T) {
	clk := newClock()
	s := newSim(t, nvml.SimOptions{Seed: 3, Clock: clk.Now})
	uuid := s.UUIDs()[0]
	_ = s.Assign(uuid, nvml.Assignment{JobID: "j", Util: 1})
	devs, _ := s.Devices()
	clk.Add(time.Second)
	a, _ := devs[0].Sample()
	clk.Add(100 * time.Second)
	b, _ := devs[0].Sample()
	got := b.EnergyJ - a.EnergyJ
	if got < 100*300 || got > 100*400 {
		t.Errorf("energy over 100 s at full load = %.0f J; want 30-40 kJ (power %.0f W)", got, b.PowerW)
	}
}

func TestMIGEnabledGPUReportsItsMIGDevices(t *testing.T) {
	node := cluster.Node{Name: "mig-host"}
	for i := range 2 {
		g := cluster.NewGPU(i, "A100-SXM4-80GB")
		g.MIGEnabled = i == 1
		node.GPUs = append(node.GPUs, g)
	}
	s := newSim(t, nvml.SimOptions{Node: node, Seed: 4})
	devs, _ := s.Devices()
	if len(devs) != 4 {
		t.Fatalf("got %d devices; want 2 GPUs and 2 MIG devices", len(devs))
	}
	parent, _ := devs[1].Info()
	for _, d := range devs[2:] {
		info, err := d.Info()
		if err != nil || !info.MIG || info.ParentUUID != parent.UUID || info.Index != 1 || info.MemoryTotalBytes != 40<<30 {
			t.Errorf("MIG device info %+v, %v", info, err)
		}
		smp, err := d.Sample()
		if err != nil {
			t.Errorf("a MIG device's unsupported fields gave an error: %v", err)
		}
		if !smp.Has(nvml.FieldMemory) || smp.Has(nvml.FieldPower) || smp.Has(nvml.FieldUtilization) {
			t.Errorf("MIG sample missing bits %b; want memory only", smp.Missing)
		}
	}
}

func TestOneFailingCallLeavesTheOtherFieldsAndGPUs(t *testing.T) {
	s := newSim(t, nvml.SimOptions{Seed: 5})
	uuid := s.UUIDs()[2]
	_ = s.FailCall(uuid, "power", true)
	devs, _ := s.Devices()
	smp, err := devs[2].Sample()
	var ce *nvml.CallError
	if !errors.As(err, &ce) || ce.Call != "power" || ce.Device != uuid {
		t.Fatalf("Sample() error = %v; want a CallError for power on %s", err, uuid)
	}
	if smp.Has(nvml.FieldPower) || !smp.Has(nvml.FieldUtilization) || !smp.Has(nvml.FieldTemperature) {
		t.Errorf("missing bits %b; want power only", smp.Missing)
	}
	if _, err := devs[3].Sample(); err != nil {
		t.Errorf("another GPU failed too: %v", err)
	}
}

func TestXIDErrorsAreCountedOnTheirGPU(t *testing.T) {
	s := newSim(t, nvml.SimOptions{Seed: 6})
	uuids := s.UUIDs()
	_ = s.InjectXID(uuids[1], 79)
	_ = s.InjectXID(uuids[1], 48)
	devs, _ := s.Devices()
	a, _ := devs[0].Sample()
	b, _ := devs[1].Sample()
	if a.XIDErrors != 0 || b.XIDErrors != 2 {
		t.Errorf("XID counts = %d, %d; want 0, 2", a.XIDErrors, b.XIDErrors)
	}
}

// Without the library auto fails as real does: simulated GPUs only on
// request, never on a production node whose driver is missing.
func TestWithoutTheLibraryRealAndAutoFailAndOnlySimSimulates(t *testing.T) {
	if _, err := nvml.OpenReal(); err == nil {
		t.Skip("this machine has NVML")
	} else if !errors.Is(err, nvml.ErrNoLibrary) {
		t.Fatalf("OpenReal() = %v; want ErrNoLibrary", err)
	}
	for _, m := range []nvml.Mode{nvml.ModeAuto, nvml.ModeReal} {
		if h, _, err := nvml.Open(m, nvml.SimOptions{}); !errors.Is(err, nvml.ErrNoLibrary) {
			t.Errorf("Open(%s) = %v, %v; want ErrNoLibrary", m, h, err)
		}
	}
	h, sim, err := nvml.Open(nvml.ModeSim, nvml.SimOptions{})
	if err != nil || sim == nil {
		t.Fatalf("Open(sim) = %v, sim %v; want the simulated host", err, sim)
	}
	h.Close()
}

// The stochastic load, run long, reproduces AcmeTrace Seren's share of idle
// samples and its utilization and power distributions. Tolerances: the
// share of 0% samples within 2 percentage points; the Kolmogorov-Smirnov
// distance of utilization and of power (the CDF clipped to [idle, limit],
// as the simulator clips it) below 0.05.
func TestStochasticLoadReproducesAcmeDistributions(t *testing.T) {
	cdfs, err := nvml.ReadCDFFile(testenv.Dataset(t, "acme-summary", "acme_util_cdfs.csv"))
	if err != nil {
		t.Fatal(err)
	}
	cal, err := nvml.CalibrationFrom(cdfs, "seren")
	if err != nil {
		t.Fatal(err)
	}
	clk := newClock()
	s := newSim(t, nvml.SimOptions{Seed: 7, Clock: clk.Now, Calibration: cal})
	devs, _ := s.Devices()
	const steps = 20000
	var utils, powers []float64
	for range steps {
		clk.Add(time.Second)
		for _, d := range devs {
			smp, err := d.Sample()
			if err != nil {
				t.Fatal(err)
			}
			utils = append(utils, smp.UtilGPUPct)
			powers = append(powers, smp.PowerW)
		}
	}
	zero := 0
	for _, u := range utils {
		if u == 0 {
			zero++
		}
	}
	zeroShare := float64(zero) / float64(len(utils))
	wantZero := cal.Util.Prob(0)
	ksUtil := ks(utils, func(v float64) float64 { return cal.Util.Prob(v) })
	idle := 0.15 * 400 * 0.9
	ksPower := ks(powers, func(v float64) float64 {
		if v >= 400 {
			return 1
		}
		return cal.Power.Prob(math.Max(v, idle))
	})
	t.Logf("%d samples: 0%% utilization %.1f%% (Seren %.1f%%), KS utilization %.3f, KS power %.3f", len(utils), 100*zeroShare, 100*wantZero, ksUtil, ksPower)
	if math.Abs(zeroShare-wantZero) > 0.02 {
		t.Errorf("share of 0%% samples %.3f; want %.3f ± 0.02", zeroShare, wantZero)
	}
	if ksUtil > 0.05 {
		t.Errorf("KS distance of utilization %.3f; want below 0.05", ksUtil)
	}
	if ksPower > 0.05 {
		t.Errorf("KS distance of power %.3f; want below 0.05", ksPower)
	}
	for _, p := range powers {
		if p < idle || p > 400 {
			t.Fatalf("power %.1f W outside [idle %.0f W, limit 400 W]", p, idle)
		}
	}
}

// ks is the Kolmogorov-Smirnov distance between the sample xs and cdf,
// checked on both sides of every distinct sample value.
func ks(xs []float64, cdf func(float64) float64) float64 {
	sort.Float64s(xs)
	n := float64(len(xs))
	d := 0.0
	for i := 0; i < len(xs); {
		j := i
		for j < len(xs) && xs[j] == xs[i] {
			j++
		}
		below := cdf(xs[i] - 1e-9) // the CDF just left of the value
		d = math.Max(d, math.Max(math.Abs(float64(j)/n-cdf(xs[i])), math.Abs(float64(i)/n-below)))
		i = j
	}
	return d
}

func TestPowerLimitsCapTheDrawAndReset(t *testing.T) {
	clk := newClock()
	s := newSim(t, nvml.SimOptions{Seed: 4, Clock: clk.Now})
	uuid := s.UUIDs()[2]
	if err := s.Assign(uuid, nvml.Assignment{JobID: "j", Util: 1}); err != nil {
		t.Fatal(err)
	}
	var pl nvml.PowerLimiter = s
	w, err := pl.SetPowerLimitFraction(uuid, 0.6)
	if err != nil || w != 240 {
		t.Fatalf("SetPowerLimitFraction(0.6) = %g, %v; want 240 W of the A100's 400", w, err)
	}
	devs, _ := s.Devices()
	for range 5 {
		clk.Add(time.Second)
		smp, err := devs[2].Sample()
		if err != nil {
			t.Fatal(err)
		}
		if smp.PowerLimitW != 240 || smp.PowerW > 240 || smp.PowerW < 150 {
			t.Fatalf("capped GPU at full load: %+v", smp)
		}
	}
	// Below the lowest limit NVML allows: raised to it (the catalog's 100 W).
	if w, err := pl.SetPowerLimitFraction(uuid, 0.1); err != nil || w != 100 {
		t.Errorf("SetPowerLimitFraction(0.1) = %g, %v; want the 100 W floor", w, err)
	}
	if err := pl.ResetPowerLimit(uuid); err != nil {
		t.Fatal(err)
	}
	clk.Add(time.Second)
	if smp, _ := devs[2].Sample(); smp.PowerLimitW != 400 || smp.PowerW < 300 {
		t.Errorf("after the reset: %+v, want the 400 W limit and the full draw", smp)
	}
	if _, err := pl.SetPowerLimitFraction("GPU-nope", 0.5); err == nil {
		t.Error("an unknown GPU was capped")
	}
	if _, err := pl.SetPowerLimitFraction(uuid, 1.5); err == nil {
		t.Error("a fraction of 1.5 was accepted")
	}
}

// With IdleUnassigned (a node agent's host) a GPU no job runs on idles:
// no utilization, no memory, idle power and clock; one a job runs on
// shows the job's load.
func TestAnAgentsSimulatedGPUsIdleWithoutAJob(t *testing.T) {
	clk := newClock()
	s := newSim(t, nvml.SimOptions{Seed: 2, Clock: clk.Now, IdleUnassigned: true})
	if err := s.Assign(s.UUIDs()[1], nvml.Assignment{JobID: "j", Util: 0.8, MemBytes: 10 << 30}); err != nil {
		t.Fatal(err)
	}
	devs, _ := s.Devices()
	for step := range 60 {
		clk.Add(time.Second)
		for i, d := range devs[:3] {
			smp, err := d.Sample()
			if err != nil {
				t.Fatal(err)
			}
			busy := i == 1
			if !busy && (smp.UtilGPUPct != 0 || smp.MemUsedBytes != 0 || smp.PowerW > 0.3*smp.PowerLimitW) {
				t.Fatalf("step %d: idle GPU %d shows %+v", step, i, smp)
			}
			if busy && (smp.UtilGPUPct < 60 || smp.MemUsedBytes != 10<<30) {
				t.Fatalf("step %d: GPU %d running a job at 80%% shows %+v", step, i, smp)
			}
		}
	}
}
