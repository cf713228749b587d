package control

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/cluster/clustertest"
	"github.com/prescient-sched/prescient/control/advice"
	"github.com/prescient-sched/prescient/control/parking"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/executor/sim"
	"github.com/prescient-sched/prescient/service"
)

// powerScript is a program that appends its argument, the node, to log;
// with fail it exits 1 after that.
func powerScript(t *testing.T, name, log string, fail bool) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	body := "#!/bin/sh\necho \"$1\" >> " + log + "\n"
	if fail {
		body += "echo 'BMC unreachable' >&2\nexit 1\n"
	}
	if err := os.WriteFile(path, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// lines is the lines of a file, none when it is not there.
func lines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(b))
}

// parkingEnv is an env of nodes×4 GPUs that parks with cfg, its power
// programs logging to suspended and resumed, with the lifecycle events
// it posts.
func parkingEnv(t *testing.T, nodes int, mode service.Mode, cfg parking.Config) (e *env, rec *recordingNotifier) {
	e = newEnv(t, fleetOf(nodes, 4), nil)
	rec = &recordingNotifier{}
	e.mod = func(c *Config) {
		pk := cfg
		c.Mode, c.Notifier, c.Parking = mode, rec, &pk
	}
	e.restart()
	return e, rec
}

// recommendations are the reasons of the recommendations of kind, in the
// order recorded, and how many of them are open.
func (e *env) recommendations(kind string) (reasons []string, open int) {
	e.t.Helper()
	recs, err := e.store.ListRecommendations(e.ctx, time.Time{}, 100)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, r := range recs {
		if r.Kind == kind {
			reasons = append(reasons, r.Reason)
			if r.Status == "open" {
				open++
			}
		}
	}
	return reasons, open
}

// cyclesApart plans now and again d later: a fleet with nothing to run
// parks after d.
func (e *env) cyclesApart(d time.Duration) {
	e.plane.cycle(e.ctx)
	e.clock.Advance(d)
	e.plane.cycle(e.ctx)
}

// wantNode fails the test unless node shows state in GET /v1/fleet; when
// says at what point, and why.
func (e *env) wantNode(node, state, when string) {
	e.t.Helper()
	if st := e.nodeStates()[node]; st != state {
		e.t.Fatalf("%s %s: %s, want %s", node, when, st, state)
	}
}

// nodeStates is each node's state as GET /v1/fleet shows it.
func (e *env) nodeStates() map[string]string {
	e.t.Helper()
	fs, err := e.plane.Fleet(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]string{}
	for _, n := range fs.Nodes {
		out[n.Name] = n.State
	}
	return out
}

// setNode sets a node's state in the fleet the plane reads, as an agent
// that goes away with its node's power, or comes back, does.
func (e *env) setNode(name string, st cluster.NodeState) {
	for i := range e.fleet.Nodes {
		if e.fleet.Nodes[i].Name == name {
			e.fleet.Nodes[i].State = st
			return
		}
	}
	e.t.Fatalf("no node %s", name)
}

func TestAnEmptyNodeParksAndAJobThatWaitsWakesIt(t *testing.T) {
	dir := t.TempDir()
	suspended, resumed := filepath.Join(dir, "suspended"), filepath.Join(dir, "resumed")
	e, rec := parkingEnv(t, 2, service.ModeAutopilot, parking.Config{IdleAfter: 10 * time.Minute,
		Suspend: powerScript(t, "suspend", suspended, false), Resume: powerScript(t, "resume", resumed, false)})
	e.submit("a", spec(4, 10*time.Hour))
	e.plane.cycle(e.ctx)
	on := e.placedOn("a")
	other := map[string]string{"n0": "n1", "n1": "n0"}[on]
	if other == "" {
		t.Fatalf("a placed on %q", on)
	}
	e.clock.Advance(9 * time.Minute)
	e.plane.cycle(e.ctx)
	if st := e.nodeStates()[other]; st != "ready" {
		t.Fatalf("%s after 9 minutes empty: %s, want ready", other, st)
	}
	e.clock.Advance(time.Minute)
	e.plane.cycle(e.ctx)
	e.plane.background.Wait()
	if st := e.nodeStates(); st[other] != "parked" || st[on] != "ready" {
		t.Fatalf("after 10 minutes: %v; want %s parked, %s ready (it runs a)", st, other, on)
	}
	if got := lines(t, suspended); !slices.Equal(got, []string{other}) {
		t.Errorf("the suspend program ran for %v, want [%s]", got, other)
	}
	if got := rec.types(); !slices.Equal(got, []string{"submitted", "started", "node_parked"}) {
		t.Errorf("events %v", got)
	}

	// The node powers off: its agent is gone. A restart keeps it parked,
	// and the fleet view shows it though the node source no longer does.
	e.setNode(other, cluster.NodeFailed)
	e.plane.cycle(e.ctx)
	kept := e.fleet.Nodes
	e.fleet.Nodes = slices.DeleteFunc(slices.Clone(kept), func(n cluster.Node) bool { return n.Name == other })
	e.restart()
	if st := e.nodeStates(); st[other] != "parked" {
		t.Fatalf("after a restart with the node off: %v, want %s parked", st, other)
	}

	// A job that fits only there (and is too long to preempt a) wakes
	// it, once the agents have had NodeSyncTimeout to register after the
	// restart; it starts once the node is back.
	e.submit("b", spec(4, 20*time.Hour))
	e.plane.cycle(e.ctx)
	e.wantNode(other, "parked", "right after the restart (the agents register first)")
	e.clock.Advance(DefaultNodeSyncTimeout)
	e.plane.cycle(e.ctx)
	e.plane.background.Wait()
	e.wantNode(other, "waking", "with b waiting")
	if got := lines(t, resumed); !slices.Equal(got, []string{other}) {
		t.Errorf("the resume program ran for %v, want [%s]", got, other)
	}
	if e.placedOn("b") != "" {
		t.Fatal("b placed while its node boots")
	}
	e.clock.Advance(3 * time.Minute)
	e.plane.cycle(e.ctx)
	e.wantNode(other, "waking", "still booting")
	e.fleet.Nodes = kept
	e.setNode(other, cluster.NodeReady)
	e.plane.cycle(e.ctx)
	e.wantNode(other, "ready", "back")
	if got := e.placedOn("b"); got != other {
		t.Errorf("b placed on %q, want %s", got, other)
	}
	if got := e.plane.parking.BootTime(); got != 3*time.Minute {
		t.Errorf("boot time %s, want the 3 minutes this wake took", got)
	}
	defer func() { // after the checks below, which a restart would change
		e.restart()
		if got := e.plane.parking.BootTime(); got != 3*time.Minute {
			t.Errorf("boot time after a restart %s, want the 3 minutes kept", got)
		}
	}()
	if got := rec.types(); !slices.Equal(got, []string{"submitted", "started", "node_parked", "submitted", "node_waking", "node_awake", "started"}) {
		t.Errorf("events %v", got)
	}
	parked, err := e.store.ParkedNodes(e.ctx)
	if err != nil || len(parked) != 0 {
		t.Errorf("the store still holds %v (%v)", parked, err)
	}
}

