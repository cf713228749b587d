package executor

import (
	"math"
	"testing"
	"time"
)

func TestDurationDistIsConditionalOnTheRunSoFar(t *testing.T) {
	d := NewDurationDist(time.Hour, 4*time.Hour)
	if got := d.EndWithin(0, time.Hour); math.Abs(got-0.5) > 1e-9 {
		t.Errorf("EndWithin(0, P50) = %g, want 0.5", got)
	}
	if got := d.EndWithin(0, 4*time.Hour); math.Abs(got-0.9) > 1e-9 {
		t.Errorf("EndWithin(0, P90) = %g, want 0.9", got)
	}
	for _, ran := range []time.Duration{0, 30 * time.Minute, 2 * time.Hour, 48 * time.Hour} {
		for _, q := range []float64{0.1, 0.5, 0.9} {
			r := d.Remaining(ran, q)
			if got := d.EndWithin(ran, r); math.Abs(got-q) > 1e-3 {
				t.Errorf("ran %s: EndWithin(Remaining(%g)) = %g", ran, q, got)
			}
		}
	}
	// Having lasted longer, a job's remaining median grows (heavy tail).
	if a, b := d.Remaining(time.Hour, 0.5), d.Remaining(4*time.Hour, 0.5); b <= a {
		t.Errorf("remaining P50 after 1 h %s, after 4 h %s: want it to grow", a, b)
	}
	// Far past its forecast a job is still expected to run on: the
	// remaining median keeps growing with the time run, and it does not
	// end within a minute for sure.
	for _, d := range []DurationDist{NewDurationDist(30*time.Minute, 45*time.Minute), NewDurationDist(time.Hour, time.Hour)} {
		last := time.Duration(0)
		for _, ran := range []time.Duration{time.Hour, 7 * time.Hour, 48 * time.Hour, 1000 * time.Hour} {
			r := d.Remaining(ran, 0.5)
			if r <= last || r < time.Minute {
				t.Errorf("%+v after %s: remaining P50 %s, after less %s", d, ran, r, last)
			}
			last = r
			if p := d.EndWithin(ran, time.Minute); !(p >= 0 && p < 0.9) {
				t.Errorf("%+v after %s: ends within a minute with chance %g", d, ran, p)
			}
		}
	}
}
