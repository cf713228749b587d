package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/agent/protocol"
	"github.com/prescient-sched/prescient/backend/agenthub"
	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
)

const testToken = "agent-secret"

// authOnly stands in for the API in front of the hub: it wants the agent
// token.
func authOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+testToken {
			protocol.WriteError(w, http.StatusUnauthorized, "unauthorized", "want the agent token")
			return
		}
		h.ServeHTTP(w, r)
	})
}

// plane is a hub behind an HTTP server that can go away and come back on
// the same address, and the events it has seen.
type plane struct {
	t      *testing.T
	hub    *agenthub.Hub
	srv    *httptest.Server
	addr   string
	events chan executor.JobEvent
	cancel context.CancelFunc
}

func newPlane(t *testing.T, o agenthub.HubOptions) *plane {
	t.Helper()
	if o.PollWait == 0 {
		o.PollWait = 2 * time.Second
	}
	if o.SilentAfter == 0 {
		o.SilentAfter = 5 * time.Second
	}
	p := &plane{t: t, hub: agenthub.NewHub(o)}
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	ch, err := p.hub.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p.events = make(chan executor.JobEvent, 1000)
	go func() {
		for e := range ch {
			p.events <- e
		}
	}()
	p.srv = httptest.NewServer(authOnly(p.hub.Handler()))
	p.addr = p.srv.Listener.Addr().String()
	t.Cleanup(func() { p.srv.Close(); cancel() })
	return p
}

func (p *plane) url() string { return "http://" + p.addr }

// down closes the server and every connection to it.
func (p *plane) down() {
	p.srv.CloseClientConnections()
	p.srv.Close()
}

// up serves hub (the same one, or a new one: a restarted control plane) on
// the old address again.
func (p *plane) up(hub *agenthub.Hub) {
	p.t.Helper()
	var ln net.Listener
	var err error
	for range 50 {
		if ln, err = net.Listen("tcp", p.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		p.t.Fatalf("listen on %s again: %v", p.addr, err)
	}
	if hub != p.hub {
		p.cancel()
		p.hub = hub
		ctx, cancel := context.WithCancel(context.Background())
		p.cancel = cancel
		ch, err := hub.Watch(ctx)
		if err != nil {
			p.t.Fatal(err)
		}
		go func() {
			for e := range ch {
				p.events <- e
			}
		}()
	}
	p.srv = httptest.NewUnstartedServer(authOnly(hub.Handler()))
	p.srv.Listener.Close()
	p.srv.Listener = ln
	p.srv.Start()
	p.t.Cleanup(func() { p.srv.Close(); p.cancel() })
}

// next waits for the next event of type typ for job ("" for any job),
// skipping others.
func (p *plane) next(typ executor.JobEventType, job cluster.JobID) executor.JobEvent {
	p.t.Helper()
	timeout := time.After(15 * time.Second)
	for {
		select {
		case e := <-p.events:
			if e.Type == typ && (job == "" || e.Job == job) {
				return e
			}
			p.t.Logf("event %s %s (skipped while waiting for %s %s)", e.Type, e.Job, typ, job)
		case <-timeout:
			p.t.Fatalf("no %s event for %q within 15s", typ, job)
		}
	}
}

// nextOf returns the next event of one of the types, skipping others.
func (p *plane) nextOf(types ...executor.JobEventType) executor.JobEvent {
	p.t.Helper()
	timeout := time.After(15 * time.Second)
	for {
		select {
		case e := <-p.events:
			if slices.Contains(types, e.Type) {
				return e
			}
		case <-timeout:
			p.t.Fatalf("no %v event within 15s", types)
		}
	}
}

// testConfig is the configuration of the tests' agents: node with four
// GPUs, working in dir.
func testConfig(server, node, dir string) Config {
	return Config{
		Server: server, Token: testToken, WorkDir: dir,
		Node: protocol.NodeInfo{Name: node, Rack: "r1", GPUs: []protocol.GPUInfo{
			{Index: 0, Model: "A100-SXM4-40GB", MemoryBytes: 40 << 30}, {Index: 1, Model: "A100-SXM4-40GB", MemoryBytes: 40 << 30},
			{Index: 2, Model: "A100-SXM4-40GB", MemoryBytes: 40 << 30}, {Index: 3, Model: "A100-SXM4-40GB", MemoryBytes: 40 << 30},
		}},
		PollWait: 2 * time.Second, BackoffMin: 20 * time.Millisecond, BackoffMax: 200 * time.Millisecond, AckPoll: 20 * time.Millisecond,
		Env: []string{"PATH=" + os.Getenv("PATH")},
	}
}

// runAgent starts an agent for node on dir, and stops it and kills its jobs
// at cleanup.
func runAgent(t *testing.T, server, node, dir string) (*Agent, context.CancelFunc) {
	t.Helper()
	a, err := New(testConfig(server, node, dir))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { a.Run(ctx) })
	stop := func() { cancel(); wg.Wait() }
	t.Cleanup(func() {
		stop()
		killJobs(a)
	})
	return a, stop
}