func TestTheForecastParksSpareNodesAtOnceAndWakesOneAheadOfDemand(t *testing.T) {
	e, rec := parkingEnv(t, 3, service.ModeAutopilot, parking.Config{IdleAfter: time.Hour, Forecast: true})
	// Nothing queued, nothing coming: two nodes are spare, the third is
	// the node's worth kept for what may come.
	e.plane.cycle(e.ctx)
	if st := e.nodeStates(); st["n0"] != "parked" || st["n1"] != "parked" || st["n2"] != "ready" {
		t.Fatalf("an idle fleet: %v; want n0 and n1 parked at once, n2 ready", st)
	}
	// A 4-GPU job takes n2; at that rate of arrivals, 2 GPUs more are
	// wanted within the half hour and none is free: one node is woken
	// before anything waits.
	e.submit("a", spec(4, 10*time.Hour))
	e.plane.cycle(e.ctx)
	if on := e.placedOn("a"); on != "n2" {
		t.Fatalf("a placed on %q, want n2", on)
	}
	if st := e.nodeStates(); st["n0"] != "waking" || st["n1"] != "parked" {
		t.Fatalf("with n2 full: %v; want n0 (parked longest, then by name) waking, n1 parked", st)
	}
	// n0 never went down (no suspend program): it is awake at once, and
	// covers the forecast.
	e.clock.Advance(time.Minute)
	e.plane.cycle(e.ctx)
	if st := e.nodeStates(); st["n0"] != "ready" || st["n1"] != "parked" {
		t.Fatalf("a minute later: %v; want n0 ready, n1 still parked", st)
	}
	if got := rec.types(); !slices.Equal(got, []string{"node_parked", "node_parked", "submitted", "started", "node_waking", "node_awake"}) {
		t.Errorf("events %v", got)
	}
}

func TestAFailedSuspendLeavesTheNodeAwake(t *testing.T) {
	dir := t.TempDir()
	e, rec := parkingEnv(t, 1, service.ModeAutopilot, parking.Config{IdleAfter: 10 * time.Minute,
		Suspend: powerScript(t, "suspend", filepath.Join(dir, "suspended"), true)})
	e.cyclesApart(10 * time.Minute)
	e.plane.background.Wait()
	e.plane.cycle(e.ctx)
	e.wantNode("n0", "ready", "after the suspend program failed")
	e.clock.Advance(9 * time.Minute)
	e.plane.cycle(e.ctx)
	e.wantNode("n0", "ready", "9 minutes after a failed suspend (not parked again before IdleAfter)")
	e.clock.Advance(time.Minute)
	e.plane.cycle(e.ctx)
	e.plane.background.Wait()
	e.wantNode("n0", "parked", "IdleAfter after the failed suspend again")
	if got := rec.types(); !slices.Equal(got, []string{"node_parked", "node_awake", "node_parked"}) {
		t.Errorf("events %v", got)
	}

}

