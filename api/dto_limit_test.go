package api

import (
	"strings"
	"testing"
	"time"
)

// A time limit travels from the request into the job's spec, in seconds.
func TestSubmitCarriesTheTimeLimit(t *testing.T) {
	spec, err := JobSpecRequest{GPUs: 1, TimeLimitS: 5400}.toSpec("", "t")
	if err != nil || spec.TimeLimit != 90*time.Minute {
		t.Fatalf("time limit %s, %v; want 1h30m", spec.TimeLimit, err)
	}
	if _, err := (JobSpecRequest{GPUs: 1, TimeLimitS: 4e7}).toSpec("", "t"); err == nil || !strings.Contains(err.Error(), "time_limit_s") {
		t.Fatalf("a limit over a year: %v", err)
	}
}
