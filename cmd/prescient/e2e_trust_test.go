package main

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/api"
	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/service"
)

// What serve refuses, with an agent and a job as real processes:
//   - at submit, a job the agents could never run (no command, GPU models
//     the fleet has none of), with a 400 naming the field;
//   - events from an agent about another node's work: node-002's token
//     cannot end, checkpoint or stop a job that runs on node-001, by
//     events or by a running list, before or after a control-plane
//     restart (when the hub learns the placement from the store).
func TestEndToEndTrust(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds the binary and runs serve, an agent and a job")
	}
	bin := e2eBin(t)
	c := newE2ECluster(t, bin)
	c.startServe()
	c.startAgent("node-001")
	c.waitFor("node-001 to register", 30*time.Second, func() (bool, string) {
		var f service.FleetState
		c.do(http.MethodGet, "/v1/fleet", e2eAdminToken, nil, &f)
		return f.GPUs == 4, fmt.Sprintf("%d GPUs", f.GPUs)
	})
	for body, field := range map[string]string{
		`{"gpus":1}`: "command: empty",
		`{"gpus":1,"command":["true"],"gpu_models":["H100"]}`: "gpu_models: the fleet has no GPU of H100",
	} {
		if code, b := c.postRaw("/v1/jobs", e2eSubmitToken, body); code != http.StatusBadRequest || !bytes.Contains(b, []byte(field)) {
			t.Errorf("POST /v1/jobs %s: %d %s; want 400 naming %q", body, code, b, field)
		}
	}
	req := api.SubmitRequest{ID: "victim", JobSpecRequest: api.JobSpecRequest{Name: "victim", GPUs: 4, Checkpointable: true},
		Command: []string{bin, "workload", "--steps", "600", "--step-time", "200ms"}}
	if code := c.do(http.MethodPost, "/v1/jobs", e2eSubmitToken, req, nil); code != http.StatusCreated {
		t.Fatalf("POST /v1/jobs: %d", code)
	}
	c.waitFor("the victim to run", 30*time.Second, func() (bool, string) {
		js := c.job("victim")
		return js.State == cluster.StateRunning && c.attemptLog("node-001", "victim", 1) != "", string(js.State)
	})

	forged := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	forge := func(instance string) {
		t.Helper()
		post := func(path, body string) int {
			code, b := c.postRaw(path, e2eNode2Token, body)
			t.Logf("node-002 %s: %d %s", path, code, bytes.TrimSpace(b))
			return code
		}
		att := `"job":"victim","attempt":1,"rank":0,"world_size":1`
		if code := post("/v1/agents/register", `{"node":{"name":"node-002"},"instance":"`+instance+`","running":[{`+att+`}]}`); code != http.StatusOK {
			t.Fatalf("node-002 registering itself: %d", code)
		}
		ts := strconv.Quote(forged.Format(time.RFC3339))
		post("/v1/agents/node-002/events", `{"instance":"`+instance+`","events":[`+
			`{"seq":1,"type":"checkpointed","time":`+ts+`,`+att+`,"checkpoint":{"time":`+ts+`,"step":999,"path":"/evil"}},`+
			`{"seq":2,"type":"exited","time":`+ts+`,`+att+`,"exit_code":1}]}`)
	}
	unharmed := func(when string) {
		t.Helper()
		time.Sleep(3 * time.Second) // a few of the plane's 1 s cycles
		js := c.job("victim")
		if js.State != cluster.StateRunning || js.Attempts != 1 {
			t.Fatalf("%s: the victim is %s at attempt %d after node-002's forged events; want running at 1", when, js.State, js.Attempts)
		}
		if js.LastCheckpoint != nil && js.LastCheckpoint.Equal(forged) {
			t.Fatalf("%s: node-002's forged checkpoint was recorded", when)
		}
		recs, err := c.stateFile("node-001")
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if r.Job == "victim" && r.Ended {
				t.Fatalf("%s: the victim's process on node-001 ended (exit %d, stopped %v)", when, r.ExitCode, r.Stopped)
			}
		}
	}
	forge("x")
	unharmed("node-002's forgery")
	c.killServe()
	c.startServe()
	forge("y")
	unharmed("node-002's forgery after a control-plane restart")
}