func TestAWakeThatNeverComesParksTheNodeAgainAndWakesAnother(t *testing.T) {
	e, rec := parkingEnv(t, 2, service.ModeAutopilot, parking.Config{IdleAfter: 10 * time.Minute, WakeTimeout: 5 * time.Minute})
	e.cyclesApart(10 * time.Minute)
	e.setNode("n0", cluster.NodeFailed) // both power off
	e.setNode("n1", cluster.NodeFailed)
	e.plane.cycle(e.ctx)
	e.submit("a", spec(4, time.Hour))
	e.plane.cycle(e.ctx)
	if st := e.nodeStates(); st["n0"] != "waking" || st["n1"] != "parked" {
		t.Fatalf("with a waiting: %v, want n0 waking, n1 parked", st)
	}
	e.clock.Advance(4 * time.Minute)
	e.plane.cycle(e.ctx)
	if st := e.nodeStates(); st["n0"] != "waking" || st["n1"] != "parked" {
		t.Fatalf("while n0 boots: %v, want n1 still parked (a is n0's)", st)
	}
	// n0 never comes: it is parked again, and n1 is woken for a.
	e.clock.Advance(time.Minute)
	e.plane.cycle(e.ctx)
	if st := e.nodeStates(); st["n0"] != "parked" || st["n1"] != "waking" {
		t.Fatalf("5 minutes after the wake, n0 not back: %v; want n0 parked again, n1 waking", st)
	}
	e.setNode("n1", cluster.NodeReady)
	e.plane.cycle(e.ctx)
	if on := e.placedOn("a"); on != "n1" {
		t.Errorf("a placed on %q, want n1", on)
	}
	if got := rec.types(); !slices.Equal(got, []string{"node_parked", "node_parked", "submitted", "node_waking", "node_parked", "node_waking", "node_awake", "started"}) {
		t.Errorf("events %v", got)
	}
	parked, err := e.store.ParkedNodes(e.ctx)
	if err != nil || len(parked) != 1 || parked[0].Node.Name != "n0" || parked[0].State != "parked" {
		t.Errorf("the store holds %+v (%v), want n0 parked", parked, err)
	}
}

func TestAJobWaitingForABootingNodeOrAVictimsGPUsWakesNothingMore(t *testing.T) {
	e, rec := parkingEnv(t, 3, service.ModeAutopilot, parking.Config{IdleAfter: 10 * time.Minute})
	low := spec(4, 10*time.Hour)
	low.Tier, low.Checkpointable = cluster.TierOpportunistic, true
	e.submit("low", low)
	e.plane.cycle(e.ctx)
	on := e.placedOn("low")
	e.clock.Advance(11 * time.Minute) // past the policy's shortest run before a preemption
	e.plane.cycle(e.ctx)
	for n, st := range e.nodeStates() {
		if n != on && st != "parked" {
			t.Fatalf("%s after 11 minutes empty: %s, want parked", n, st)
		}
		if n != on {
			e.setNode(n, cluster.NodeFailed) // off
		}
	}
	// A production job takes low's GPUs: low checkpoints and stops; no
	// node is woken for it, in the cycle that preempts nor while the
	// victim stops.
	prod := spec(4, time.Hour)
	prod.Tier = cluster.TierProduction
	e.submit("prod", prod)
	e.plane.cycle(e.ctx)
	if pl, _ := e.store.GetPlacement(e.ctx, "low"); !pl.Stopping() {
		t.Fatal("low was not asked to stop for prod")
	}
	e.plane.cycle(e.ctx)
	for _, typ := range rec.types() {
		if typ == "node_waking" {
			t.Fatalf("a node was woken for a job that waits for a victim's GPUs: %v", rec.types())
		}
	}
	// Another job wakes one node; while it boots, the same job wakes no
	// other.
	e.submit("more", spec(4, time.Hour))
	e.plane.cycle(e.ctx)
	e.clock.Advance(time.Minute)
	e.plane.cycle(e.ctx)
	e.plane.cycle(e.ctx)
	waking := 0
	for _, st := range e.nodeStates() {
		if st == "waking" {
			waking++
		}
	}
	if waking != 1 {
		t.Errorf("%d nodes waking for one job, want 1: %v", waking, e.nodeStates())
	}
}

func TestAWokenNodeThatWasNotSeenDownIsNotAwakeWhileASuspendProgramPowersNodesDown(t *testing.T) {
	dir := t.TempDir()
	e, _ := parkingEnv(t, 1, service.ModeAutopilot, parking.Config{IdleAfter: 10 * time.Minute, WakeTimeout: 5 * time.Minute,
		Suspend: powerScript(t, "suspend", filepath.Join(dir, "suspended"), false)})
	e.cyclesApart(10 * time.Minute)
	e.plane.background.Wait()
	// The suspend program returned; the node is still shutting down (the
	// fleet shows it ready) when a job wakes it.
	e.submit("a", spec(4, time.Hour))
	e.plane.cycle(e.ctx)
	e.plane.cycle(e.ctx)
	e.wantNode("n0", "waking", "woken while shutting down (not awake before it was seen down)")
	if on := e.placedOn("a"); on != "" {
		t.Fatalf("a placed on %s while it shuts down", on)
	}
	e.setNode("n0", cluster.NodeFailed)
	e.plane.cycle(e.ctx)
	e.setNode("n0", cluster.NodeReady)
	e.plane.cycle(e.ctx)
	if on := e.placedOn("a"); on != "n0" {
		t.Errorf("after the node went down and came back, a placed on %q, want n0", on)
	}
}

func TestParkingOffForgetsParkedNodes(t *testing.T) {
	e, _ := parkingEnv(t, 1, service.ModeAutopilot, parking.Config{IdleAfter: 10 * time.Minute})
	e.cyclesApart(10 * time.Minute)
	if st := e.nodeStates()["n0"]; st != "parked" {
		t.Fatalf("%s, want parked", st)
	}
	e.mod = nil
	e.restart()
	e.submit("a", spec(4, time.Hour))
	e.plane.cycle(e.ctx)
	if on := e.placedOn("a"); on != "n0" {
		t.Errorf("with parking off after a restart, a placed on %q, want n0", on)
	}
	if parked, err := e.store.ParkedNodes(e.ctx); err != nil || len(parked) != 0 {
		t.Errorf("the store holds %v (%v)", parked, err)
	}
}

