package nvml

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Mode chooses the NVML backend.
type Mode string

// The modes of Open.
const (
	ModeAuto Mode = "auto" // real NVML when libnvidia-ml.so loads, else a simulated host
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

// Open opens a host in the given mode. In ModeAuto it falls back to a
// simulated host built from sim, and logs that it did, when the real
// library does not load. The returned Sim is nil unless the host is
// simulated.
func Open(mode Mode, sim SimOptions, log *slog.Logger) (Host, *Sim, error) {
	switch mode {
	case ModeReal:
		h, err := OpenReal()
		return h, nil, err
	case ModeSim:
		s, err := NewSim(sim)
		return s, s, err
	case ModeAuto:
		h, err := OpenReal()
		if err == nil {
			return h, nil, nil
		}
		if !errors.Is(err, ErrNoLibrary) {
			return nil, nil, err
		}
		log.Info("NVML is not available: using a simulated host", "component", "nvml", "reason", err, "node", sim.Node.Name)
		s, err := NewSim(sim)
		return s, s, err
	}
	return nil, nil, fmt.Errorf("nvml: mode %q is not one of auto, real, sim", mode)
}
