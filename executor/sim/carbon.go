package sim

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// CarbonSeries is the carbon intensity of the grid over time, in grams of
// CO2 per kWh: each value holds from its time until the next one (the first
// also before it, the last after it).
type CarbonSeries struct {
	times  []time.Time
	gPerKW []float64 // gCO2/kWh
}

// maxCarbonGPerKWh bounds a plausible intensity (coal plants emit about
// 1,000 gCO2/kWh).
const maxCarbonGPerKWh = 5000

// NewCarbonSeries checks and builds a series: at least one point, times
// strictly increasing, values in 0..5000 gCO2/kWh.
func NewCarbonSeries(times []time.Time, gPerKWh []float64) (*CarbonSeries, error) {
	if len(times) == 0 || len(times) != len(gPerKWh) {
		return nil, errors.New("carbon series: no points, or times and values differ in number")
	}
	for i := range times {
		if i > 0 && !times[i].After(times[i-1]) {
			return nil, fmt.Errorf("carbon series: point %d (%s) is not after the one before", i+1, times[i].Format(time.RFC3339))
		}
		if v := gPerKWh[i]; !(v >= 0 && v <= maxCarbonGPerKWh) {
			return nil, fmt.Errorf("carbon series: point %d: %g gCO2/kWh is outside 0..%d", i+1, v, maxCarbonGPerKWh)
		}
	}
	return &CarbonSeries{times: slices.Clone(times), gPerKW: slices.Clone(gPerKWh)}, nil
}

// At is the intensity at t.
func (c *CarbonSeries) At(t time.Time) float64 {
	i, _ := slices.BinarySearchFunc(c.times, t, func(x, t time.Time) int { return x.Compare(t) })
	if i < len(c.times) && c.times[i].Equal(t) {
		return c.gPerKW[i]
	}
	return c.gPerKW[max(i-1, 0)]
}

// Integral is ∫ intensity dt over [a, b], in gCO2/kWh × seconds: times a
// draw in W and divided by 3.6e6, it gives grams.
func (c *CarbonSeries) Integral(a, b time.Time) float64 {
	if !b.After(a) {
		return 0
	}
	sum := 0.0
	i, _ := slices.BinarySearchFunc(c.times, a, func(x, t time.Time) int { return x.Compare(t) })
	if i == len(c.times) || !c.times[i].Equal(a) {
		i-- // the point in force at a (−1: before the first)
	}
	for t := a; t.Before(b); i++ {
		next := b
		if i+1 < len(c.times) && c.times[i+1].Before(b) {
			next = c.times[i+1]
		}
		sum += c.gPerKW[max(i, 0)] * next.Sub(t).Seconds()
		t = next
	}
	return sum
}

// gramsOf is the CO2 of drawing w watts over [a, b]; zero without a series.
func (s *Simulator) gramsOf(w float64, a, b time.Time) float64 {
	if s.cfg.Carbon == nil || w == 0 {
		return 0
	}
	return w * s.cfg.Carbon.Integral(a, b) / 3.6e6
}

// Cleanest is the earliest time in [from, to] at which the intensity is
// lowest, with that intensity (executor.Carbon: the replay knows the
// series it is given, a perfect forecast).
func (c *CarbonSeries) Cleanest(from, to time.Time) (time.Time, float64) {
	at, best := from, c.At(from)
	i, _ := slices.BinarySearchFunc(c.times, from, func(x, t time.Time) int { return x.Compare(t) })
	for ; i < len(c.times) && !c.times[i].After(to); i++ {
		if c.times[i].After(from) && c.gPerKW[i] < best {
			at, best = c.times[i], c.gPerKW[i]
		}
	}
	return at, best
}
