package main

// The machinery of the end-to-end test (e2e_test.go): the prescient binary,
// its serve and agent processes, the HTTP calls, the waits, and what the
// agents leave in their work directories.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/agent"
	"github.com/prescient-sched/prescient/service"
)

// The end-to-end cluster's bearer tokens (the tokens file wants 16
// characters at least).
const (
	e2eAdminToken  = "e2e-admin-token-0123456789"
	e2eSubmitToken = "e2e-submit-token-0123456789"
	e2eAgentToken  = "e2e-agent-token-0123456789"
	// e2eNode2Token is an agent token bound to node-002.
	e2eNode2Token = "e2e-agent-node-002-0123456789"
	e2eFleet      = "uniform:2x4:A100-SXM4-80GB"
)

// e2eBinary is the prescient binary the end-to-end tests share, built
// once into a directory TestMain removes.
var e2eBinary struct {
	once      sync.Once
	dir, path string
	err       error
}

// TestMain removes the end-to-end tests' binary once they have run. An
// agent run in this test binary starts its jobs' supervisors as this
// binary too (/proc/self/exe): such a run supervises, as main does.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == agent.SuperviseArg {
		os.Exit(agent.Supervise(os.Args[2:]))
	}
	code := m.Run()
	if e2eBinary.dir != "" {
		_ = os.RemoveAll(e2eBinary.dir)
	}
	os.Exit(code)
}

// e2eBin is the shared binary, built on first use.
func e2eBin(t testing.TB) string {
	t.Helper()
	e2eBinary.once.Do(func() {
		if e2eBinary.dir, e2eBinary.err = os.MkdirTemp("", "prescient-e2e-"); e2eBinary.err != nil {
			return
		}
		e2eBinary.path, e2eBinary.err = e2eBuild(e2eBinary.dir)
		if e2eBinary.err == nil {
			t.Logf("built %s", e2eBinary.path)
		}
	})
	if e2eBinary.err != nil {
		t.Fatal(e2eBinary.err)
	}
	return e2eBinary.path
}

// e2eBuild builds the prescient binary into dir, as `make build` does, and
// returns its path.
func e2eBuild(dir string) (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(dir, "prescient")
	cmd := exec.Command(goBin, "build", "-o", bin, "github.com/prescient-sched/prescient/cmd/prescient")
	cmd.Env = os.Environ()
	if os.Getenv("CGO_CFLAGS") == "" {
		cmd.Env = append(cmd.Env, "CGO_CFLAGS=-Wno-deprecated-declarations") // as the Makefile exports
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/prescient: %w\n%s", err, out)
	}
	return bin, nil
}

// e2eProc is one child process (serve or an agent) and its log file.
type e2eProc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error // Wait's, once done is closed
}

// exited reports whether the process has ended.
func (p *e2eProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// e2eCluster is a control plane (prescient serve) and its node agents,
// each a real process, in one directory.
type e2eCluster struct {
	t      testing.TB
	bin    string
	dir    string
	db     string
	addr   string
	serves []*e2eProc          // every incarnation, the current last
	agents map[string]*e2eProc // the current agent of each node
	// older are the agents killed, whose logs dumpLogs shows too.
	older  []*e2eProc
	client *http.Client
}

func newE2ECluster(t testing.TB, bin string) *e2eCluster {
	t.Helper()
	dir := t.TempDir()
	tokens := fmt.Sprintf("tokens:\n"+
		"  - {name: admin, token: %q, tenant: ops, role: admin}\n"+
		"  - {name: ml, token: %q, tenant: ml, role: submitter}\n"+
		"  - {name: agents, token: %q, role: agent}\n"+
		"  - {name: agent-node-002, token: %q, role: agent, node: node-002}\n",
		e2eAdminToken, e2eSubmitToken, e2eAgentToken, e2eNode2Token)
	if err := os.WriteFile(filepath.Join(dir, "tokens.yaml"), []byte(tokens), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c := &e2eCluster{t: t, bin: bin, dir: dir, db: filepath.Join(dir, "prescient.db"), addr: addr,
		agents: map[string]*e2eProc{}, client: &http.Client{Timeout: 10 * time.Second}}
	t.Cleanup(c.cleanup)
	return c
}

func (c *e2eCluster) url(path string) string { return "http://" + c.addr + path }

// env is the children's environment: this one without PRESCIENT_*
// settings, which every command would read as flags.
func (c *e2eCluster) env() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PRESCIENT_") {
			env = append(env, kv)
		}
	}
	return env
}

