package park

import (
	"fmt"
	"time"
)

// State is a node's power state as parking keeps it: a node without a
// Record is Awake.
type State uint8

// The power states.
const (
	Awake  State = iota
	Parked       // powered down by parking (or powering down)
	Waking       // woken: its Resume ran; not yet up
)

func (s State) String() string {
	switch s {
	case Parked:
		return "parked"
	case Waking:
		return "waking"
	}
	return "awake"
}

// Record is a parked or waking node as parking keeps it.
type Record struct {
	State State
	Since time.Time // when it entered State
	// SeenDown: the fleet reported it not ready since it parked (a boot
	// from then on is a real one).
	SeenDown bool
	// Suspending: its Suspend program runs; it is not woken meanwhile.
	Suspending bool
	// ResumedAgain: its Resume ran a second time, or it was restored
	// waking after a restart: Resume does not run again.
	ResumedAgain bool
	// WakeAfter: a node whose wake failed is not woken before.
	WakeAfter time.Time
}

// Wakeable reports whether r may be woken at now.
func (r Record) Wakeable(now time.Time) bool {
	return r.State == Parked && !r.Suspending && !now.Before(r.WakeAfter)
}

// Power is how nodes power down and up: whether Suspend and Resume
// programs run, and how long a woken node may take to be up.
type Power struct {
	Suspend, Resume bool
	WakeTimeout     time.Duration
}

// Step is what settling a record found: the state to move it to (its own
// when it stays), why, and what else to do.
type Step struct {
	To  State
	Msg string
	// Booted is a woken node's boot, from its wake until it was up, when
	// one was seen (down, then up).
	Booted time.Duration
	// Resume: run the Resume program again (the node went down after its
	// wake: it was still shutting down).
	Resume bool
	// Hold: the node stays awake because its Suspend failed; it is not
	// parked again before IdleAfter.
	Hold bool
}

// Ended settles r once its state's power program ended, with err. up is
// whether the fleet reports the node ready now; while settling (after a
// restart) only the program's end is noted.
//
//	Parked  Suspend ended        → Parked  (no longer Suspending)
//	Parked  Suspend failed, up,  → Awake   Hold ("the node stays awake")
//	        never seen down
//	Waking  Resume failed        → Parked  not woken for WakeTimeout
func (pw Power) Ended(r Record, err error, up, settling bool) (Record, Step) {
	switch {
	case r.State == Parked:
		r.Suspending = false
		if err != nil && up && !r.SeenDown && !settling {
			return r, Step{To: Awake, Msg: "the suspend program failed (" + err.Error() + "): the node stays awake", Hold: true}
		}
	case err != nil:
		return r, Step{To: Parked, Msg: fmt.Sprintf("the resume program failed (%s): the node is parked again, not woken for %s", err, pw.WakeTimeout)}
	}
	return r, Step{To: r.State}
}

// Observe settles r on what a cycle sees at now: up, whether the fleet
// reports the node ready. A node counts as up once seen down since it
// parked, or at once when no Suspend program powers nodes down.
//
//	Waking  down, never before, Resume set → Waking  Resume runs again, once
//	Waking  up                             → Awake   its boot learnt when seen down
//	Parked  ready, seen down since         → Awake   ("it came back up while parked")
//	Waking  ready WakeTimeout after wake   → Awake   though never seen down
//	Waking  not ready WakeTimeout after    → Parked  not woken for WakeTimeout
func (pw Power) Observe(now time.Time, r Record, ready bool) (Record, Step) {
	step := Step{To: r.State}
	if !ready {
		if r.State == Waking && !r.SeenDown && !r.ResumedAgain && pw.Resume {
			r.ResumedAgain, step.Resume = true, true
		}
		r.SeenDown = true
	}
	up := ready && (r.SeenDown || !pw.Suspend)
	late := now.Sub(r.Since) >= pw.WakeTimeout
	switch {
	case r.State == Waking && up:
		step.To, step.Msg = Awake, "node awake"
		if r.SeenDown {
			step.Booted = now.Sub(r.Since) // a boot seen: down, then up
		}
	case r.State == Parked && ready && r.SeenDown:
		step.To, step.Msg = Awake, "node awake: it came back up while parked"
	case r.State == Waking && late && ready:
		step.To, step.Msg = Awake, fmt.Sprintf("node awake: it is up %s after its wake, though never seen down", pw.WakeTimeout)
	case r.State == Waking && late:
		step.To, step.Msg = Parked, fmt.Sprintf("the node is not up %s after its wake: it is parked again, not woken for %s", pw.WakeTimeout, pw.WakeTimeout)
	}
	return r, step
}