func TestTheAdvisorRecommendsParksAndParksNothing(t *testing.T) {
	e, rec := parkingEnv(t, 2, service.ModeAdvisor, parking.Config{IdleAfter: 10 * time.Minute})
	e.cyclesApart(10 * time.Minute)
	e.plane.cycle(e.ctx)
	if st := e.nodeStates(); st["n0"] != "ready" || st["n1"] != "ready" {
		t.Errorf("advisor: %v, want both ready", st)
	}
	parks, _ := e.recommendations(advice.Park)
	if len(parks) != 2 || !strings.Contains(parks[0], "park node n0: it ran nothing for 10m0s") {
		t.Errorf("park recommendations %q; want one per node, once each", parks)
	}
	if len(rec.types()) != 0 {
		t.Errorf("events %v; want none", rec.types())
	}
	// A job on n0 makes its recommendation stale.
	e.submit("a", spec(4, time.Hour))
	e.plane.cycle(e.ctx)
	if _, open := e.recommendations(advice.Park); open != 1 {
		t.Errorf("%d open park recommendations with a job recommended on a node; want 1", open)
	}
}

func TestTheAdvisorRecommendsWakingParkedNodes(t *testing.T) {
	e, _ := parkingEnv(t, 1, service.ModeAutopilot, parking.Config{IdleAfter: 10 * time.Minute})
	e.cyclesApart(10 * time.Minute)
	if err := e.plane.SetMode(e.ctx, service.ModeAdvisor); err != nil {
		t.Fatal(err)
	}
	e.setNode("n0", cluster.NodeFailed)
	e.submit("a", spec(4, time.Hour))
	e.plane.cycle(e.ctx)
	e.wantNode("n0", "parked", "advisor (nothing woken)")
	if wakes, _ := e.recommendations(advice.Wake); len(wakes) != 1 || !strings.Contains(wakes[0], "wake node n0: job a waits for it") {
		t.Errorf("wake recommendations %q", wakes)
	}
}

func TestAJobTheQuotaHoldsBackWakesNothing(t *testing.T) {
	f := fleetOf(2, 4)
	f.Tenants = []cluster.Tenant{{Name: "t1", Weight: 1, Quota: []cluster.Quota{{GPUs: 4}}}}
	e := newEnv(t, f, nil)
	rec := &recordingNotifier{}
	e.mod = func(c *Config) { c.Parking, c.Notifier = &parking.Config{IdleAfter: 10 * time.Minute}, rec }
	e.restart()
	e.plane.cycle(e.ctx)
	e.clock.Advance(10 * time.Minute)
	e.plane.cycle(e.ctx) // both park
	// n0 goes down and comes back up by hand: awake, n1 parked.
	e.setNode("n0", cluster.NodeFailed)
	e.plane.cycle(e.ctx)
	e.setNode("n0", cluster.NodeReady)
	e.submit("x", spec(4, time.Hour))
	e.submit("y", spec(4, time.Hour))
	e.plane.cycle(e.ctx)
	if on := e.placedOn("x"); on != "n0" {
		t.Fatalf("x placed on %q, want n0", on)
	}
	if st := e.nodeStates()["n1"]; st != "parked" {
		t.Errorf("n1 %s with y held by its tenant's quota, want parked", st)
	}
}

func TestANodeAWaitingGangIsPlannedOnStaysUpWhileAnotherBoots(t *testing.T) {
	e, _ := parkingEnv(t, 2, service.ModeAutopilot, parking.Config{IdleAfter: 10 * time.Minute, WakeTimeout: time.Hour})
	e.submit("a", spec(4, 10*time.Hour))
	e.plane.cycle(e.ctx)
	on := e.placedOn("a")
	other := map[string]string{"n0": "n1", "n1": "n0"}[on]
	e.event(executor.JobEvent{Type: executor.JobStarted, Job: "a", Attempt: 1, Node: on})
	e.clock.Advance(10 * time.Minute)
	e.plane.cycle(e.ctx) // other parks
	e.setNode(other, cluster.NodeFailed)
	e.clock.Advance(2 * time.Minute)
	e.event(executor.JobEvent{Type: executor.JobExited, Job: "a", Attempt: 1, Node: on})
	e.plane.cycle(e.ctx) // on is empty from now
	e.clock.Advance(9 * time.Minute)
	gang := spec(8, time.Hour)
	gang.GangSize = 2
	e.submit("gang", gang)
	e.plane.cycle(e.ctx)
	if st := e.nodeStates(); st[other] != "waking" || st[on] != "ready" {
		t.Fatalf("with the gang waiting: %v, want %s waking, %s ready", st, other, on)
	}
	// Past IdleAfter since on emptied, and again past it while other
	// still boots: on is not parked, the gang needs it.
	for range 2 {
		e.clock.Advance(10 * time.Minute)
		e.plane.cycle(e.ctx)
		if st := e.nodeStates()[on]; st != "ready" {
			t.Fatalf("%s: %s, want ready: the waiting gang is planned on it and on %s, booting", on, st, other)
		}
	}
}