func (c *e2eCluster) spawn(name string, args ...string) *e2eProc {
	c.t.Helper()
	p := &e2eProc{name: name, log: filepath.Join(c.dir, name+".log"), done: make(chan struct{})}
	f, err := os.Create(p.log)
	if err != nil {
		c.t.Fatal(err)
	}
	p.cmd = exec.Command(c.bin, args...)
	p.cmd.Dir, p.cmd.Stdout, p.cmd.Stderr, p.cmd.Env = c.dir, f, f, c.env()
	if err := p.cmd.Start(); err != nil {
		f.Close()
		c.t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p
}

// startServe starts a control plane on the cluster's database and address,
// with more flags, and waits until it is ready.
func (c *e2eCluster) startServe(more ...string) *e2eProc {
	c.t.Helper()
	p := c.spawn(fmt.Sprintf("serve-%d", len(c.serves)+1), append([]string{"serve",
		"--mode", "autopilot", "--backend", "agent", "--policy", "prescient",
		"--db", c.db, "--listen", c.addr, "--tokens", filepath.Join(c.dir, "tokens.yaml"),
		"--tick", "1s", "--grace", "15s",
		// The prescient policy spares jobs that ran less than 10 minutes;
		// the test's jobs run for seconds.
		"--preempt-min-run", "1s",
		"--log-format", "json"}, more...)...)
	c.serves = append(c.serves, p)
	c.waitFor("serve to answer /readyz", 30*time.Second, func() (bool, string) {
		if p.exited() {
			c.t.Fatalf("%s exited: %v", p.name, p.err)
		}
		res, err := c.client.Get(c.url("/readyz"))
		if err != nil {
			return false, err.Error()
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK, res.Status
	})
	return p
}

// killServe kills the current control plane with SIGKILL (kill -9).
func (c *e2eCluster) killServe() {
	c.t.Helper()
	p := c.serves[len(c.serves)-1]
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		c.t.Fatalf("kill -9 %s: %v", p.name, err)
	}
	<-p.done
}

// stopServe stops the current control plane with SIGTERM and waits.
func (c *e2eCluster) stopServe() {
	c.t.Helper()
	p := c.serves[len(c.serves)-1]
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		c.t.Fatalf("%s did not stop within 20 s of SIGTERM", p.name)
	}
}

// startAgent starts the agent of node, with its collector writing to the
// control plane's SQLite file.
func (c *e2eCluster) startAgent(node string) *e2eProc {
	c.t.Helper()
	name := "agent-" + node
	if old := c.agents[node]; old != nil {
		c.older = append(c.older, old)
		name = fmt.Sprintf("%s-%d", name, len(c.older)+1)
	}
	p := c.spawn(name, "agent", "--nvml", "sim", "--fleet", e2eFleet, "--node", node,
		"--server", "http://"+c.addr, "--token", e2eAgentToken, "--work-dir", c.workDir(node),
		"--backoff-max", "1s", "--poll-wait", "5s",
		"--collect", "--db", c.db, "--spool-dir", filepath.Join(c.dir, "spool-"+node), "--interval", "1s",
		"--log-format", "json")
	c.agents[node] = p
	return p
}

// killAgent kills node's agent with SIGKILL (kill -9); its jobs run on.
func (c *e2eCluster) killAgent(node string) {
	c.t.Helper()
	p := c.agents[node]
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		c.t.Fatalf("kill -9 %s: %v", p.name, err)
	}
	<-p.done
}

func (c *e2eCluster) workDir(node string) string { return filepath.Join(c.dir, "agent-"+node) }

// do calls the API with token; out, when not nil, takes the JSON answer.
// It returns the status code.
func (c *e2eCluster) do(method, path, token string, body, out any) int {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			c.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.url(path), rd)
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	res, err := c.client.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		c.t.Fatalf("%s %s: reading the answer: %v", method, path, err)
	}
	if out != nil && res.StatusCode < 300 {
		if err := json.Unmarshal(b, out); err != nil {
			c.t.Fatalf("%s %s: answer is not the JSON expected: %v\n%s", method, path, err, b)
		}
	}
	if res.StatusCode >= 300 {
		c.t.Logf("%s %s: %s: %s", method, path, res.Status, bytes.TrimSpace(b))
	}
	return res.StatusCode
}

