package models

import (
	"math"
	"time"
)

// Online refinement of a running job's GPU-memory footprint: after
// watching the first minutes of its memory series, forecast the peak over
// the next hours, relative to the peak so far. The learners are the same
// Regressors; the target is log(future peak / peak so far).

// PeakWindow fixes what is watched and what is forecast.
type PeakWindow struct {
	Observe time.Duration // how long the series is watched, e.g. 10 minutes
	Horizon time.Duration // how far ahead the peak is forecast, e.g. 2 hours
	// MinSamples is the fewest samples the watched window needs.
	MinSamples int
}

// DefaultPeakWindow watches 10 minutes (at least 3 samples) and forecasts
// the peak of the next 2 hours.
func DefaultPeakWindow() PeakWindow {
	return PeakWindow{Observe: 10 * time.Minute, Horizon: 2 * time.Hour, MinSamples: 3}
}

// PeakFeatureNames lists the columns PeakFeatures returns.
func PeakFeatureNames() []string {
	return []string{"peak_log", "last_rel", "first_rel", "mean_rel", "min_rel", "std_rel", "slope_rel_per_h", "samples", "zero_share"}
}

// PeakFeatures describes the samples of the watched window (times
// increasing, values ≥ 0) relative to its peak, so that they do not depend
// on the series' unit. ok is false when the window has too few samples or
// its peak is zero.
func (w PeakWindow) PeakFeatures(times []time.Time, values []float64) (x []float64, peak float64, ok bool) {
	n := len(values)
	if n < max(w.MinSamples, 2) {
		return nil, 0, false
	}
	lo, sum, zeros := math.Inf(1), 0.0, 0
	for _, v := range values {
		peak = math.Max(peak, v)
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
	hours := times[n-1].Sub(times[0]).Hours()
	slope := 0.0
	if hours > 0 {
		slope = (values[n-1] - values[0]) / peak / hours
	}
	x = []float64{math.Log(peak), values[n-1] / peak, values[0] / peak, mean / peak, lo / peak,
		math.Sqrt(ss/float64(n)) / peak, slope, float64(n), float64(zeros) / float64(n)}
	return x, peak, true
}

// PeakExample is one watched window and what followed it.
type PeakExample struct {
	ID         string // the series
	Origin     time.Time
	X          []float64
	PeakSoFar  float64
	FuturePeak float64
}

// Examples cuts a series into examples: a window starting at each origin
// step apart, watched for Observe, followed by Horizon of which at least
// half must be sampled.
func (w PeakWindow) Examples(id string, times []time.Time, values []float64, step time.Duration) []PeakExample {
	var out []PeakExample
	if len(times) == 0 || step <= 0 {
		return nil
	}
	i := 0
	for origin := times[0]; !origin.Add(w.Observe + w.Horizon).After(times[len(times)-1]); origin = origin.Add(step) {
		for i < len(times) && times[i].Before(origin) {
			i++
		}
		j := i
		for j < len(times) && times[j].Before(origin.Add(w.Observe)) {
			j++
		}
		k := j
		future := 0.0
		for k < len(times) && !times[k].After(origin.Add(w.Observe+w.Horizon)) {
			future = math.Max(future, values[k])
			k++
		}
		if k == j || times[k-1].Sub(times[j]) < w.Horizon/2 {
			continue
		}
		x, peak, ok := w.PeakFeatures(times[i:j], values[i:j])
		if !ok {
			continue
		}
		out = append(out, PeakExample{ID: id, Origin: origin, X: x, PeakSoFar: peak, FuturePeak: future})
	}
	return out
}

// PeakTarget is what a learner fits for an example: log(future peak / peak
// so far), with the future peak at least one millionth of the peak so far.
func PeakTarget(e PeakExample) float64 {
	return math.Log(math.Max(e.FuturePeak, e.PeakSoFar*1e-6) / e.PeakSoFar)
}
