package executor

import (
	"math"
	"time"
)

// minSigma is the least spread DurationDist assumes. Learned duration
// forecasts miss by a factor of e^0.96 on average (the Philly evaluation's
// mae_log), so none is taken as tighter than this; a narrower log-normal
// would also say that a job well past its P90 must end within seconds,
// when it is more likely running long.
const minSigma = 0.5

// DurationDist is a job's run time as a log-normal through its forecast's
// P50 and P90: what the idle forecasts and forecast-driven parking assume
// of a running job's end. Its tail is computed in log space, so a job far
// past its forecast is still expected to run on, not to end at once.
type DurationDist struct{ mu, sigma float64 }

// NewDurationDist is the log-normal with median p50 and, spread allowing,
// 90th percentile p90 (each at least a second; p90 at least p50; the
// spread at least minSigma, which puts the P90 at least 1.9 × the P50).
func NewDurationDist(p50, p90 time.Duration) DurationDist {
	p50 = max(p50, time.Second)
	p90 = max(p90, p50)
	mu := math.Log(p50.Seconds())
	return DurationDist{mu: mu, sigma: math.Max((math.Log(p90.Seconds())-mu)/z90, minSigma)}
}

// z is t's standard score; -Inf for t <= 0.
func (d DurationDist) z(t time.Duration) float64 {
	if t <= 0 {
		return math.Inf(-1)
	}
	return (math.Log(t.Seconds()) - d.mu) / d.sigma
}

// logQ is the log of the standard normal's upper tail at z: by erfc,
// which keeps its relative accuracy until it underflows near z = 37, and
// beyond z = 30 by the asymptotic series (error there about 1e-8).
func logQ(z float64) float64 {
	if z < 30 {
		return math.Log(0.5 * math.Erfc(z/math.Sqrt2))
	}
	z2 := z * z
	return -z2/2 - math.Log(z) - 0.5*math.Log(2*math.Pi) + math.Log1p(-1/z2+3/(z2*z2)-15/(z2*z2*z2))
}

// Survival is the chance that the job runs longer than t.
func (d DurationDist) Survival(t time.Duration) float64 {
	return math.Exp(logQ(d.z(t)))
}

// EndWithin is the chance that a job that has run for ran ends within the
// next within.
func (d DurationDist) EndWithin(ran, within time.Duration) float64 {
	if within <= 0 {
		return 0
	}
	return math.Min(math.Max(-math.Expm1(logQ(d.z(ran+within))-logQ(d.z(ran))), 0), 1)
}

// Remaining is the q-quantile of what is left of a job that has run for
// ran, given that it has lasted so far: the end e with
// P(D > e | D > ran) = 1 − q. A job past its P50 is still expected to end
// later, not now. At least a second.
func (d DurationDist) Remaining(ran time.Duration, q float64) time.Duration {
	q = math.Min(math.Max(q, 1e-9), 1-1e-9)
	var ze float64
	if ls := logQ(d.z(ran)) + math.Log(1-q); ls > -25 {
		ze = math.Sqrt2 * math.Erfcinv(2*math.Exp(ls))
	} else { // far out, where Erfcinv loses its precision: Newton on log Q
		ze = math.Sqrt(-2 * ls)
		for range 8 {
			// d/dz log Q(z) = -φ(z)/Q(z).
			slope := -math.Exp(-ze*ze/2 - 0.5*math.Log(2*math.Pi) - logQ(ze))
			ze -= (logQ(ze) - ls) / slope
		}
	}
	// At most a century: far beyond any forecast, within time.Duration.
	e := time.Duration(math.Min(math.Exp(d.mu+d.sigma*ze), 100*365*24*3600) * float64(time.Second))
	return max(e-ran, time.Second)
}