func TestARestartDoesNotTakeAnUnregisteredParkedNodeForOneThatWentDown(t *testing.T) {
	e, rec := parkingEnv(t, 1, service.ModeAutopilot, parking.Config{IdleAfter: 10 * time.Minute})
	e.plane.cycle(e.ctx)
	e.clock.Advance(10 * time.Minute)
	e.plane.cycle(e.ctx) // parked; no power program: it stays up
	kept := e.fleet.Nodes
	e.fleet.Nodes = nil // the agents register again after the restart
	e.restart()
	e.plane.cycle(e.ctx)
	e.fleet.Nodes = kept
	e.plane.cycle(e.ctx)
	e.clock.Advance(DefaultNodeSyncTimeout)
	e.plane.cycle(e.ctx)
	if st := e.nodeStates()["n0"]; st != "parked" {
		t.Errorf("%s, want still parked: its agent only had not registered yet", st)
	}
	if got := rec.types(); !slices.Equal(got, []string{"node_parked"}) {
		t.Errorf("events %v", got)
	}
}

func TestASuspendThatFailsOnceTheNodeIsDownLeavesItParked(t *testing.T) {
	dir := t.TempDir()
	e, _ := parkingEnv(t, 1, service.ModeAutopilot, parking.Config{IdleAfter: 10 * time.Minute,
		Suspend: powerScript(t, "suspend", filepath.Join(dir, "suspended"), true)})
	e.cyclesApart(10 * time.Minute)
	e.setNode("n0", cluster.NodeFailed) // it went off, and the program still said it failed
	e.plane.background.Wait()
	e.plane.cycle(e.ctx)
	if st := e.nodeStates()["n0"]; st != "parked" {
		t.Errorf("%s, want parked: the node is off", st)
	}
}

func TestAFailedResumeParksTheNodeAgain(t *testing.T) {
	dir := t.TempDir()
	e, rec := parkingEnv(t, 1, service.ModeAutopilot, parking.Config{IdleAfter: 10 * time.Minute, WakeTimeout: 5 * time.Minute,
		Resume: powerScript(t, "resume", filepath.Join(dir, "resumed"), true)})
	e.cyclesApart(10 * time.Minute)
	e.setNode("n0", cluster.NodeFailed)
	e.submit("a", spec(4, time.Hour))
	e.plane.cycle(e.ctx)
	e.plane.background.Wait()
	e.plane.cycle(e.ctx)
	e.wantNode("n0", "parked", "after its resume program failed again")
	e.restart() // which keeps when it may be woken again
	e.clock.Advance(4 * time.Minute)
	e.plane.cycle(e.ctx)
	e.wantNode("n0", "parked", "4 minutes later (not woken again before WakeTimeout)")
	e.clock.Advance(time.Minute)
	e.plane.cycle(e.ctx)
	e.wantNode("n0", "waking", "WakeTimeout later again")
	if got := rec.types(); !slices.Equal(got, []string{"node_parked", "submitted", "node_waking", "node_parked", "node_waking"}) {
		t.Errorf("events %v", got)
	}
}

func TestParkingConfigIsChecked(t *testing.T) {
	for _, pk := range []parking.Config{{}, {IdleAfter: -time.Minute}, {IdleAfter: time.Minute, WakeTimeout: -1}} {
		cfg := Config{Parking: &pk}
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "parking") {
			t.Errorf("%+v: %v, want an error naming parking", pk, err)
		}
	}
}

// The queue forecast (and what-if) counts the parked nodes as there to be
// woken: a job that only a parked node can take is forecast to start a
// boot from now.
func TestTheQueueForecastWakesParkedNodes(t *testing.T) {
	e, _ := parkingEnv(t, 2, service.ModeAutopilot, parking.Config{IdleAfter: 10 * time.Minute})
	e.submit("a", spec(4, 10*time.Hour))
	e.plane.cycle(e.ctx)
	on := e.placedOn("a")
	other := map[string]string{"n0": "n1", "n1": "n0"}[on]
	e.event(executor.JobEvent{Type: executor.JobStarted, Job: "a", Attempt: 1, Node: on})
	e.clock.Advance(10 * time.Minute)
	e.plane.cycle(e.ctx)
	e.setNode(other, cluster.NodeFailed) // off
	if err := e.plane.SetMode(e.ctx, service.ModeAdvisor); err != nil {
		t.Fatal(err)
	}
	e.submit("b", spec(4, 20*time.Hour))
	e.plane.cycle(e.ctx)
	if err := e.plane.whatif.RefreshQueue(e.ctx); err != nil {
		t.Fatal(err)
	}
	now := e.clock.Now()
	a, ok := e.plane.whatif.QueuedAhead("b", now)
	if boot := now.Add(sim.DefaultWakeTime); !ok || !a.Start.Equal(boot) || !a.End.Equal(boot.Add(20*time.Hour)) {
		t.Errorf("b forecast to start at %s and end at %s (%v); want a boot from now (%s) and 20 hours later", a.Start, a.End, ok, boot)
	}
}

// fakeCordoner records what the plane cordons and uncordons.
type fakeCordoner struct {
	mu           sync.Mutex
	marks        map[string]bool // on the nodes
	stale        []string        // what Cordoned shows while set (an informer behind); nil: the marks
	unparkable   map[string]string
	failCordon   int // cordons that fail before one succeeds
	failRevert   int // cordons that fail and leave the mark on
	failUncordon int // uncordons that fail before one succeeds
	failMarked   int // live reads that fail before one succeeds
	calls        []string
}

// newFakeCordoner is a fakeCordoner with marks on nodes.
func newFakeCordoner(nodes ...string) *fakeCordoner {
	f := &fakeCordoner{marks: map[string]bool{}, unparkable: map[string]string{}}
	f.mark(nodes...)
	return f
}

func (f *fakeCordoner) Unparkable(node string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.unparkable[node]
}

