package executor

import (
	"math"
	"time"
)

// DurationDist is a job's run time as a log-normal through its forecast's
// P50 and P90: what the idle forecasts and forecast-driven parking assume
// of a running job's end.
type DurationDist struct{ mu, sigma float64 }

// NewDurationDist is the log-normal through p50 and p90 (each at least a
// second; p90 at least p50).
func NewDurationDist(p50, p90 time.Duration) DurationDist {
	p50 = max(p50, time.Second)
	p90 = max(p90, p50)
	mu := math.Log(p50.Seconds())
	return DurationDist{mu: mu, sigma: math.Max((math.Log(p90.Seconds())-mu)/z90, 1e-3)}
}

// Survival is the chance that the job runs longer than t.
func (d DurationDist) Survival(t time.Duration) float64 {
	if t <= 0 {
		return 1
	}
	return 0.5 * math.Erfc((math.Log(t.Seconds())-d.mu)/(d.sigma*math.Sqrt2))
}

// EndWithin is the chance that a job that has run for ran ends within the
// next within.
func (d DurationDist) EndWithin(ran, within time.Duration) float64 {
	s := d.Survival(ran)
	if s <= 0 {
		return 1
	}
	return 1 - d.Survival(ran+within)/s
}

// Remaining is the q-quantile of what is left of a job that has run for
// ran, given that it has lasted so far: a job past its P50 is still
// expected to end later, not now. At least a second.
func (d DurationDist) Remaining(ran time.Duration, q float64) time.Duration {
	// The end e with P(D > e | D > ran) = 1 − q: Φ((ln e − μ)/σ) = 1 − (1−q)·S(ran).
	p := 1 - (1-q)*d.Survival(ran)
	if p >= 1 {
		p = math.Nextafter(1, 0)
	}
	z := math.Sqrt2 * math.Erfinv(2*p-1)
	e := time.Duration(math.Exp(d.mu+d.sigma*z) * float64(time.Second))
	return max(e-ran, time.Second)
}
