package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/api"
	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/service"
)

// TestEndToEndParking parks and wakes real agents: serve (autopilot, agent
// backend) parks the two idle nodes after 3 s and runs its suspend program
// for each, upon which the test kills the node's agent (the node is off);
// a submitted job wakes one node through the resume program, upon which
// the test starts that node's agent again; the job runs there to its end,
// and the node parks again once it is empty.
func TestEndToEndParking(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds the binary and runs serve, agents and a job for about half a minute")
	}
	c := newE2ECluster(t, e2eBin(t))
	power := filepath.Join(c.dir, "power")
	if err := os.Mkdir(power, 0o755); err != nil {
		t.Fatal(err)
	}
	program := func(verb string) string {
		path := filepath.Join(power, verb+".sh")
		body := fmt.Sprintf("#!/bin/sh\necho \"$1\" >> %s\n", filepath.Join(power, verb))
		if err := os.WriteFile(path, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
		return path
	}
	ran := func(verb string) []string {
		b, err := os.ReadFile(filepath.Join(power, verb))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		return strings.Fields(string(b))
	}
	fleet := func() map[string]service.NodeState {
		var f service.FleetState
		if code := c.do(http.MethodGet, "/v1/fleet", e2eAdminToken, nil, &f); code != http.StatusOK {
			t.Fatalf("GET /v1/fleet: %d", code)
		}
		out := map[string]service.NodeState{}
		for _, n := range f.Nodes {
			out[n.Name] = n
		}
		return out
	}
	c.startServe("--park-idle-after", "3s", "--park-suspend-program", program("suspend"),
		"--park-resume-program", program("resume"), "--park-wake-timeout", "60s", "--agent-silent-after", "2s")
	nodes := []string{"node-001", "node-002"}
	for _, n := range nodes {
		c.startAgent(n)
	}

	// 1. Both nodes run nothing: they park, and go off.
	off := map[string]bool{}
	c.waitFor("both nodes to park and run the suspend program", 30*time.Second, func() (bool, string) {
		for _, n := range ran("suspend") {
			if !off[n] {
				off[n] = true
				p := c.agents[n]
				_ = p.cmd.Process.Signal(syscall.SIGKILL) // the power goes
				<-p.done
			}
		}
		return len(off) == 2, fmt.Sprintf("suspended %v", ran("suspend"))
	})
	c.waitFor("the fleet to show both nodes parked, their agents gone", 30*time.Second, func() (bool, string) {
		f := fleet()
		return f["node-001"].State == "parked" && f["node-002"].State == "parked" && !f["node-001"].Agent && !f["node-002"].Agent,
			fmt.Sprintf("%+v", f)
	})

	// 2. A job wakes one node; its agent comes back and runs it.
	req := api.SubmitRequest{ID: "wake-me", JobSpecRequest: api.JobSpecRequest{Name: "wake-me", GPUs: 4, Checkpointable: true},
		Command: []string{c.bin, "workload", "--steps", "10", "--step-time", "200ms", "--checkpoint-every", "5"}}
	if code := c.do(http.MethodPost, "/v1/jobs", e2eSubmitToken, req, nil); code != http.StatusCreated {
		t.Fatalf("POST /v1/jobs: %d, want 201", code)
	}
	var woken string
	c.waitFor("the resume program to run for one node", 30*time.Second, func() (bool, string) {
		r := ran("resume")
		if len(r) > 0 {
			woken = r[0]
		}
		return woken != "", fmt.Sprintf("resumed %v, fleet %+v", r, fleet())
	})
	if st := fleet()[woken].State; st != "waking" && st != "ready" {
		t.Errorf("%s after its wake: %s, want waking (or ready)", woken, st)
	}
	c.startAgent(woken) // it boots
	c.waitFor("the job to succeed", 60*time.Second, func() (bool, string) {
		js := c.job("wake-me")
		return js.State == cluster.StateSucceeded, fmt.Sprintf("%s (%s)", js.State, js.Reason)
	})
	if r := ran("resume"); !slices.Equal(r, []string{woken}) {
		t.Errorf("resume ran for %v, want only %s", r, woken)
	}
	var on []string
	for _, a := range c.attempts() {
		on = append(on, a.node+"/"+a.job)
	}
	if !slices.Equal(on, []string{woken + "/wake-me"}) {
		t.Errorf("attempts %v, want one of wake-me on %s", on, woken)
	}
	other := map[string]string{"node-001": "node-002", "node-002": "node-001"}[woken]
	if st := fleet()[other].State; st != "parked" {
		t.Errorf("%s: %s, want still parked", other, st)
	}

	// 3. Empty again, the woken node parks again.
	c.waitFor("the woken node to park again", 30*time.Second, func() (bool, string) {
		return fleet()[woken].State == "parked" && len(ran("suspend")) == 3, fmt.Sprintf("suspended %v", ran("suspend"))
	})
}
