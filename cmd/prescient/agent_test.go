package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/agent/protocol"
	"github.com/prescient-sched/prescient/backend/agenthub"
	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
)

func TestAgentRegistersASimulatedNodeAndRunsAJob(t *testing.T) {
	hub := agenthub.NewHub(agenthub.HubOptions{PollWait: time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events, err := hub.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(hub.Handler())
	defer srv.Close()
	dir := t.TempDir()

	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&bytes.Buffer{})
	root.SetArgs([]string{"agent", "--server", srv.URL, "--token", "t", "--node", "node-002", "--nvml", "sim",
		"--fleet", "uniform:2x4:H100-SXM5-80GB", "--rack", "r7", "--work-dir", dir, "--log-level", "warn", "-o", "json"})
	agentCtx, stopAgent := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(agentCtx) }()
	defer func() { stopAgent(); <-done }()

	next := func(typ executor.JobEventType) executor.JobEvent {
		t.Helper()
		for {
			select {
			case e := <-events:
				if e.Type == typ {
					return e
				}
			case err := <-done:
				t.Fatalf("agent ended before %s: %v", typ, err)
			case <-time.After(20 * time.Second):
				t.Fatalf("no %s event", typ)
			}
		}
	}
	next(executor.NodeSynced)
	nodes := hub.Nodes()
	if len(nodes) != 1 || nodes[0].Node.Name != "node-002" || len(nodes[0].Node.GPUs) != 4 || nodes[0].Node.Topology.Rack != "r7" {
		t.Fatalf("registered: %+v; want node-002 with 4 GPUs in rack r7", nodes)
	}
	if g := nodes[0].Node.GPUs[3]; g.Model != "H100-SXM5-80GB" || g.NVLinkDomain != "nvl0" || g.UUID == "" || g.MemoryBytes < 80e9 {
		t.Errorf("GPU 3: %+v; want an H100 of the fleet, its NVLink domain and UUID", g)
	}

	err = hub.Start(ctx, executor.Assignment{Job: cluster.Job{ID: "j1"}, Attempt: 1,
		Allocations: []cluster.Allocation{{GPU: cluster.GPURef{Node: "node-002", Index: 1}}, {GPU: cluster.GPURef{Node: "node-002", Index: 2}}},
		Command:     []string{"/bin/sh", "-c", `echo "gpus=$CUDA_VISIBLE_DEVICES token=$PRESCIENT_TOKEN"`}})
	if err != nil {
		t.Fatal(err)
	}
	if e := next(executor.JobExited); e.ExitCode != 0 {
		t.Fatalf("exited: %+v", e)
	}
	log, err := os.ReadFile(filepath.Join(dir, "jobs", "j1", "attempt-1", "job.log"))
	if err != nil || strings.TrimSpace(string(log)) != "gpus=1,2 token=" {
		t.Errorf("job log %q, %v; want gpus=1,2 and no token", log, err)
	}

	stopAgent()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	done <- nil
	var r agentReport
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("report is not JSON: %v\n%s", err, out.String())
	}
	if r.Node != "node-002" || r.NVML != "sim" || r.GPUs != 4 || r.JobsStarted != 1 || r.JobsRunning != 0 {
		t.Errorf("report %+v", r)
	}
}

func TestAgentCollectNamesTheJobOfEachGPUProcess(t *testing.T) {
	hub := agenthub.NewHub(agenthub.HubOptions{PollWait: time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events, err := hub.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(hub.Handler())
	defer srv.Close()
	dir := t.TempDir()
	db := filepath.Join(dir, "telemetry.db")

	root := newRootCmd()
	root.SetOut(&bytes.Buffer{})
	root.SetErr(&bytes.Buffer{})
	root.SetArgs([]string{"agent", "--server", srv.URL, "--token", "t", "--node", "n1", "--nvml", "sim", "--work-dir", filepath.Join(dir, "w"),
		"--collect", "--interval", "100ms", "--flush-interval", "100ms", "--db", db, "--spool-dir", filepath.Join(dir, "spool"), "--log-level", "warn"})
	agentCtx, stopAgent := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(agentCtx) }()
	defer func() {
		stopAgent()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	waitEvent := func(typ executor.JobEventType) {
		t.Helper()
		for {
			select {
			case e := <-events:
				if e.Type == typ {
					return
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("no %s event", typ)
			}
		}
	}
	waitEvent(executor.NodeSynced)
	err = hub.Start(ctx, executor.Assignment{Job: cluster.Job{ID: "j-collect"}, Attempt: 1,
		Allocations: []cluster.Allocation{{GPU: cluster.GPURef{Node: "n1", Index: 5}}},
		Command:     []string{"/bin/sh", "-c", "sleep 1"}})
	if err != nil {
		t.Fatal(err)
	}
	waitEvent(executor.JobExited)
	time.Sleep(300 * time.Millisecond) // the last samples are flushed

	st, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var n int
	var uuid string
	err = st.QueryRow(`SELECT COUNT(*), MAX(gpu_uuid) FROM gpu_processes WHERE job_id = 'j-collect'`).Scan(&n, &uuid)
	if err != nil || n == 0 || !strings.Contains(uuid, "-05-") {
		t.Fatalf("samples of j-collect's process: %d on %q, %v; want some, on GPU 5", n, uuid, err)
	}
}

func TestAgentRejectsBadSettingsNamingTheFlag(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"no token":                {[]string{"--nvml", "sim"}, "--token: empty"},
		"an unknown NVML backend": {[]string{"--token", "t", "--nvml", "fake"}, `--nvml: "fake"`},
		"a node not in the fleet": {[]string{"--token", "t", "--nvml", "sim", "--fleet", "uniform:2x4", "--node", "x"}, "--node x: not a node of --fleet"},
		"a fleet with real NVML":  {[]string{"--token", "t", "--nvml", "real", "--fleet", "uniform:2x4"}, "--fleet: simulates a node"},
		"a server that is no URL": {[]string{"--token", "t", "--nvml", "sim", "--server", "localhost"}, `--server "localhost": want the control plane's http(s) URL`},
		"too many events to keep": {[]string{"--token", "t", "--max-events", "0"}, "--max-events 0"},
	} {
		t.Run(name, func(t *testing.T) {
			args := append([]string{"agent", "--work-dir", t.TempDir()}, tc.args...)
			_, err := run(t, args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one naming %q", err, tc.want)
			}
		})
	}
}

func TestWorkloadCommandRunsItsSteps(t *testing.T) {
	dir := t.TempDir()
	out, err := run(t, "workload", "--steps", "4", "--step-time", "1ms", "--checkpoint-every", "2",
		"--checkpoint-dir", dir, "--checkpoint-ack", filepath.Join(dir, "ack"), "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var r workloadReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("output is not one JSON object: %v\n%s", err, out)
	}
	if r.Steps != 4 || r.Checkpoints != 1 || r.ExitCode != 0 {
		t.Errorf("report %+v; want 4 steps, one checkpoint (at step 2)", r)
	}
	b, err := os.ReadFile(filepath.Join(dir, "ack"))
	if err != nil {
		t.Fatal(err)
	}
	if a, err := protocol.ParseAck(b); err != nil || a.Step != 2 {
		t.Errorf("ack %q: %+v, %v; want step 2", b, a, err)
	}
	if _, err := run(t, "workload", "--steps", "2", "--checkpoint-signal", "SIGKILL"); err == nil || !strings.Contains(err.Error(), "--checkpoint-signal") {
		t.Errorf("SIGKILL as the checkpoint signal: %v, want an error naming --checkpoint-signal", err)
	}
}