// killJobs kills the process groups of the agent's running jobs and waits
// for the agent to see them end.
func killJobs(a *Agent) {
	for _, j := range a.Jobs() {
		if !j.Ended && j.PID > 0 {
			syscall.Kill(-j.PID, syscall.SIGKILL)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(a.Running()) > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
}

// assignment is a job on GPUs of nodes, running the workload with args.
func assignment(id string, attempt int, gpus []cluster.GPURef, args ...string) executor.Assignment {
	a := executor.Assignment{Job: cluster.Job{ID: cluster.JobID(id)}, Attempt: attempt, Command: workloadCommand(args...), Env: workloadEnv}
	for _, g := range gpus {
		a.Allocations = append(a.Allocations, cluster.Allocation{Job: cluster.JobID(id), GPU: g, Milli: cluster.MilliGPU})
	}
	return a
}

func gpusOf(node string, idx ...int) []cluster.GPURef {
	var out []cluster.GPURef
	for _, i := range idx {
		out = append(out, cluster.GPURef{Node: node, Index: i})
	}
	return out
}

// jobLog reads the job.log of an attempt.
func jobLog(t *testing.T, dir, job string, attempt int) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "jobs", safeName(job), "attempt-"+strconv.Itoa(attempt), "job.log"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// waitFor polls cond until it holds or 10s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func strconvI(i int64) string { return strconv.FormatInt(i, 10) }

func errorsIs(err, target error) bool { return errors.Is(err, target) }

// waitSteps waits until the attempt's log shows its first step: from then
// on the workload answers signals.
func waitSteps(t *testing.T, dir, job string, attempt int) {
	t.Helper()
	path := filepath.Join(dir, "jobs", safeName(job), "attempt-"+strconv.Itoa(attempt), "job.log")
	waitFor(t, job+" to run a step", func() bool {
		b, _ := os.ReadFile(path)
		return strings.Contains(string(b), "step 1/")
	})
}

// agentProcEnv makes the test binary run an agent (runAgentChild) instead
// of the tests; its value is "SERVER NODE DIR".
const agentProcEnv = "AGENT_TEST_RUN_AGENT"

// runAgentChild runs the agent of spec until it is killed.
func runAgentChild(spec string) int {
	f := strings.Fields(spec)
	if len(f) != 3 {
		fmt.Fprintf(os.Stderr, "%s=%q: want SERVER NODE DIR\n", agentProcEnv, spec)
		return 2
	}
	cfg := testConfig(f[0], f[1], f[2])
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	a, err := New(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	a.Run(context.Background())
	return 0
}

// agentProc is an agent in a process of its own, which a test kills as
// kill -9 does: it leaves nothing in order, and its jobs run on without it.
type agentProc struct {
	t   *testing.T
	cmd *exec.Cmd
	log string
}

// spawnAgent starts an agent process for node on dir; cleanup kills it.
func spawnAgent(t *testing.T, server, node, dir string) *agentProc {
	t.Helper()
	ap := &agentProc{t: t, log: filepath.Join(t.TempDir(), "agent.log")}
	logFile, err := os.Create(ap.log)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	ap.cmd = exec.Command(os.Args[0], "-test.run=^$")
	ap.cmd.Env = append(os.Environ(), agentProcEnv+"="+server+" "+node+" "+dir)
	ap.cmd.Stdout, ap.cmd.Stderr = logFile, logFile
	if err := ap.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ap.kill()
		if t.Failed() {
			b, _ := os.ReadFile(ap.log)
			t.Logf("log of the agent process:\n%s", b)
		}
	})
	return ap
}

// kill kills the agent process with SIGKILL and waits for it to end.
func (ap *agentProc) kill() {
	if ap.cmd.ProcessState == nil {
		ap.cmd.Process.Kill()
		ap.cmd.Wait()
	}
}

// statusPath is the exit status file of an attempt's supervisor.
func statusPath(dir, job string, attempt int) string {
	return filepath.Join(dir, "jobs", safeName(job), "attempt-"+strconv.Itoa(attempt)+".status.json")
}
