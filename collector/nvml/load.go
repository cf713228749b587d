package nvml

import (
	"bytes"
	_ "embed"
	"fmt"
	"math"
	"math/rand/v2"
)

// Calibration holds the distributions the stochastic load draws from,
// taken from one cluster of an AcmeTrace CDF table.
type Calibration struct {
	Util  CDF // GPU utilization, percent
	Power CDF // power draw, W, of a GPU whose limit is RefPowerLimitW
	Mem   CDF // memory used, percent of the GPU's memory
	Temp  CDF // GPU temperature, °C

	// RefPowerLimitW is the power limit of the GPUs the power CDF was
	// measured on; a simulated GPU scales the draw by its own limit.
	RefPowerLimitW float64
}

// acmeRefPowerLimitW is the limit of Seren's and Kalos' A100-SXM4-80GB GPUs.
const acmeRefPowerLimitW = 400

// CalibrationFrom takes cluster's gpu_util, gpu_power, gpu_fb_used and
// gpu_temp distributions.
func CalibrationFrom(c CDFs, cluster string) (Calibration, error) {
	var cal Calibration
	var err error
	for _, m := range []struct {
		name string
		dst  *CDF
	}{{"gpu_util", &cal.Util}, {"gpu_power", &cal.Power}, {"gpu_fb_used", &cal.Mem}, {"gpu_temp", &cal.Temp}} {
		if *m.dst, err = c.Get(cluster, m.name); err != nil {
			return Calibration{}, fmt.Errorf("calibration: %w", err)
		}
	}
	cal.RefPowerLimitW = acmeRefPowerLimitW
	return cal, nil
}

// builtinCDFs is every 25th point of Seren's gpu_util, gpu_power,
// gpu_fb_used and gpu_temp CDFs from AcmeTrace's acme_util_cdfs.csv
// (github.com/InternLM/AcmeTrace, CC BY 4.0), so that the simulator runs
// without the shared datasets.
//
//go:embed testdata/seren_cdfs_coarse.csv
var builtinCDFs []byte

// DefaultCalibration is the coarse built-in copy of Seren's distributions.
func DefaultCalibration() Calibration {
	c, err := ReadCDFs(bytes.NewReader(builtinCDFs), "builtin seren_cdfs_coarse.csv")
	if err != nil {
		panic(err) // the embedded file is tested
	}
	cal, err := CalibrationFrom(c, "seren")
	if err != nil {
		panic(err)
	}
	return cal
}

// gpuState is what a simulated GPU shows during one step.
type gpuState struct {
	UtilGPUPct, UtilMemPct float64
	MemUsedBytes           uint64
	PowerW                 float64
	TemperatureC           float64
	SMClockMHz             float64
	ThrottleReasons        uint64
}

// NVML clocks event reason bits the simulator sets.
const (
	reasonGPUIdle    = 0x1
	reasonSWPowerCap = 0x4
)

// gpuSpec is what the load model needs to know about a simulated GPU.
type gpuSpec struct {
	MemTotalBytes          uint64
	PowerLimitW, IdleW     float64
	MaxSMClockMHz, IdleMHz float64
}

// stochasticLoad moves one GPU through segments of steady load: each
// segment draws a level u, uniform in [0, 1), and lasts a geometric number
// of steps (mean meanSegment); within it every step jitters u a little.
// Utilization, power, memory and temperature are the calibration CDFs'
// quantiles at u (comonotone: a busier GPU draws more power and runs
// hotter), so over a long run each one follows its CDF.
type stochasticLoad struct {
	rng         *rand.Rand
	cal         Calibration
	meanSegment float64
	level       float64
	left        int
}

func (l *stochasticLoad) step(spec gpuSpec) gpuState {
	if l.left <= 0 {
		l.level = l.rng.Float64()
		l.left = 1 + int(l.rng.ExpFloat64()*l.meanSegment)
	}
	l.left--
	u := clamp(l.level+l.rng.NormFloat64()*0.01, 0, 1)
	var s gpuState
	s.UtilGPUPct = math.Round(l.cal.Util.Quantile(u))
	s.UtilMemPct = math.Round(s.UtilGPUPct * 0.6)
	s.PowerW = clamp(l.cal.Power.Quantile(u)*spec.PowerLimitW/l.cal.RefPowerLimitW, spec.IdleW*0.9, spec.PowerLimitW)
	s.MemUsedBytes = uint64(clamp(l.cal.Mem.Quantile(l.level), 0, 100) / 100 * float64(spec.MemTotalBytes))
	s.TemperatureC = math.Round(l.cal.Temp.Quantile(u))
	clocks(&s, spec)
	return s
}

// jobLoad is the load of an assigned job: its utilization with a little
// noise, power rising from idle to the limit with utilization.
func jobLoad(rng *rand.Rand, a Assignment, spec gpuSpec) gpuState {
	util := clamp(a.Util*100*(1+rng.NormFloat64()*0.03), 0, 100)
	var s gpuState
	s.UtilGPUPct = math.Round(util)
	s.UtilMemPct = math.Round(util * 0.6)
	s.MemUsedBytes = min(a.MemBytes, spec.MemTotalBytes)
	s.PowerW = clamp(spec.IdleW+(spec.PowerLimitW-spec.IdleW)*util/100*(1+rng.NormFloat64()*0.02), spec.IdleW*0.9, spec.PowerLimitW)
	s.TemperatureC = math.Round(30 + 50*util/100 + rng.NormFloat64())
	clocks(&s, spec)
	return s
}

// clocks sets the SM clock and throttle reasons the way a GPU shows them:
// idle clock when idle, boost clock under load, lowered under the power
// cap.
func clocks(s *gpuState, spec gpuSpec) {
	switch {
	case s.UtilGPUPct == 0:
		s.SMClockMHz, s.ThrottleReasons = spec.IdleMHz, reasonGPUIdle
	case s.PowerW >= 0.98*spec.PowerLimitW:
		s.SMClockMHz, s.ThrottleReasons = math.Round(spec.MaxSMClockMHz*0.85), reasonSWPowerCap
	default:
		s.SMClockMHz = spec.MaxSMClockMHz
	}
}

func clamp(x, lo, hi float64) float64 { return math.Max(lo, math.Min(hi, x)) }