func (f *fakeCordoner) Cordon(_ context.Context, node string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "cordon "+node)
	switch {
	case f.failCordon > 0:
		f.failCordon--
		return false, errors.New("the API server is unreachable")
	case f.failRevert > 0:
		f.failRevert--
		f.marks[node] = true
		return true, errors.New("a pod landed; taking its cordon off again: the API server is unreachable")
	case f.marks[node]:
		return false, nil
	}
	f.marks[node] = true
	return true, nil
}

func (f *fakeCordoner) Uncordon(_ context.Context, node string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "uncordon "+node)
	if f.failUncordon > 0 {
		f.failUncordon--
		return errors.New("the API server is unreachable")
	}
	delete(f.marks, node)
	return nil
}

func (f *fakeCordoner) Cordoned() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stale != nil {
		return slices.Clone(f.stale)
	}
	return slices.Sorted(maps.Keys(f.marks))
}

func (f *fakeCordoner) Marked(_ context.Context, node string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failMarked > 0 {
		f.failMarked--
		return false, errors.New("the API server is unreachable")
	}
	return f.marks[node], nil
}

// took is the calls made since the last took.
func (f *fakeCordoner) took() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.calls
	f.calls = nil
	return out
}

// mark puts the parked mark on nodes, as another replica would.
func (f *fakeCordoner) mark(nodes ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, n := range nodes {
		f.marks[n] = true
	}
}

// marked is the nodes that bear the mark.
func (f *fakeCordoner) marked() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Sorted(maps.Keys(f.marks))
}

// cordonedEnv is an env on fleet with Parking park on autopilot and a
// fakeCordoner with no marks yet, restarted with them.
func cordonedEnv(t *testing.T, fleet *cluster.Fleet, park parking.Config) (*env, *fakeCordoner) {
	e := newEnv(t, fleet, nil)
	c := newFakeCordoner()
	e.mod = func(cfg *Config) { cfg.Mode, cfg.Parking, cfg.Cordoner = service.ModeAutopilot, &park, c }
	e.restart()
	return e, c
}

// synced lets the time pass after a restart until the plane deals with
// the Cordoner's marks (its placements and the marks synced).
func (e *env) synced() { e.clock.Advance(DefaultNodeSyncTimeout) }

// restartUntilSynced restarts the plane and runs a cycle, which must leave
// node as it was restored (state), and another once the marks synced.
func (e *env) restartUntilSynced(node, state string) {
	e.t.Helper()
	e.restart()
	e.plane.cycle(e.ctx)
	e.wantNode(node, state, "restored, before the marks synced")
	e.synced()
	e.plane.cycle(e.ctx)
}

// Where other schedulers share the fleet, a node is cordoned before it
// parks and uncordoned when it is woken; a node that cannot be cordoned
// is not parked, and tried again only after IdleAfter; a node that runs
// work the plane did not place is not parked; a mark left on a node that
// is not parked is taken off with parking off, and left alone by the
// advisor.
func TestAParkedNodeIsCordonedUntilItIsWoken(t *testing.T) {
	e, c := cordonedEnv(t, fleetOf(2, 4), parking.Config{IdleAfter: 10 * time.Minute})
	c.unparkable["n1"], c.failCordon = "2 pods of other schedulers run there", 1
	e.cyclesApart(10 * time.Minute)
	if st := e.nodeStates(); st["n0"] != "ready" || st["n1"] != "ready" {
		t.Fatalf("with n0's cordon failed and n1 unparkable: %v, want both ready", st)
	}
	if got := c.took(); !slices.Equal(got, []string{"cordon n0"}) {
		t.Fatalf("calls %v, want [cordon n0]: n1 is not a candidate", got)
	}
	e.clock.Advance(9 * time.Minute)
	e.plane.cycle(e.ctx)
	if got := c.took(); len(got) != 0 {
		t.Fatalf("9 minutes after n0's cordon failed: calls %v, want none before IdleAfter", got)
	}
	e.clock.Advance(time.Minute)
	e.plane.cycle(e.ctx)
	e.wantNode("n0", "parked", "once its cordon holds")
	if got := c.took(); !slices.Equal(got, []string{"cordon n0"}) || !slices.Equal(c.marked(), []string{"n0"}) {
		t.Fatalf("calls %v, marks %v; want n0 cordoned", got, c.marked())
	}
	e.plane.cycle(e.ctx)
	if got := c.took(); len(got) != 0 {
		t.Errorf("a cycle with n0 parked: calls %v, want none", got)
	}

	// Two jobs of a node's GPUs: the second wakes n0, which is uncordoned
	// as it is woken.
	e.submit("a", spec(4, 10*time.Hour))
	e.submit("b", spec(4, 10*time.Hour))
	e.plane.cycle(e.ctx)
	e.wantNode("n0", "waking", "with b waiting")
	if got := c.took(); !slices.Equal(got, []string{"uncordon n0"}) || len(c.marked()) != 0 {
		t.Fatalf("calls %v, marks %v; want n0 uncordoned", got, c.marked())
	}

	// A mark the plane did not make now (a record lost) is left alone by
	// the advisor and, with parking off, taken off once the marks synced.
	c.mark("n1")
	e.mod = func(cfg *Config) { cfg.Mode, cfg.Cordoner = service.ModeAdvisor, c }
	e.restart()
	e.synced()
	e.plane.cycle(e.ctx)
	if got := c.took(); len(got) != 0 {
		t.Errorf("the advisor: calls %v, want none", got)
	}
	e.mod = func(cfg *Config) { cfg.Mode, cfg.Cordoner = service.ModeAutopilot, c }
	e.restart()
	e.plane.cycle(e.ctx)
	if got := c.took(); len(got) != 0 {
		t.Errorf("before the marks synced: calls %v, want none", got)
	}
	e.synced()
	e.plane.cycle(e.ctx)
	if got := c.took(); !slices.Equal(got, []string{"uncordon n1"}) || len(c.marked()) != 0 {
		t.Errorf("calls %v, marks %v; want n1 uncordoned", got, c.marked())
	}
}

