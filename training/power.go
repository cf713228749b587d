package training

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/prescient-sched/prescient/collector"
	"github.com/prescient-sched/prescient/executor/sim"
	"github.com/prescient-sched/prescient/models"
)

const (
	// PowerFitMaxGPUs bounds the GPUs whose series FitPower reads, chosen
	// by a hash of their UUIDs.
	PowerFitMaxGPUs = 512
	// MinPowerMinutes is how many idle and how many working minutes a GPU
	// model needs before its draw is fitted.
	MinPowerMinutes = 60
	// powerChunk is the span of one query.
	powerChunk = 6 * time.Hour
)

// ErrNoPowerData is returned when no GPU model has enough idle and working
// minutes with power readings.
var ErrNoPowerData = errors.New("not enough power telemetry")

// FitPower measures each GPU model's draw on the fleet from its telemetry
// between from and until: per GPU and minute the mean utilization, power
// and power limit (for at most PowerFitMaxGPUs GPUs, minutes under a power
// cap left out); a minute below thresholdPct utilization is idle, others
// working. A model's IdleFraction
// is the median idle draw over its limit, its LoadFraction the mean working
// draw over its limit (the simulator's busy GPU is a working one); models
// with fewer than MinPowerMinutes of either are left out (the simulator
// keeps the Zeus-seeded defaults for them).
func FitPower(ctx context.Context, ts collector.TelemetryStore, from, until time.Time, thresholdPct float64) (*sim.PowerFile, error) {
	from, until = from.UTC().Truncate(time.Minute), until.UTC().Truncate(time.Minute)
	if !until.After(from) {
		return nil, fmt.Errorf("power fit: window [%s, %s) is empty", from.Format(time.RFC3339), until.Format(time.RFC3339))
	}
	if !(thresholdPct > 0 && thresholdPct <= 100) {
		return nil, fmt.Errorf("power fit: idle threshold %g%%: want (0, 100]", thresholdPct)
	}
	// 1. The GPUs with power readings in the window, and their models.
	listed, err := ts.Query(ctx, collector.SeriesQuery{Field: "power_w", Start: from, End: until, Step: until.Sub(from), Agg: "last"})
	if err != nil {
		return nil, fmt.Errorf("power fit: the GPUs: %w", err)
	}
	model := map[string]string{}
	var gpus []string
	for _, s := range listed {
		if s.GPU != "" && s.Model != "" && len(s.Points) > 0 {
			if _, ok := model[s.GPU]; !ok {
				gpus = append(gpus, s.GPU)
			}
			model[s.GPU] = s.Model
		}
	}
	slices.SortFunc(gpus, func(a, b string) int { return cmp.Compare(uuidHash(a), uuidHash(b)) })
	gpus = gpus[:min(len(gpus), PowerFitMaxGPUs)]
	if len(gpus) == 0 {
		return nil, fmt.Errorf("power fit: %w: no GPU with a model and power readings in [%s, %s)", ErrNoPowerData,
			from.Format(time.RFC3339), until.Format(time.RFC3339))
	}
	// 2. The highest limit in the window: a minute under a lower one ran
	// capped (the plan's power caps) and would read as a different GPU, so
	// it is left out.
	top, err := ts.Query(ctx, collector.SeriesQuery{Field: "power_limit_w", GPUs: gpus, Start: from, End: until, Step: until.Sub(from), Agg: "max"})
	if err != nil {
		return nil, fmt.Errorf("power fit: the GPUs' limits: %w", err)
	}
	// The reference is the highest limit of any GPU of the same model, so
	// that a GPU capped all window long is left out too.
	maxLimit := map[string]float64{} // by model
	for _, s := range top {
		for _, p := range s.Points {
			maxLimit[model[s.GPU]] = max(maxLimit[model[s.GPU]], p.Value)
		}
	}
	// 3. A chunk at a time, minutes of utilization, power and limit joined
	// by GPU and minute, added to their model's idle and working draw.
	type minute struct {
		util, power, limit float64
		has                uint8 // bits: 1 util, 2 power, 4 limit
	}
	type key struct {
		gpu string
		t   int64
	}
	type acc struct {
		idle    []float64
		busySum float64
		busyN   int
		limits  []float64
		gpus    map[string]bool
	}
	per := map[string]*acc{}
	fields := []struct {
		bit  uint8
		name string
	}{{1, "util_gpu_pct"}, {2, "power_w"}, {4, "power_limit_w"}}
	for lo := from; lo.Before(until); lo = lo.Add(powerChunk) {
		hi := lo.Add(powerChunk)
		if hi.After(until) {
			hi = until
		}
		byMinute := map[key]*minute{}
		for _, f := range fields {
			series, err := ts.Query(ctx, collector.SeriesQuery{Field: f.name, GPUs: gpus, Start: lo, End: hi, Step: time.Minute, Agg: "mean"})
			if err != nil {
				return nil, fmt.Errorf("power fit: %s from %s: %w", f.name, lo.Format(time.RFC3339), err)
			}
			for _, s := range series {
				for _, p := range s.Points {
					k := key{s.GPU, p.Time.Unix() / 60}
					m := byMinute[k]
					if m == nil {
						m = &minute{}
						byMinute[k] = m
					}
					switch f.bit {
					case 1:
						m.util = p.Value
					case 2:
						m.power = p.Value
					default:
						m.limit = p.Value
					}
					m.has |= f.bit
				}
			}
		}
		for k, m := range byMinute {
			if m.has != 7 || m.limit <= 0 || m.power < 0 || m.limit < 0.99*maxLimit[model[k.gpu]] {
				continue
			}
			name := model[k.gpu]
			a := per[name]
			if a == nil {
				a = &acc{gpus: map[string]bool{}}
				per[name] = a
			}
			a.gpus[k.gpu] = true
			a.limits = append(a.limits, m.limit)
			f := m.power / m.limit
			if m.util < thresholdPct {
				a.idle = append(a.idle, f)
			} else {
				a.busySum += f
				a.busyN++
			}
		}
	}
	out := &sim.PowerFile{From: from, Until: until, ThresholdPct: thresholdPct}
	for name, a := range per {
		if len(a.idle) < MinPowerMinutes || a.busyN < MinPowerMinutes {
			continue
		}
		idle, load := median(a.idle), a.busySum/float64(a.busyN)
		out.Models = append(out.Models, sim.MeasuredPower{Model: name, GPUs: len(a.gpus), IdleMinutes: len(a.idle),
			BusyMinutes: a.busyN, LimitW: median(a.limits), IdleFraction: idle, LoadFraction: max(load, idle)})
	}
	if len(out.Models) == 0 {
		return nil, fmt.Errorf("power fit: %w: no GPU model has %d idle and %d working minutes with power and limit readings",
			ErrNoPowerData, MinPowerMinutes, MinPowerMinutes)
	}
	slices.SortFunc(out.Models, func(a, b sim.MeasuredPower) int { return cmp.Compare(a.Model, b.Model) })
	if err := out.Validate(); err != nil {
		return nil, fmt.Errorf("power fit: %w", err)
	}
	return out, nil
}

// median of xs (which it sorts).
func median(xs []float64) float64 {
	slices.Sort(xs)
	return models.QuantileSorted(xs, 0.5)
}
