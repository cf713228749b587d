package sim

import (
	"testing"
	"time"
)

// A capped segment does its work slower by slow; checkpoints still take
// their cost, and at and finish agree.
func TestSegmentUnderAPowerCap(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, s := range []segment{
		{start: t0, saved: 10 * time.Minute, slow: 1.5},
		{start: t0, saved: 10 * time.Minute, interval: 20 * time.Minute, cost: time.Minute, slow: 1.5},
		{start: t0, saved: 10 * time.Minute, interval: 20 * time.Minute, cost: time.Minute},
	} {
		work := 70 * time.Minute
		end, n := s.finish(work)
		if prog, _, _, _ := s.at(end); prog != work {
			t.Errorf("%+v: progress %s at its end %s, want %s", s, prog, end.Sub(t0), work)
		}
		wantWall := time.Duration(float64(60*time.Minute) * max(s.slow, 1))
		if s.interval > 0 {
			wantWall += time.Duration(n) * s.cost
		}
		if got := end.Sub(t0); got != wantWall {
			t.Errorf("%+v: ends after %s, want %s (%d checkpoints)", s, got, wantWall, n)
		}
	}
	// Half-way through the first stretch of 20 minutes of work (30 minutes
	// of wall time at 1.5), 10 minutes are done and none checkpointed.
	s := segment{start: t0, interval: 20 * time.Minute, cost: time.Minute, slow: 1.5}
	if prog, ck, k, writing := s.at(t0.Add(15 * time.Minute)); prog != 10*time.Minute || ck != 0 || k != 0 || writing != 0 {
		t.Errorf("at 15m: progress %s, checkpointed %s, %d done, writing %s; want 10m, 0, 0, 0", prog, ck, k, writing)
	}
	// 30m30s in: the first checkpoint is being written.
	if prog, _, _, writing := s.at(t0.Add(30*time.Minute + 30*time.Second)); prog != 20*time.Minute || writing != 30*time.Second {
		t.Errorf("at 30m30s: progress %s, writing %s; want 20m and 30s", prog, writing)
	}
}