// A node that bears the parked mark, though the store holds no record of
// it (another replica parked it, with a store of its own), is taken as
// parked, down (where the store may still list a job: the job is gone
// with the node) or up (still shutting down), and woken when a job needs
// it; but a marked node that is up where a job of the plane runs, or that
// the Cordoner names unparkable, is uncordoned instead.
func TestANodeThatBearsTheParkedMarkIsTakenAsParked(t *testing.T) {
	e, c := cordonedEnv(t, fleetOf(6, 4), parking.Config{IdleAfter: time.Hour})
	e.submit("r", spec(4, 10*time.Hour))
	e.submit("s", spec(4, 10*time.Hour))
	e.plane.cycle(e.ctx)
	pls, err := e.store.Placements(e.ctx)
	if err != nil || len(pls) != 2 {
		t.Fatalf("placements %+v (%v), want r's and s's", pls, err)
	}
	running, lost := pls[0].Allocations[0].GPU.Node, pls[1].Allocations[0].GPU.Node
	var others []string
	for _, n := range []string{"n0", "n1", "n2", "n3", "n4", "n5"} {
		if n != running && n != lost {
			others = append(others, n)
		}
	}
	down, up, unparkable := others[0], others[1], others[2]
	e.setNode(down, cluster.NodeFailed) // off
	e.setNode(lost, cluster.NodeFailed) // off, its job gone with it
	c.unparkable[unparkable] = "a pod of another scheduler runs there"
	c.mark(down, up, unparkable, running, lost)
	c.took()
	e.synced()
	e.plane.cycle(e.ctx)
	e.wantNode(down, "parked", "down with the mark")
	e.wantNode(lost, "parked", "down with the mark, a job listed there")
	e.wantNode(up, "parked", "up with the mark")
	e.wantNode(running, "ready", "with the mark and r running")
	e.wantNode(unparkable, "ready", "with the mark and unparkable")
	want := []string{"cordon " + down, "cordon " + lost, "cordon " + up, "uncordon " + running, "uncordon " + unparkable}
	got := c.took()
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) || !slices.Equal(c.marked(), slices.Sorted(slices.Values([]string{down, lost, up}))) {
		t.Fatalf("calls %v, marks %v; want %v", got, c.marked(), want)
	}
	if parked, err := e.store.ParkedNodes(e.ctx); err != nil || len(parked) != 3 || len(parked[0].Node.GPUs) != 4 {
		t.Fatalf("the store holds %+v (%v), want the three taken as parked with their 4 GPUs", parked, err)
	}
	for _, j := range []string{"a", "b", "c", "d"} {
		e.submit(j, spec(4, 10*time.Hour))
	}
	e.plane.cycle(e.ctx)
	got = c.took()
	woken := 0
	for _, n := range []string{down, lost, up} {
		if e.nodeStates()[n] == "waking" {
			woken++
			if !slices.Contains(got, "uncordon "+n) {
				t.Errorf("calls %v: want %s, woken, uncordoned", got, n)
			}
		}
	}
	if woken == 0 || len(got) != woken {
		t.Errorf("calls %v with %d of the nodes taken as parked woken; want one uncordon each, and some woken", got, woken)
	}
}

// A node the plane woke whose mark could not be taken off then is
// uncordoned once it is awake, not taken as parked, nor later while the
// Cordoner's view still shows the mark; a node that came back up while
// parked is uncordoned too.
func TestAWokenNodeStillMarkedIsUncordonedNotTakenAsParked(t *testing.T) {
	e, c := cordonedEnv(t, fleetOf(2, 4), parking.Config{IdleAfter: 10 * time.Minute})
	e.cyclesApart(10 * time.Minute)
	e.wantNode("n0", "parked", "idle 10 minutes")
	e.wantNode("n1", "parked", "idle 10 minutes")
	c.took()

	c.failUncordon = 1
	e.submit("a", spec(4, 10*time.Hour))
	e.plane.cycle(e.ctx) // n0 woken; its uncordon fails
	e.wantNode("n0", "waking", "with a waiting")
	e.plane.cycle(e.ctx) // n0 awake (it has no suspend program); uncordoned
	if st := e.nodeStates()["n0"]; st == "parked" {
		t.Fatalf("n0, woken, with its mark still on: %s, want it not parked again", st)
	}
	if slices.Contains(c.marked(), "n0") {
		t.Fatalf("marks %v: want n0's taken off", c.marked())
	}

	// n1 goes down and comes back up while parked: awake, and uncordoned.
	e.setNode("n1", cluster.NodeFailed)
	e.plane.cycle(e.ctx)
	e.setNode("n1", cluster.NodeReady)
	e.plane.cycle(e.ctx)
	e.plane.cycle(e.ctx)
	if st := e.nodeStates()["n1"]; st == "parked" || slices.Contains(c.marked(), "n1") {
		t.Fatalf("n1, back up while parked: %s, marks %v; want it awake and uncordoned", st, c.marked())
	}
	c.mu.Lock()
	c.stale = []string{"n1"} // the view still shows n1's mark
	c.mu.Unlock()
	c.took()
	e.plane.cycle(e.ctx)
	if got := c.took(); slices.Contains(got, "cordon n1") || e.nodeStates()["n1"] == "parked" {
		t.Errorf("n1 uncordoned, its mark still in the view: calls %v, state %s; want it left alone", got, e.nodeStates()["n1"])
	}
}

