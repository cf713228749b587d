package agent

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/executor"
)

func TestCheckpointIntervalAndSignalOfTheJob(t *testing.T) {
	p := newPlane(t, HubOptions{})
	dir := t.TempDir()
	runAgent(t, p.url(), "n1", dir)
	p.next(executor.NodeSynced, "")
	as := assignment("j1", 1, gpusOf("n1", 0), "--steps=100000", "--step-time=5ms", "--checkpoint-signal=SIGUSR2")
	as.CheckpointSignal = "SIGUSR2"
	as.CheckpointEvery = 150 * time.Millisecond
	p.hub.Start(context.Background(), as)
	p.next(executor.JobStarted, "j1")
	first := p.next(executor.JobCheckpointed, "j1")
	second := p.next(executor.JobCheckpointed, "j1")
	if second.Checkpoint.Step <= first.Checkpoint.Step {
		t.Errorf("checkpoints at steps %d then %d: want later steps", first.Checkpoint.Step, second.Checkpoint.Step)
	}
	if log := jobLog(t, dir, "j1", 1); !strings.Contains(log, "user defined signal 2 received") {
		t.Errorf("the job did not get SIGUSR2:\n%s", log)
	}
}

func TestJobOfPIDFindsTheJobsDescendants(t *testing.T) {
	p := newPlane(t, HubOptions{})
	dir := t.TempDir()
	a, _ := runAgent(t, p.url(), "n1", dir)
	p.next(executor.NodeSynced, "")
	as := assignment("j-tree", 1, gpusOf("n1", 0))
	as.Command = []string{"/bin/sh", "-c", "sleep 30 & echo $! > child.pid; wait"}
	p.hub.Start(context.Background(), as)
	p.next(executor.JobStarted, "j-tree")
	pidFile := filepath.Join(dir, "jobs", "j-tree", "attempt-1", "child.pid")
	var child int
	waitFor(t, "the job's child", func() bool {
		b, err := os.ReadFile(pidFile)
		child, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && child > 0
	})
	if job, ok := a.JobOfPID(child); !ok || job != "j-tree" {
		t.Errorf("JobOfPID(child %d) = %q, %v; want j-tree", child, job, ok)
	}
	if job, ok := a.JobOfPID(os.Getpid()); ok {
		t.Errorf("JobOfPID(the test) = %q; want none", job)
	}
	p.hub.Stop(context.Background(), "j-tree", time.Second)
	p.next(executor.JobExited, "j-tree")
	if _, ok := a.JobOfPID(child); ok {
		t.Error("JobOfPID still names the job after it ended")
	}
}

