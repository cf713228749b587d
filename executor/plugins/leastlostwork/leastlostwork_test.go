package leastlostwork

import (
	"testing"
	"time"

	"github.com/prescient-sched/prescient/executor"
)

func TestLongerComparesTheLastKeyElementWithinTheSameClass(t *testing.T) {
	l, err := New(Args{ShorterBy: 2, Margin: 600})
	if err != nil {
		t.Fatal(err)
	}
	job := executor.Key{0, 2, 600}
	for _, tc := range []struct {
		victim executor.Key
		want   bool
	}{
		{executor.Key{0, 2, 1800}, true},  // 2 × 600 + 600
		{executor.Key{0, 2, 1799}, false}, // not enough longer
		{executor.Key{0, 1, 9999}, false}, // another class (a starving job)
		{executor.Key{-1, 2, 9999}, false},
	} {
		if got := l.longer(job, tc.victim); got != tc.want {
			t.Errorf("longer(%v, %v) = %v, want %v", job, tc.victim, got, tc.want)
		}
	}
	off, _ := New(Args{})
	if off.longer(job, executor.Key{0, 2, 1e9}) {
		t.Error("ShorterBy 0 preempted by length")
	}
}

func TestArgsAreValidated(t *testing.T) {
	for _, a := range []Args{{MinRun: -time.Second}, {ShorterBy: 0.5}, {ShorterBy: 2, Margin: -1}} {
		if _, err := New(a); err == nil {
			t.Errorf("New(%+v) accepted", a)
		}
	}
}
