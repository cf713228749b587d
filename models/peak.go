package models

import (
	"math"
	"time"
)

// Online refinement of a running job's GPU-memory footprint: once the
// first minutes of its memory series have been watched, and again at every
// refinement point after that, forecast the peak over the next hours from
// everything seen so far, relative to the peak so far. The learners are the
// same Regressors; the target is log(future peak / peak so far).

// PeakWindow fixes what is watched and what is forecast.
type PeakWindow struct {
	Observe time.Duration // the least that is watched before a first forecast, e.g. 10 minutes
	Horizon time.Duration // how far ahead the peak is forecast, e.g. 2 hours
	// MinSamples is the fewest samples the first Observe of a series needs.
	MinSamples int
}

// DefaultPeakWindow watches at least 10 minutes (at least 3 samples) and
// forecasts the peak of the next 2 hours.
func DefaultPeakWindow() PeakWindow {
	return PeakWindow{Observe: 10 * time.Minute, Horizon: 2 * time.Hour, MinSamples: 3}
}

// PeakFeatureNames lists the columns PeakFeatures returns. Values are
// relative to the peak so far (_rel), so that they do not depend on the
// series' unit; "recent" is the last Observe of what was seen.
func PeakFeatureNames() []string {
	return []string{"peak_log", "age_log_s", "since_peak_share", "last_rel", "first_rel", "mean_rel", "min_rel",
		"std_rel", "recent_max_rel", "recent_mean_rel", "recent_min_rel", "recent_slope_rel_per_h", "samples_log", "zero_share"}
}

// PeakFeatures describes the samples seen so far of a series (times
// increasing, values ≥ 0; from the job's start to now). ok is false when
// the first Observe holds fewer than MinSamples samples, when less than
// Observe has been seen, or when the peak so far is zero.
func (w PeakWindow) PeakFeatures(times []time.Time, values []float64) (x []float64, peak float64, ok bool) {
	n := len(values)
	if n < max(w.MinSamples, 2) || n != len(times) {
		return nil, 0, false
	}
	start, now := times[0], times[n-1]
	if now.Sub(start) < w.Observe-w.Observe/5 {
		return nil, 0, false // sampling jitter may leave the last sample a little short of Observe
	}
	lo, sum, zeros, peakAt := math.Inf(1), 0.0, 0, 0
	for i, v := range values {
		if v > peak {
			peak, peakAt = v, i
		}
		lo = math.Min(lo, v)
		sum += v
		if v == 0 {
			zeros++
		}
	}
	if !(peak > 0) {
		return nil, 0, false
	}
	mean := sum / float64(n)
	ss := 0.0
	for _, v := range values {
		ss += (v - mean) * (v - mean)
	}
	// The recent window: the last Observe.
	r := n - 1
	for r > 0 && now.Sub(times[r-1]) <= w.Observe {
		r--
	}
	rmax, rmin, rsum := 0.0, math.Inf(1), 0.0
	for _, v := range values[r:] {
		rmax, rmin, rsum = math.Max(rmax, v), math.Min(rmin, v), rsum+v
	}
	rn := float64(n - r)
	slope := 0.0
	if h := now.Sub(times[r]).Hours(); h > 0 {
		slope = (values[n-1] - values[r]) / peak / h
	}
	age := now.Sub(start).Seconds()
	sincePeak := 0.0
	if age > 0 {
		sincePeak = now.Sub(times[peakAt]).Seconds() / age
	}
	x = []float64{math.Log(peak), math.Log1p(age), sincePeak, values[n-1] / peak, values[0] / peak, mean / peak, lo / peak,
		math.Sqrt(ss/float64(n)) / peak, rmax / peak, rsum / rn / peak, rmin / peak, slope,
		math.Log1p(float64(n)), float64(zeros) / float64(n)}
	return x, peak, true
}

// PeakExample is what had been seen of a series at a refinement point and
// what followed it.
type PeakExample struct {
	ID         string    // the series
	Origin     time.Time // the refinement point: the end of what was seen
	First      bool      // the first refinement point, after the first Observe
	X          []float64
	PeakSoFar  float64
	FuturePeak float64
}

// Examples cuts a series into examples: refinement points at the series'
// start + Observe and every step after it, each seeing the series from its
// start, followed by Horizon of which at least half must be sampled.
func (w PeakWindow) Examples(id string, times []time.Time, values []float64, step time.Duration) []PeakExample {
	var out []PeakExample
	if len(times) == 0 || step <= 0 || len(times) != len(values) {
		return nil
	}
	first := times[0].Add(w.Observe)
	j := 0
	for origin := first; !origin.Add(w.Horizon).After(times[len(times)-1]); origin = origin.Add(step) {
		for j < len(times) && times[j].Before(origin) {
			j++
		}
		if origin.Equal(first) && j < max(w.MinSamples, 2) {
			return nil // too sparse a start: the first forecast could not be made
		}
		k := j
		future := 0.0
		for k < len(times) && !times[k].After(origin.Add(w.Horizon)) {
			future = math.Max(future, values[k])
			k++
		}
		if k == j || times[k-1].Sub(times[j]) < w.Horizon/2 {
			continue
		}
		x, peak, ok := w.PeakFeatures(times[:j], values[:j])
		if !ok {
			continue
		}
		out = append(out, PeakExample{ID: id, Origin: origin, First: origin.Equal(first), X: x, PeakSoFar: peak, FuturePeak: future})
	}
	return out
}

// PeakTarget is what a learner fits for an example: log(future peak / peak
// so far), with the future peak at least one millionth of the peak so far.
func PeakTarget(e PeakExample) float64 {
	return math.Log(math.Max(e.FuturePeak, e.PeakSoFar*1e-6) / e.PeakSoFar)
}
