package slurm

import (
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"05:00": 5 * time.Minute, "01:02:03": time.Hour + 2*time.Minute + 3*time.Second, "2-00:00:00": 48 * time.Hour,
		"1-02:00": 26 * time.Hour, "1-02": 26 * time.Hour, "00:01.500": 1500 * time.Millisecond, "90": 90 * time.Minute,
	} {
		if got, err := ParseDuration(in); err != nil || got != want {
			t.Errorf("%q: %s, %v; want %s", in, got, err, want)
		}
	}
	for _, in := range []string{"1:2:3:4", "-1:00", "a:00", "1-", "00:1.5:00", "1e3", "0x10:00", "18251-00:00:00"} {
		if _, err := ParseDuration(in); err == nil {
			t.Errorf("%q: no error", in)
		}
	}
}
