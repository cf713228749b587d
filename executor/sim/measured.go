package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"

	"github.com/prescient-sched/prescient/cluster"
)

// MeasuredPower is a GPU model's draw measured on a fleet, as fractions of
// its board power limit: IdleFraction while below the idle threshold (the
// median of such minutes), LoadFraction while working (the mean).
type MeasuredPower struct {
	Model        string  `json:"model"`
	GPUs         int     `json:"gpus"`
	IdleMinutes  int     `json:"idle_minutes"`
	BusyMinutes  int     `json:"busy_minutes"`
	LimitW       float64 `json:"limit_w"`
	IdleFraction float64 `json:"idle_fraction"`
	LoadFraction float64 `json:"load_fraction"`
}

// PowerFile is a power model measured on a fleet's telemetry
// (training.FitPower writes it, simulate --power-model reads it).
type PowerFile struct {
	From         time.Time       `json:"from"`
	Until        time.Time       `json:"until"`
	ThresholdPct float64         `json:"threshold_pct"`
	Models       []MeasuredPower `json:"models"`
}

// Validate rejects a file no power model can come from; the errors name
// the field.
func (f *PowerFile) Validate() error {
	var errs []error
	if len(f.Models) == 0 {
		errs = append(errs, errors.New("models: none"))
	}
	seen := map[string]bool{}
	for i, m := range f.Models {
		at := fmt.Sprintf("models[%d]", i)
		key := familyKey(m.Model)
		switch {
		case key == "":
			errs = append(errs, fmt.Errorf("%s.model: empty", at))
		case seen[key]:
			errs = append(errs, fmt.Errorf("%s.model: %q twice", at, m.Model))
		}
		seen[key] = true
		if !(m.IdleFraction > 0 && m.IdleFraction <= 1) {
			errs = append(errs, fmt.Errorf("%s.idle_fraction: %g, want (0, 1]", at, m.IdleFraction))
		}
		if !(m.LoadFraction >= m.IdleFraction && m.LoadFraction <= 1.2) {
			errs = append(errs, fmt.Errorf("%s.load_fraction: %g, want between idle_fraction and 1.2", at, m.LoadFraction))
		}
		if m.LimitW < 0 || math.IsNaN(m.LimitW) || math.IsInf(m.LimitW, 0) {
			errs = append(errs, fmt.Errorf("%s.limit_w: %g, want a finite number of watts, not negative", at, m.LimitW))
		}
	}
	return errors.Join(errs...)
}

// ReadPowerFile reads a measured power model (JSON).
func ReadPowerFile(path string) (*PowerFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p, err := DecodePowerFile(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// DecodePowerFile decodes and validates a measured power model.
func DecodePowerFile(r io.Reader) (*PowerFile, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var p PowerFile
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("power model: %w", err)
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("power model: %w", err)
	}
	return &p, nil
}

// familyKey is a model name as families compare: upper case, without the
// "NVIDIA"/"Tesla" prefixes, spaces as dashes.
func familyKey(model string) string {
	m := strings.ToUpper(strings.TrimSpace(model))
	for _, p := range []string{"NVIDIA ", "TESLA "} {
		m = strings.TrimPrefix(m, p)
	}
	return strings.ReplaceAll(m, " ", "-")
}

// family is a model's family: its leading letters and the digits after
// them ("V100" of "V100-SXM2-32GB" and of "V100M32", "A100" of
// "A100-SXM4-80GB").
func family(key string) string {
	i := 0
	for i < len(key) && key[i] >= 'A' && key[i] <= 'Z' {
		i++
	}
	j := i
	for j < len(key) && key[j] >= '0' && key[j] <= '9' {
		j++
	}
	if i == 0 || j == i {
		return key
	}
	return key[:j]
}

// Power is a power model that takes the measured fractions of the board
// power limit for the GPUs of the models measured, the same model (as
// NVML's "Tesla V100-SXM2-32GB" is a fleet's "V100-SXM2-32GB") or else the
// same family (a fleet's "V100" or "V100M32"), and DefaultPower for the
// others.
func (f *PowerFile) Power() func(cluster.GPU) PowerModel {
	keys := make([]string, len(f.Models))
	for i, m := range f.Models {
		keys[i] = familyKey(m.Model)
	}
	return func(g cluster.GPU) PowerModel {
		k := familyKey(g.Model)
		best := -1
		for i, key := range keys {
			if key == k {
				best = i
				break
			}
			if best < 0 && k != "" && family(key) == family(k) {
				best = i
			}
		}
		if best < 0 {
			return DefaultPower(g)
		}
		limit := g.PowerLimitW
		if limit <= 0 {
			limit = f.Models[best].LimitW
		}
		if limit <= 0 {
			limit = fallbackLimitW
		}
		m := f.Models[best]
		return PowerModel{IdleW: m.IdleFraction * limit, BusyW: m.LoadFraction * limit}
	}
}