// A cordon that failed after putting the mark on (its revert failed) is
// taken off at the next cycle, not taken for another replica's park.
func TestACordonLeftOnIsTakenOff(t *testing.T) {
	e, c := cordonedEnv(t, fleetOf(1, 4), parking.Config{IdleAfter: 10 * time.Minute})
	c.failRevert = 1
	e.cyclesApart(10 * time.Minute)
	e.wantNode("n0", "ready", "its cordon failed")
	e.plane.cycle(e.ctx)
	e.wantNode("n0", "ready", "the next cycle")
	if got := c.took(); !slices.Equal(got, []string{"cordon n0", "uncordon n0"}) || len(c.marked()) != 0 {
		t.Errorf("calls %v, marks %v; want n0's mark taken off", got, c.marked())
	}
}

// A node restored waking after a restart that bears the parked mark
// (another replica, leading meanwhile, parked it again) is parked once
// the marks have synced, not taken for awake and uncordoned while it shuts
// down.
func TestARestoredWakingNodeThatBearsTheMarkIsParked(t *testing.T) {
	e, c := cordonedEnv(t, fleetOf(1, 4), parking.Config{IdleAfter: 10 * time.Minute, Suspend: "true"})
	e.cyclesApart(10 * time.Minute)
	e.wantNode("n0", "parked", "idle 10 minutes")
	e.plane.background.Wait() // its suspend program ran; the node is still up, shutting down
	e.plane.cycle(e.ctx)
	e.submit("a", spec(4, time.Hour))
	e.plane.cycle(e.ctx)
	e.wantNode("n0", "waking", "with a waiting")
	c.mark("n0")
	c.took()
	e.restartUntilSynced("n0", "waking")
	e.wantNode("n0", "parked", "restored waking with the mark")
	if got := c.took(); slices.Contains(got, "uncordon n0") || !c.marks["n0"] {
		t.Errorf("calls %v: want n0's mark kept", got)
	}
}

// A node restored parked after a restart that is up and, read live, no
// longer bears the mark (a replica that led meanwhile woke it) is awake,
// once the live read succeeds; but not one that still bears it though
// the Cordoner's view lags.
func TestARestoredParkedNodeUpWithoutItsMarkIsAwake(t *testing.T) {
	e, c := cordonedEnv(t, fleetOf(2, 4), parking.Config{IdleAfter: 10 * time.Minute})
	e.cyclesApart(10 * time.Minute)
	e.wantNode("n0", "parked", "idle 10 minutes")
	e.wantNode("n1", "parked", "idle 10 minutes")
	c.mu.Lock()
	delete(c.marks, "n0") // the other replica woke it
	c.stale = []string{}  // the view shows no mark yet
	c.failMarked = 1
	c.mu.Unlock()
	e.restartUntilSynced("n0", "parked")
	e.wantNode("n0", "parked", "its live read failed")
	e.plane.cycle(e.ctx)
	e.wantNode("n0", "ready", "up without its mark")
	e.wantNode("n1", "parked", "its mark on, though not seen")
	if parked, err := e.store.ParkedNodes(e.ctx); err != nil || len(parked) != 1 || parked[0].Node.Name != "n1" {
		t.Errorf("the store holds %+v (%v), want n1 alone", parked, err)
	}
}

// A woken node that is not up WakeTimeout later is parked again even
// where it cannot be cordoned (an operator cordoned it meanwhile): it
// stays no longer waking, and another node is woken for the work.
func TestAFailedWakeParksTheNodeAgainThoughItsCordonFails(t *testing.T) {
	e, c := cordonedEnv(t, fleetOf(1, 4), parking.Config{IdleAfter: 10 * time.Minute, WakeTimeout: 10 * time.Minute})
	e.cyclesApart(10 * time.Minute)
	e.wantNode("n0", "parked", "idle 10 minutes")
	e.setNode("n0", cluster.NodeFailed)
	e.plane.cycle(e.ctx)
	e.submit("a", spec(4, time.Hour))
	e.plane.cycle(e.ctx)
	e.wantNode("n0", "waking", "with a waiting")
	c.failCordon = 1
	e.clock.Advance(10 * time.Minute)
	e.plane.cycle(e.ctx)
	e.wantNode("n0", "parked", "down 10 minutes after its wake, its cordon failing")
}

// A node without GPUs (a control-plane or CPU node in the fleet) is never
// parked: it is not the plane's to power down.
func TestANodeWithoutGPUsIsNotParked(t *testing.T) {
	fleet := fleetOf(1, 4)
	fleet.Nodes = append(fleet.Nodes, clustertest.Node("control-plane").Obj())
	e := newEnv(t, fleet, func(cfg *Config) {
		cfg.Mode, cfg.Parking = service.ModeAutopilot, &parking.Config{IdleAfter: 10 * time.Minute}
	})
	e.cyclesApart(time.Hour)
	e.wantNode("n0", "parked", "idle an hour")
	e.wantNode("control-plane", "ready", "idle an hour, without GPUs")
}