func TestAnAttemptClaimedButNotStartedIsNeverStarted(t *testing.T) {
	// The agent died between writing its claim and starting the process:
	// the next agent reports the attempt ended and does not start it.
	dir := t.TempDir()
	if err := saveState(filepath.Join(dir, stateFileName), []record{{Job: "j1", Attempt: 3, WorldSize: 1, StartedAt: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	p := newPlane(t, HubOptions{})
	a, _ := runAgent(t, p.url(), "n1", dir)
	e := p.next(executor.JobExited, "j1")
	if e.Attempt != 3 || e.ExitCode != -1 || !strings.Contains(e.Message, "no agent watched") {
		t.Errorf("exit: %+v", e)
	}
	a.handle(Command{Seq: 1, Type: CommandStart, Job: "j1", Attempt: 3, Start: &StartSpec{Command: []string{"/bin/true"}, WorldSize: 1}})
	if jobs := a.Jobs(); len(jobs) != 1 || jobs[0].PID != 0 {
		t.Errorf("jobs: %+v; want the claim only, nothing started", jobs)
	}
}

func TestAgentWithAWrongTokenDoesNotRegister(t *testing.T) {
	p := newPlane(t, HubOptions{})
	a, err := New(Config{Server: p.url(), Token: "wrong", WorkDir: t.TempDir(), Node: NodeInfo{Name: "n1"},
		BackoffMin: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	a.Run(ctx)
	if n := p.hub.Nodes(); len(n) != 0 {
		t.Errorf("registered with a wrong token: %+v", n)
	}
}

func TestHubAnswersBadRequestsWithTheErrorShape(t *testing.T) {
	h := NewHub(HubOptions{PollWait: 10 * time.Millisecond})
	resp := h.register(RegisterRequest{Node: NodeInfo{Name: "n1"}, Instance: "i"})
	handler := h.Handler()
	for name, tc := range map[string]struct {
		method, path, body string
		status             int
		want               string
	}{
		"malformed JSON":         {"POST", PathRegister, `{"node":`, 400, "invalid JSON"},
		"unknown field":          {"POST", PathRegister, `{"node":{"name":"n1"},"instance":"i","x":1}`, 400, `unknown field \"x\"`},
		"bad node name":          {"POST", PathRegister, `{"node":{"name":"a b"},"instance":"i"}`, 400, "node: name"},
		"wrong type":             {"POST", PathRegister, `{"node":{"name":"n1","gpus":[{"index":"0"}]},"instance":"i"}`, 400, "field node.gpus.index"},
		"oversized body":         {"POST", PathRegister, `{"node":{"name":"` + strings.Repeat("a", maxBodyBytes) + `"}}`, 413, "too_large"},
		"event without its type": {"POST", "/v1/agents/n1/events", `{"instance":"i","events":[{"seq":1}]}`, 400, "events[0]: type"},
		"bad after":              {"GET", "/v1/agents/n1/commands?after=-1&session=" + resp.Session, "", 400, "after"},
		"stale session":          {"GET", "/v1/agents/n1/commands?after=0&session=old", "", 409, "session_expired"},
		"unregistered node":      {"GET", "/v1/agents/n2/commands?after=0&session=x", "", 409, "not registered"},
		"a poll that finds none": {"GET", "/v1/agents/n1/commands?after=0&wait_s=0.01&session=" + resp.Session, "", 200, `"commands":[]`},
		"no such route":          {"GET", "/v1/agents/n1/other", "", 404, "no such agent route"},
	} {
		t.Run(name, func(t *testing.T) {
			w := httptest.NewRecorder()
			handler.ServeHTTP(w, httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body)))
			if w.Code != tc.status || !strings.Contains(w.Body.String(), tc.want) {
				t.Errorf("%d %s; want %d with %q", w.Code, truncate(w.Body.String(), 200), tc.status, tc.want)
			}
			if w.Code >= 400 && !strings.HasPrefix(w.Body.String(), `{"error":{"code":`) {
				t.Errorf("error body %s; want the API's error shape", truncate(w.Body.String(), 200))
			}
			if ct := w.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
		})
	}
}

func TestATokenBoundToANodeActsForThatNodeOnly(t *testing.T) {
	// The API puts the token's node in the request; here a header stands in.
	h := NewHub(HubOptions{PollWait: 10 * time.Millisecond, BoundNode: func(r *http.Request) (string, bool) {
		n := r.Header.Get("X-Test-Node")
		return n, n != ""
	}})
	handler := h.Handler()
	send := func(method, path, body, node string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(method, path, strings.NewReader(body))
		if node != "" {
			r.Header.Set("X-Test-Node", node)
		}
		handler.ServeHTTP(w, r)
		return w
	}
	const n1 = `{"node":{"name":"n1"},"instance":"i"}`
	if w := send("POST", PathRegister, n1, "n2"); w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), `bound to node \"n2\"`) {
		t.Fatalf("n2's token registering n1: %d %s; want 403 naming the token's node", w.Code, w.Body.String())
	}
	if _, ok := h.nodes["n1"]; ok {
		t.Fatal("a refused registration registered the node")
	}
	w := send("POST", PathRegister, n1, "n1")
	if w.Code != http.StatusOK {
		t.Fatalf("n1's token registering n1: %d %s", w.Code, w.Body.String())
	}
	var reg RegisterResponse
	if err := json.Unmarshal(w.Body.Bytes(), &reg); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ method, path, body string }{
		{"GET", "/v1/agents/n1/commands?after=0&wait_s=0&session=" + reg.Session, ""},
		{"POST", "/v1/agents/n1/events", `{"instance":"i","events":[]}`},
	} {
		if w := send(tc.method, tc.path, tc.body, "n2"); w.Code != http.StatusForbidden {
			t.Errorf("%s %s with n2's token: %d; want 403", tc.method, tc.path, w.Code)
		}
		if w := send(tc.method, tc.path, tc.body, "n1"); w.Code != http.StatusOK {
			t.Errorf("%s %s with n1's token: %d %s", tc.method, tc.path, w.Code, w.Body.String())
		}
		if w := send(tc.method, tc.path, tc.body, ""); w.Code != http.StatusOK {
			t.Errorf("%s %s with a token for every node: %d %s", tc.method, tc.path, w.Code, w.Body.String())
		}
	}
}
