package slurm

import (
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"
)

// The profile's first fit against a brute force over a minute grid, on
// random use.
func TestProfileFitsWhereBruteForceDoes(t *testing.T) {
	now := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	m := func(k int) time.Time { return now.Add(time.Duration(k) * time.Minute) }
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 300 {
		const capacity, span = 8, 200
		p := newProfile(now, capacity)
		var used [span + 100]int64
		for range rng.IntN(30) {
			from, n := rng.IntN(span), int64(1+rng.IntN(4))
			to := from + 1 + rng.IntN(60)
			p.take(m(from), m(to), n)
			for k := from; k < to; k++ {
				used[k] += n
			}
		}
		n, run := int64(1+rng.IntN(capacity)), 1+rng.IntN(40)
		want := -1
		for s := 0; s < span+60 && want < 0; s++ {
			ok := true
			for k := s; k < s+run && k < len(used); k++ {
				ok = ok && capacity-used[k] >= n
			}
			if ok {
				want = s
			}
		}
		got, ok := p.fit(n, time.Duration(run)*time.Minute, m(span+60))
		if !ok || got != m(want) {
			t.Fatalf("trial %d: fit(%d, %dm) = %s %v, want +%dm", trial, n, run, got.Sub(now), ok, want)
		}
	}
}

// sacct --json with nothing to report says so as an error (recorded from
// 22.05); that is an empty answer. Any other error is one.
func TestAccountingNothingFoundIsNoError(t *testing.T) {
	b, err := os.ReadFile("testdata/sacct_22.05_nothing_found.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := documentErr(b, "sacct --json"); err != nil {
		t.Errorf("nothing found: %v", err)
	}
	bad := strings.Replace(string(b), `"error_number": 9003`, `"error_number": 1`, 1)
	bad = strings.Replace(bad, `"description": "Nothing found"`, `"description": "Database gone"`, 1)
	if err := documentErr([]byte(bad), "sacct --json"); err == nil || !strings.Contains(err.Error(), "Database gone") {
		t.Errorf("another error: %v", err)
	}
}
