package prescient

import (
	"math"
	"sync"
	"time"

	"github.com/prescient-sched/prescient/executor"
)

// The order ranks a job by its Gittins index (Gittins 1979; for the M/G/1
// queue, Aalto, Ayesta and Righter 2009), which minimises the mean response
// time when only the distribution of a job's length is known, as it is
// here: the forecast's P50 and P90 give a log-normal length of median m and
// σ = ln(P90/P50)/z₉₀. For a job that has attained a of service,
//
//	G = sup_{Δ>0} P(S ≤ a+Δ | S > a) / E[min(S, a+Δ) − a | S > a],
//
// the best chance to finish per unit of further work. The key uses 1/G, a
// length in seconds: the remaining P50 when the forecast is sure (σ → 0);
// shorter than the median when it is wide and the job has not run (a short
// first stretch may well finish it); for a wide forecast, longer once the
// job has run well past its median (for a narrow one it shrinks towards 0,
// the job being about to end). With lengths scaled by m, 1/G depends only on σ and α = a/m,
// so it is tabulated once over a grid of both and interpolated.

const (
	z90       = 1.2815515655446004 // the standard normal's 90th percentile
	gSigmaMax = 3.0
	gSigmaN   = 31 // σ = 0, 0.1, ..., 3
	gAlphaMin = 1e-3
	gAlphaMax = 1e3
	gAlphaN   = 61 // α log-spaced over [gAlphaMin, gAlphaMax]; column 0 is α = 0
	gGridN    = 4000
	gGridLo   = 1e-5
	gGridHi   = 1e5
)

var (
	gOnce  sync.Once
	gTable [gSigmaN][gAlphaN + 1]float64 // 1/G in units of m
	// gAlphaSpan is ln(gAlphaMax/gAlphaMin), taken once: the key of every
	// running job interpolates on it.
	gAlphaSpan = math.Log(gAlphaMax / gAlphaMin)
)

// gittinsLength is 1/G in seconds for the job's forecast and progress, at
// least one second.
func gittinsLength(v *executor.JobView) float64 { return spreadOf(v).length(v) }

// spread is what gittinsLength reads of a job's forecast: its median m (in
// seconds) and σ; m 0 when the forecast has no spread (the length is then
// the remaining P50).
type spread struct{ m, sigma float64 }

func spreadOf(v *executor.JobView) spread {
	p50, p90 := v.Forecast.DurationP50, v.Forecast.DurationP90
	if p50 <= 0 || p90 <= p50 {
		return spread{}
	}
	m := p50.Seconds()
	return spread{m: m, sigma: math.Log(p90.Seconds()/m) / z90}
}

// length is gittinsLength of v, whose forecast has spread s.
func (s spread) length(v *executor.JobView) float64 {
	if s.m == 0 {
		return v.RemainingP50().Seconds()
	}
	return max(s.m*scaledGittins(s.sigma, v.Progress.Seconds()/s.m), time.Second.Seconds())
}

// scaledGittins interpolates the table: 1/G for median 1, spread sigma and
// attained alpha.
func scaledGittins(sigma, alpha float64) float64 {
	gOnce.Do(buildGittins)
	s := math.Min(sigma, gSigmaMax) / gSigmaMax * (gSigmaN - 1)
	i := min(int(s), gSigmaN-2)
	fs := s - float64(i)
	var j int
	var fa float64
	switch {
	case !(alpha > 0):
		j, fa = 0, 0
	case alpha < gAlphaMin:
		j, fa = 0, alpha/gAlphaMin
	default:
		x := math.Log(math.Min(alpha, gAlphaMax)/gAlphaMin) / gAlphaSpan * (gAlphaN - 1)
		k := min(int(x), gAlphaN-2)
		j, fa = k+1, x-float64(k)
	}
	row := func(i int) float64 { return gTable[i][j]*(1-fa) + gTable[i][j+1]*fa }
	return row(i)*(1-fs) + row(i+1)*fs
}

// alphaAt is column j's attained service.
func alphaAt(j int) float64 {
	if j == 0 {
		return 0
	}
	return gAlphaMin * math.Pow(gAlphaMax/gAlphaMin, float64(j-1)/(gAlphaN-1))
}

// buildGittins fills gTable. For each σ it tabulates on a log grid of x the
// survival P(X > x) of X ~ LogNormal(0, σ) and its integral from 0
// (trapezoids), then for each α takes the best ratio of the chance to end
// by x to the expected work until x, over the grid points x > α.
func buildGittins() {
	xs := make([]float64, gGridN)
	for k := range xs {
		xs[k] = gGridLo * math.Pow(gGridHi/gGridLo, float64(k)/(gGridN-1))
	}
	surv := make([]float64, gGridN)
	cum := make([]float64, gGridN)
	for j := range gAlphaN + 1 {
		gTable[0][j] = math.Max(1-alphaAt(j), 0) // σ = 0: the remaining time
	}
	for si := 1; si < gSigmaN; si++ {
		sigma := float64(si) / (gSigmaN - 1) * gSigmaMax
		sv := func(x float64) float64 { return 0.5 * math.Erfc(math.Log(x)/(sigma*math.Sqrt2)) }
		for k, x := range xs {
			surv[k] = sv(x)
		}
		cum[0] = xs[0] // P(X > x) is 1 below the grid
		for k := 1; k < gGridN; k++ {
			cum[k] = cum[k-1] + (surv[k]+surv[k-1])/2*(xs[k]-xs[k-1])
		}
		for j := range gAlphaN + 1 {
			alpha := alphaAt(j)
			k0, sa, ca := 0, 1.0, alpha
			if alpha > xs[0] {
				k0 = gridIndex(xs, alpha)
				sa = sv(alpha)
				ca = cum[k0] + surv[k0]*(alpha-xs[k0])
			}
			best := 0.0
			for k := k0 + 1; k < gGridN && sa > 0; k++ {
				if work := cum[k] - ca; work > 0 {
					best = math.Max(best, (sa-surv[k])/work)
				}
			}
			switch {
			case best > 0:
				gTable[si][j] = 1 / best
			case j > 0: // beyond the grid's reach: as the column before
				gTable[si][j] = gTable[si][j-1]
			}
		}
	}
}

// gridIndex is the last k with xs[k] ≤ a (xs ascending, xs[0] ≤ a).
func gridIndex(xs []float64, a float64) int {
	lo, hi := 0, len(xs)-1
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if xs[mid] <= a {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}
