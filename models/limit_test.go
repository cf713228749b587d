package models

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestLimitCalibration(t *testing.T) {
	p := LimitPolicy{RunPast: 0.05, Window: 100, MinAll: 40, MinUser: 20, MinUserLimit: 10, Unit: time.Minute}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	c := NewLimitCalibration(p)
	hour := 4 * time.Hour
	median := math.Log(1000) // every forecast says 1,000 s

	// Before any outcome: the user's own limit, or nothing without one.
	if got := c.Recommend("steady", median, hour); got != hour {
		t.Fatalf("uncalibrated: %s, want the request", got)
	}
	if got := c.Recommend("steady", median, 0); got != 0 {
		t.Fatalf("uncalibrated without a request: %s, want none", got)
	}

	// A user whose jobs run 900-1,100 s gets a limit just above them,
	// rounded up to a minute; a user whose jobs run anywhere from 100 s
	// to 4 h gets a limit near the longest of them.
	for i := range 40 {
		c.Observe("steady", hour, median, time.Duration(900+5*i)*time.Second)
		c.Observe("erratic", hour, median, time.Duration(100*math.Pow(144, float64(i)/39))*time.Second)
	}
	if got := c.Recommend("steady", median, hour); got != 19*time.Minute {
		t.Errorf("steady user: %s, want 19m (1,095 s rounded up)", got)
	}
	if got := c.Recommend("erratic", median, hour); got < 3*time.Hour || got > hour {
		t.Errorf("erratic user: %s, want 3-4 h", got)
	}
	// A request the user has no history with falls back to the user's jobs
	// of any request; a short request caps the limit.
	if got := c.Recommend("steady", median, 2*hour); got != 19*time.Minute {
		t.Errorf("new request: %s, want the user's 19m", got)
	}
	if got := c.Recommend("steady", median, 10*time.Minute); got != 10*time.Minute {
		t.Errorf("short request: %s, want the request", got)
	}
	// A new user has all users' errors: 80 outcomes, enough.
	m, ok := c.Margin("new", hour)
	if !ok || m <= 0 {
		t.Errorf("new user's margin %g, %v", m, ok)
	}
	// Never under one unit.
	if got := c.Recommend("steady", math.Log(1), hour); got != time.Minute {
		t.Errorf("a one-second forecast: %s, want one minute", got)
	}
}

func TestLimitPolicyValidate(t *testing.T) {
	for _, tc := range []struct {
		edit func(*LimitPolicy)
		want string
	}{
		{func(p *LimitPolicy) { p.RunPast = 0 }, "run-past"},
		{func(p *LimitPolicy) { p.RunPast = math.NaN() }, "run-past"},
		{func(p *LimitPolicy) { p.MinUser = 0 }, "least outcomes"},
		{func(p *LimitPolicy) { p.Window = 10 }, "window"},
		{func(p *LimitPolicy) { p.Unit = time.Millisecond }, "unit"},
	} {
		p := DefaultLimitPolicy()
		tc.edit(&p)
		if err := p.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: got %v, want an error about %s", p, err, tc.want)
		}
	}
	if err := DefaultLimitPolicy().Validate(); err != nil {
		t.Error(err)
	}
}
