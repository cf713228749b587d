package control

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
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
func parkingEnv(t *testing.T, nodes int, mode Mode, cfg Parking) (e *env, rec *recordingNotifier) {
	e = newEnv(t, fleetOf(nodes, 4), nil)
	rec = &recordingNotifier{}
	e.mod = func(c *Config) {
		pk := cfg
		c.Mode, c.Notifier, c.Parking = mode, rec, &pk
	}
	e.restart()
	return e, rec
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
	e, rec := parkingEnv(t, 2, ModeAutopilot, Parking{IdleAfter: 10 * time.Minute,
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

	// A job that fits only there wakes it; it starts once the node is
	// back.
	e.submit("b", spec(4, time.Hour))
	e.plane.cycle(e.ctx)
	e.plane.background.Wait()
	if st := e.nodeStates()[other]; st != "waking" {
		t.Fatalf("with b waiting: %s, want waking", st)
	}
	if got := lines(t, resumed); !slices.Equal(got, []string{other}) {
		t.Errorf("the resume program ran for %v, want [%s]", got, other)
	}
	if e.placedOn("b") != "" {
		t.Fatal("b placed while its node boots")
	}
	e.clock.Advance(3 * time.Minute)
	e.plane.cycle(e.ctx)
	if st := e.nodeStates()[other]; st != "waking" {
		t.Fatalf("still booting: %s, want waking", st)
	}
	e.fleet.Nodes = kept
	e.setNode(other, cluster.NodeReady)
	e.plane.cycle(e.ctx)
	if st := e.nodeStates()[other]; st != "ready" {
		t.Fatalf("back: %s, want ready", st)
	}
	if got := e.placedOn("b"); got != other {
		t.Errorf("b placed on %q, want %s", got, other)
	}
	if got := rec.types(); !slices.Equal(got, []string{"submitted", "started", "node_parked", "submitted", "node_waking", "node_awake", "started"}) {
		t.Errorf("events %v", got)
	}
	parked, err := e.store.ParkedNodes(e.ctx)
	if err != nil || len(parked) != 0 {
		t.Errorf("the store still holds %v (%v)", parked, err)
	}
}

func TestTheForecastParksSpareNodesAtOnceAndWakesOneAheadOfDemand(t *testing.T) {
	e, rec := parkingEnv(t, 3, ModeAutopilot, Parking{IdleAfter: time.Hour, Forecast: true})
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
	e, rec := parkingEnv(t, 1, ModeAutopilot, Parking{IdleAfter: 10 * time.Minute,
		Suspend: powerScript(t, "suspend", filepath.Join(dir, "suspended"), true)})
	e.plane.cycle(e.ctx)
	e.clock.Advance(10 * time.Minute)
	e.plane.cycle(e.ctx)
	e.plane.background.Wait()
	e.plane.cycle(e.ctx)
	if st := e.nodeStates()["n0"]; st != "ready" {
		t.Fatalf("after the suspend program failed: %s, want ready", st)
	}
	e.clock.Advance(9 * time.Minute)
	e.plane.cycle(e.ctx)
	if st := e.nodeStates()["n0"]; st != "ready" {
		t.Fatalf("9 minutes after a failed suspend: %s, want ready (not parked again before IdleAfter)", st)
	}
	e.clock.Advance(time.Minute)
	e.plane.cycle(e.ctx)
	e.plane.background.Wait()
	if st := e.nodeStates()["n0"]; st != "parked" {
		t.Fatalf("IdleAfter after the failed suspend: %s, want parked again", st)
	}
	if got := rec.types(); !slices.Equal(got, []string{"node_parked", "node_awake", "node_parked"}) {
		t.Errorf("events %v", got)
	}

}

func TestAWakeThatNeverComesIsGivenUp(t *testing.T) {
	e, _ := parkingEnv(t, 1, ModeAutopilot, Parking{IdleAfter: 10 * time.Minute, WakeTimeout: 5 * time.Minute})
	e.plane.cycle(e.ctx)
	e.clock.Advance(10 * time.Minute)
	e.plane.cycle(e.ctx)
	e.setNode("n0", cluster.NodeFailed) // it powers off
	e.plane.cycle(e.ctx)
	e.submit("a", spec(4, time.Hour))
	e.plane.cycle(e.ctx)
	if st := e.nodeStates()["n0"]; st != "waking" {
		t.Fatalf("with a waiting: %s, want waking", st)
	}
	e.clock.Advance(5 * time.Minute)
	e.plane.cycle(e.ctx)
	if st := e.nodeStates()["n0"]; st != "down" {
		t.Errorf("5 minutes after the wake, not back: %s, want down (given up)", st)
	}
	parked, err := e.store.ParkedNodes(e.ctx)
	if err != nil || len(parked) != 0 {
		t.Errorf("the store still holds %v (%v)", parked, err)
	}
}

func TestTheAdvisorRecommendsParksAndParksNothing(t *testing.T) {
	e, rec := parkingEnv(t, 2, ModeAdvisor, Parking{IdleAfter: 10 * time.Minute})
	e.plane.cycle(e.ctx)
	e.clock.Advance(10 * time.Minute)
	e.plane.cycle(e.ctx)
	e.plane.cycle(e.ctx)
	if st := e.nodeStates(); st["n0"] != "ready" || st["n1"] != "ready" {
		t.Errorf("advisor: %v, want both ready", st)
	}
	recs, err := e.store.ListRecommendations(e.ctx, time.Time{}, 100)
	if err != nil {
		t.Fatal(err)
	}
	var parks []string
	for _, r := range recs {
		if r.Kind == recPark {
			parks = append(parks, r.Reason)
		}
	}
	if len(parks) != 2 || !strings.Contains(parks[0], "park node n0: it ran nothing for 10m0s") {
		t.Errorf("park recommendations %q; want one per node, once each", parks)
	}
	if len(rec.types()) != 0 {
		t.Errorf("events %v; want none", rec.types())
	}
	// A job on n0 makes its recommendation stale.
	e.submit("a", spec(4, time.Hour))
	e.plane.cycle(e.ctx)
	recs, err = e.store.ListRecommendations(e.ctx, time.Time{}, 100)
	if err != nil {
		t.Fatal(err)
	}
	open := 0
	for _, r := range recs {
		if r.Kind == recPark && r.Status == "open" {
			open++
		}
	}
	if open != 1 {
		t.Errorf("%d open park recommendations with a job recommended on a node; want 1", open)
	}
}

func TestParkingConfigIsChecked(t *testing.T) {
	for _, pk := range []Parking{{}, {IdleAfter: -time.Minute}, {IdleAfter: time.Minute, WakeTimeout: -1}} {
		cfg := Config{Parking: &pk}
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "parking") {
			t.Errorf("%+v: %v, want an error naming parking", pk, err)
		}
	}
}