// postRaw posts body as it is with token, and returns the status and the
// answer.
func (c *e2eCluster) postRaw(path, token, body string) (int, []byte) {
	c.t.Helper()
	req, err := http.NewRequest(http.MethodPost, c.url(path), strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := c.client.Do(req)
	if err != nil {
		c.t.Fatalf("POST %s: %v", path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

// job reads a job through the API.
func (c *e2eCluster) job(id string) service.JobStatus {
	c.t.Helper()
	var js service.JobStatus
	if code := c.do(http.MethodGet, "/v1/jobs/"+id, e2eAdminToken, nil, &js); code != http.StatusOK {
		c.t.Fatalf("GET /v1/jobs/%s: %d", id, code)
	}
	return js
}

// waitFor polls cond every 200 ms until it holds; after timeout the test
// fails with what it waited for and what cond said last.
func (c *e2eCluster) waitFor(what string, timeout time.Duration, cond func() (bool, string)) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, detail := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("waited %s for %s; last seen: %s", timeout, what, detail)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// e2eAttempt is one attempt's directory on one node, as the agent left it.
type e2eAttempt struct {
	node, job string
	attempt   int
	log       string // job.log's content
}

var attemptDirPattern = regexp.MustCompile(`^attempt-(\d+)$`)

// attempts lists every attempt directory under the agents' work dirs.
func (c *e2eCluster) attempts() []e2eAttempt {
	c.t.Helper()
	var out []e2eAttempt
	for node := range c.agents {
		root := filepath.Join(c.workDir(node), "jobs")
		jobs, err := os.ReadDir(root)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			c.t.Fatal(err)
		}
		for _, j := range jobs {
			dirs, err := os.ReadDir(filepath.Join(root, j.Name()))
			if err != nil {
				c.t.Fatal(err)
			}
			for _, d := range dirs {
				m := attemptDirPattern.FindStringSubmatch(d.Name())
				if m == nil {
					continue
				}
				n, _ := strconv.Atoi(m[1])
				b, _ := os.ReadFile(filepath.Join(root, j.Name(), d.Name(), "job.log"))
				out = append(out, e2eAttempt{node: node, job: j.Name(), attempt: n, log: string(b)})
			}
		}
	}
	sort.Slice(out, func(i, k int) bool {
		if out[i].job != out[k].job {
			return out[i].job < out[k].job
		}
		return out[i].attempt < out[k].attempt
	})
	return out
}

// attemptLog is the log of one attempt of job on node ("" while none).
func (c *e2eCluster) attemptLog(node, job string, attempt int) string {
	b, _ := os.ReadFile(filepath.Join(c.workDir(node), "jobs", job, fmt.Sprintf("attempt-%d", attempt), "job.log"))
	return string(b)
}

// e2eRecord is one attempt in an agent's state file (agent/state.go).
type e2eRecord struct {
	Job        string `json:"job"`
	Attempt    int    `json:"attempt"`
	GPUs       []int  `json:"gpus"`
	PID        int    `json:"pid"`
	StartTicks uint64 `json:"start_ticks"`
	// The job's supervisor, which leads a session (and group) of its own.
	SupervisorPID        int    `json:"supervisor_pid"`
	SupervisorStartTicks uint64 `json:"supervisor_start_ticks"`
	Ended                bool   `json:"ended"`
	ExitCode             int    `json:"exit_code"`
	Stopped              bool   `json:"stopped"`
}

// stateFile reads node's agent state file.
func (c *e2eCluster) stateFile(node string) ([]e2eRecord, error) {
	b, err := os.ReadFile(filepath.Join(c.workDir(node), "agent-state.json"))
	if err != nil {
		return nil, err
	}
	var doc struct {
		Attempts []e2eRecord `json:"attempts"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("agent state file of %s: %w", node, err)
	}
	return doc.Attempts, nil
}

// cleanup kills every process the test started: the control planes, the
// agents, and the jobs' supervisors and process groups the agents' state
// files name (only when the PID still is the process the agent started). On failure it
// first logs the tails of the logs.
func (c *e2eCluster) cleanup() {
	if c.t.Failed() {
		c.dumpLogs()
	}
	for _, p := range c.serves {
		if !p.exited() {
			_ = p.cmd.Process.Signal(syscall.SIGKILL)
			<-p.done
		}
	}
	for _, p := range c.agents {
		if !p.exited() {
			_ = p.cmd.Process.Signal(syscall.SIGKILL)
			<-p.done
		}
	}
	for node := range c.agents {
		recs, err := c.stateFile(node)
		if err != nil {
			continue
		}
		for _, r := range recs {
			// The supervisor first: it would write the job's status into
			// the test's directory while it is being removed.
			if r.SupervisorPID > 0 && e2eSameProcess(r.SupervisorPID, r.SupervisorStartTicks) {
				_ = syscall.Kill(-r.SupervisorPID, syscall.SIGKILL)
			}
			if r.Ended || r.PID <= 0 || !e2eSameProcess(r.PID, r.StartTicks) {
				continue
			}
			if err := syscall.Kill(-r.PID, syscall.SIGKILL); err == nil {
				c.t.Logf("cleanup: killed the process group of job %s attempt %d (pid %d)", r.Job, r.Attempt, r.PID)
			}
		}
	}
}

// e2eSameProcess reports whether pid is still the process that started at
// startTicks (field 22 of /proc/PID/stat) and leads its process group.
func e2eSameProcess(pid int, startTicks uint64) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return false
	}
	f := strings.Fields(string(b[i+1:])) // f[0] is field 3 (state)
	if len(f) < 20 {
		return false
	}
	pgrp, _ := strconv.Atoi(f[2])
	ticks, _ := strconv.ParseUint(f[19], 10, 64)
	return pgrp == pid && (startTicks == 0 || ticks == startTicks)
}

// dumpLogs logs the tails of the control planes' and agents' logs and of
// every job log.
func (c *e2eCluster) dumpLogs() {
	for _, p := range c.serves {
		c.t.Logf("--- %s (%s) ---\n%s", p.name, p.log, e2eTail(p.log, 40))
	}
	for _, p := range c.older {
		c.t.Logf("--- %s (%s) ---\n%s", p.name, p.log, e2eTail(p.log, 30))
	}
	for _, p := range c.agents {
		c.t.Logf("--- %s (%s) ---\n%s", p.name, p.log, e2eTail(p.log, 30))
	}
	for _, a := range c.attempts() {
		c.t.Logf("--- job %s attempt %d on %s ---\n%s", a.job, a.attempt, a.node, e2eTailText(a.log, 12))
	}
}

func e2eTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return e2eTailText(string(b), n)
}

func e2eTailText(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("[... %d lines]", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

// e2eLogRecords are the JSON log records of a process's log with the
// message msg (all of them for "").
func e2eLogRecords(path, msg string) []map[string]any {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var rec map[string]any
		if json.Unmarshal(sc.Bytes(), &rec) == nil && (msg == "" || rec["msg"] == msg) {
			out = append(out, rec)
		}
	}
	return out
}

// logProblems logs the distinct warnings and errors the control planes and
// agents logged, with how often each came.
func (c *e2eCluster) logProblems() {
	procs := append(slices.Clone(c.serves), slices.Collect(maps.Values(c.agents))...)
	for _, p := range procs {
		counts := map[string]int{}
		for _, level := range []string{"WARN", "ERROR"} {
			for _, rec := range e2eLogLevel(p.log, level) {
				about := ""
				if rec["type"] != nil || rec["job"] != nil {
					about = fmt.Sprintf(" [%v %v]", rec["type"], rec["job"])
				}
				counts[fmt.Sprintf("%s %v%s (%v)", level, rec["msg"], about, rec["error"])]++
			}
		}
		for _, k := range slices.Sorted(maps.Keys(counts)) {
			c.t.Logf("%s logged %d× %s", p.name, counts[k], k)
		}
	}
}

// e2eLogLevel are the JSON log records of a process's log at level.
func e2eLogLevel(path, level string) []map[string]any {
	var out []map[string]any
	for _, rec := range e2eLogRecords(path, "") {
		if rec["level"] == level {
			out = append(out, rec)
		}
	}
	return out
}
