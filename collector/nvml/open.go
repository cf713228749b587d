package nvml

import (
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Mode chooses the NVML backend.
type Mode string

// The modes of Open.
const (
	ModeAuto Mode = "auto" // real NVML when libnvidia-ml.so loads, else an error that names ModeSim
	ModeReal Mode = "real" // real NVML or an error
	ModeSim  Mode = "sim"  // a simulated host
)

// ParseMode reads "auto", "real" or "sim".
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case ModeAuto, ModeReal, ModeSim:
		return m, nil
	}
	return "", fmt.Errorf("%q is not one of auto, real, sim", s)
}

// OpenReal opens the machine's GPUs through libnvidia-ml.so. Without the
// library the error wraps ErrNoLibrary.
func OpenReal() (Host, error) {
	h, err := newNVMLHost(nvml.New())
	if err != nil {
		return nil, err
	}
	return h, nil
}

// Open opens a host in the given mode. Simulated GPUs come only from
// ModeSim: a production node without its driver must not report made-up
// figures, so ModeAuto, like ModeReal, fails there (the error wraps
// ErrNoLibrary). The returned Sim is nil unless the host is simulated.
func Open(mode Mode, sim SimOptions) (Host, *Sim, error) {
	switch mode {
	case ModeReal, ModeAuto:
		h, err := OpenReal()
		return h, nil, err
	case ModeSim:
		s, err := NewSim(sim)
		return s, s, err
	}
	return nil, nil, fmt.Errorf("nvml: mode %q is not one of auto, real, sim", mode)
}
