package idle

import (
	"math"
	"time"
)

// FeatureNames are the columns of the model's rows, in order. Shares are
// idle units over the pool's size; "_change" features are relative to the
// idle share now.
var FeatureNames = []string{
	"idle_share",              // now
	"change_5m", "change_15m", // now minus 5 and 15 minutes ago
	"change_60m",
	"mean_15m_vs_now", "mean_60m_vs_now", "mean_240m_vs_now",
	"min_60m_vs_now", "max_60m_vs_now",
	"day_ago_change",    // the share a day before the target minus a day before now
	"day_ago_known",     // 1 when the day before is on record
	"day_ago_vs_now",    // the share a day before the target minus now
	"week_ago_change",   // the same a week before
	"week_ago_known",    //
	"demand_share",      // queued demand over the pool's size, now
	"demand_share_60m",  // its mean over the last hour
	"target_hour_sin",   // hour of day of the target time (UTC)
	"target_hour_cos",   //
	"target_weekend",    // 1 on Saturday and Sunday
	"horizon_2h",        // how far ahead, in units of 2 hours
	"log_capacity",      // log(1 + the pool's size)
	"log_unchanged_min", // log(1 + minutes since the idle count last changed), capped at a day
}

const (
	nFeatures  = 22
	maxLookMin = 240 // the longest look back of the rolling features, minutes
)

// HistoryNeeded is how many grid points before an origin the features
// look at (beyond the day- and week-ago values, which are optional).
func HistoryNeeded(step time.Duration) int { return int(maxLookMin*time.Minute/step) + 1 }

// origin holds the features of an origin that do not depend on the
// horizon.
type origin struct {
	f0, cap0         float64
	base             [nFeatures]float64
	dayAgoNow        float64 // share a day before now, NaN when unknown
	weekAgoNow       float64
	steps1d, steps1w int
}

// steps converts a duration to grid steps, at least 1.
func steps(d, step time.Duration) int { return max(int((d+step/2)/step), 1) }

// originAt computes origin i's features; ok is false when the pool has no
// value at i.
func originAt(p *Pool, i int) (o origin, ok bool) {
	if !p.known(i) {
		return o, false
	}
	o.f0, o.cap0 = p.frac(i), p.Capacity[i]
	back := func(d time.Duration) float64 {
		v := p.frac(i - steps(d, p.Step))
		if math.IsNaN(v) {
			return o.f0
		}
		return v
	}
	window := func(d time.Duration) (mean, lo, hi float64) {
		n, s := 0, 0.0
		lo, hi = o.f0, o.f0
		for j := i - steps(d, p.Step) + 1; j <= i; j++ {
			v := p.frac(j)
			if math.IsNaN(v) {
				continue
			}
			n++
			s += v
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
		return s / float64(max(n, 1)), lo, hi
	}
	b := &o.base
	b[0] = o.f0
	b[1], b[2], b[3] = o.f0-back(5*time.Minute), o.f0-back(15*time.Minute), o.f0-back(time.Hour)
	m15, _, _ := window(15 * time.Minute)
	m60, lo60, hi60 := window(time.Hour)
	m240, _, _ := window(maxLookMin * time.Minute)
	b[4], b[5], b[6], b[7], b[8] = m15-o.f0, m60-o.f0, m240-o.f0, lo60-o.f0, hi60-o.f0
	b[14] = p.Demand[i] / o.cap0
	d60, n := 0.0, 0
	for j := max(i-steps(time.Hour, p.Step)+1, 0); j <= i; j++ {
		if p.known(j) {
			d60 += p.Demand[j] / p.Capacity[j]
			n++
		}
	}
	b[15] = d60 / float64(max(n, 1))
	b[20] = math.Log1p(o.cap0)
	same, limit := 0, steps(24*time.Hour, p.Step)
	for same < limit && p.known(i-same-1) && p.Idle[i-same-1] == p.Idle[i] {
		same++
	}
	b[21] = math.Log1p(float64(same) * p.Step.Minutes())
	o.steps1d, o.steps1w = steps(24*time.Hour, p.Step), steps(7*24*time.Hour, p.Step)
	o.dayAgoNow, o.weekAgoNow = p.frac(i-o.steps1d), p.frac(i-o.steps1w)
	return o, true
}

// row writes origin i's features for k steps ahead into dst.
func (o *origin) row(p *Pool, i, k int, dst []float64) {
	copy(dst, o.base[:])
	day := p.frac(i + k - o.steps1d)
	if !math.IsNaN(day) && !math.IsNaN(o.dayAgoNow) && i+k-o.steps1d <= i {
		dst[9], dst[10], dst[11] = day-o.dayAgoNow, 1, day-o.f0
	} else {
		dst[9], dst[10], dst[11] = 0, 0, 0
	}
	week := p.frac(i + k - o.steps1w)
	if !math.IsNaN(week) && !math.IsNaN(o.weekAgoNow) {
		dst[12], dst[13] = week-o.weekAgoNow, 1
	} else {
		dst[12], dst[13] = 0, 0
	}
	t := p.Time(i + k)
	h := (float64(t.Hour()) + float64(t.Minute())/60) * 2 * math.Pi / 24
	dst[16], dst[17] = math.Sin(h), math.Cos(h)
	dst[18] = 0
	if wd := t.Weekday(); wd == time.Saturday || wd == time.Sunday {
		dst[18] = 1
	}
	dst[19] = (time.Duration(k) * p.Step).Hours() / 2
}
