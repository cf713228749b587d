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
	// Far in the tail: finite, at least a second, and the end is near certain
	// within a long time.
	if r := NewDurationDist(time.Minute, time.Minute).Remaining(1000*time.Hour, 0.5); r < time.Second {
		t.Errorf("far past the tail: %s", r)
	}
}
