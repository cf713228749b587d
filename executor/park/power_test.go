package park

import (
	"errors"
	"testing"
	"time"
)

func TestObserve(t *testing.T) {
	wake := 10 * time.Minute
	withPrograms := Power{Suspend: true, Resume: true, WakeTimeout: wake}
	noPrograms := Power{WakeTimeout: wake}
	since := t0.Add(-time.Minute)
	for _, tc := range []struct {
		name   string
		pw     Power
		r      Record
		ready  bool
		now    time.Time
		to     State
		booted time.Duration
		resume bool
	}{
		{"a woken node seen down and back up is awake, its boot learnt", withPrograms,
			Record{State: Waking, Since: since, SeenDown: true}, true, t0, Awake, time.Minute, false},
		{"a woken node still up, never seen down, is not awake yet (it may be shutting down)", withPrograms,
			Record{State: Waking, Since: since}, true, t0, Waking, 0, false},
		{"without a Suspend program a woken node that is ready is awake", noPrograms,
			Record{State: Waking, Since: since}, true, t0, Awake, 0, false},
		{"a woken node that goes down after its wake has its Resume run again", withPrograms,
			Record{State: Waking, Since: since}, false, t0, Waking, 0, true},
		{"Resume runs again only once", withPrograms,
			Record{State: Waking, Since: since, ResumedAgain: true}, false, t0, Waking, 0, false},
		{"a woken node ready WakeTimeout after its wake is awake though never seen down", withPrograms,
			Record{State: Waking, Since: t0.Add(-wake)}, true, t0, Awake, 0, false},
		{"a woken node not ready WakeTimeout after its wake is parked again", withPrograms,
			Record{State: Waking, Since: t0.Add(-wake), SeenDown: true}, false, t0, Parked, 0, false},
		{"a parked node seen down that comes back up is awake", withPrograms,
			Record{State: Parked, Since: since, SeenDown: true}, true, t0, Awake, 0, false},
		{"a parked node never seen down stays parked", withPrograms,
			Record{State: Parked, Since: since}, true, t0, Parked, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, step := tc.pw.Observe(tc.now, tc.r, tc.ready)
			if step.To != tc.to || step.Booted != tc.booted || step.Resume != tc.resume {
				t.Errorf("Observe = %+v; want to %s, booted %s, resume %v", step, tc.to, tc.booted, tc.resume)
			}
		})
	}
	r, _ := withPrograms.Observe(t0, Record{State: Parked, Since: since}, false)
	if !r.SeenDown {
		t.Error("a parked node not ready is not noted as seen down")
	}
}

func TestEnded(t *testing.T) {
	pw := Power{Suspend: true, Resume: true, WakeTimeout: 10 * time.Minute}
	failed := errors.New("ipmi: timeout")
	for _, tc := range []struct {
		name     string
		r        Record
		err      error
		up       bool
		settling bool
		to       State
		hold     bool
	}{
		{"a Suspend that ends well leaves the node parked", Record{State: Parked, Suspending: true}, nil, true, false, Parked, false},
		{"a Suspend that fails while the node is up leaves it awake, held", Record{State: Parked, Suspending: true}, failed, true, false, Awake, true},
		{"a Suspend that fails after the node went down leaves it parked", Record{State: Parked, Suspending: true, SeenDown: true}, failed, true, false, Parked, false},
		{"after a restart a failed Suspend is only noted", Record{State: Parked, Suspending: true}, failed, true, true, Parked, false},
		{"a Resume that fails parks the node again", Record{State: Waking}, failed, false, false, Parked, false},
		{"a Resume that ends well leaves the node waking", Record{State: Waking}, nil, false, false, Waking, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, step := pw.Ended(tc.r, tc.err, tc.up, tc.settling)
			if step.To != tc.to || step.Hold != tc.hold {
				t.Errorf("Ended = %+v; want to %s, hold %v", step, tc.to, tc.hold)
			}
			if r.Suspending && tc.r.State == Parked {
				t.Error("still suspending after its Suspend ended")
			}
		})
	}
}

func TestWakeable(t *testing.T) {
	for _, tc := range []struct {
		r    Record
		want bool
	}{
		{Record{State: Parked}, true},
		{Record{State: Parked, Suspending: true}, false},
		{Record{State: Parked, WakeAfter: t0.Add(time.Second)}, false},
		{Record{State: Waking}, false},
	} {
		if got := tc.r.Wakeable(t0); got != tc.want {
			t.Errorf("%+v: Wakeable %v, want %v", tc.r, got, tc.want)
		}
	}
}
