package agenthub

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/agent/protocol"
	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
)

func TestHubAnswersBadRequestsWithTheErrorShape(t *testing.T) {
	h := NewHub(HubOptions{PollWait: 10 * time.Millisecond})
	resp := h.register(protocol.RegisterRequest{Node: protocol.NodeInfo{Name: "n1"}, Instance: "i"})
	handler := h.Handler()
	for name, tc := range map[string]struct {
		method, path, body string
		status             int
		want               string
	}{
		"malformed JSON":         {"POST", protocol.PathRegister, `{"node":`, 400, "invalid JSON"},
		"unknown field":          {"POST", protocol.PathRegister, `{"node":{"name":"n1"},"instance":"i","x":1}`, 400, `unknown field \"x\"`},
		"bad node name":          {"POST", protocol.PathRegister, `{"node":{"name":"a b"},"instance":"i"}`, 400, "node: name"},
		"wrong type":             {"POST", protocol.PathRegister, `{"node":{"name":"n1","gpus":[{"index":"0"}]},"instance":"i"}`, 400, "field node.gpus.index"},
		"oversized body":         {"POST", protocol.PathRegister, `{"node":{"name":"` + strings.Repeat("a", protocol.MaxBodyBytes) + `"}}`, 413, "too_large"},
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
				t.Errorf("%d %s; want %d with %q", w.Code, protocol.Truncate(w.Body.String(), 200), tc.status, tc.want)
			}
			if w.Code >= 400 && !strings.HasPrefix(w.Body.String(), `{"error":{"code":`) {
				t.Errorf("error body %s; want the API's error shape", protocol.Truncate(w.Body.String(), 200))
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
	if w := send("POST", protocol.PathRegister, n1, "n2"); w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), `bound to node \"n2\"`) {
		t.Fatalf("n2's token registering n1: %d %s; want 403 naming the token's node", w.Code, w.Body.String())
	}
	if _, ok := h.nodes["n1"]; ok {
		t.Fatal("a refused registration registered the node")
	}
	w := send("POST", protocol.PathRegister, n1, "n1")
	if w.Code != http.StatusOK {
		t.Fatalf("n1's token registering n1: %d %s", w.Code, w.Body.String())
	}
	var reg protocol.RegisterResponse
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

func TestHubDropsEventsItHasSeen(t *testing.T) {
	h := NewHub(HubOptions{})
	ev := protocol.Event{Seq: 1, Type: protocol.EventStarted, Time: time.Now(), Job: "j", Attempt: 1, WorldSize: 1}
	h.register(protocol.RegisterRequest{Node: protocol.NodeInfo{Name: "n1"}, Instance: "a"})
	h.mu.Lock()
	first := h.eventsLocked("n1", "a", []protocol.Event{ev})
	again := h.eventsLocked("n1", "a", []protocol.Event{ev})
	restarted := h.eventsLocked("n1", "b", []protocol.Event{ev}) // a new agent instance numbers afresh
	h.mu.Unlock()
	if first != 1 || again != 0 || restarted != 1 {
		t.Errorf("accepted %d, %d, %d; want 1, 0 (a retried post), 1 (a new instance)", first, again, restarted)
	}
}

func TestAnAgentSpeaksOnlyForItsOwnRanks(t *testing.T) {
	h := NewHub(HubOptions{})
	for _, n := range []string{"n1", "n2", "n3"} {
		h.register(protocol.RegisterRequest{Node: protocol.NodeInfo{Name: n}, Instance: n})
	}
	a := executor.Assignment{Job: cluster.Job{ID: "j"}, Attempt: 1, Command: []string{"true"},
		Allocations: []cluster.Allocation{{GPU: cluster.GPURef{Node: "n1"}, Milli: 1000}, {GPU: cluster.GPURef{Node: "n2"}, Milli: 1000}}}
	if err := h.Start(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	ev := func(seq int64, typ protocol.EventType, rank, code int) protocol.Event {
		return protocol.Event{Seq: seq, Type: typ, Time: time.Now(), Job: "j", Attempt: 1, Rank: rank, WorldSize: 2, ExitCode: code}
	}
	h.mu.Lock()
	other := h.eventsLocked("n3", "n3", []protocol.Event{ev(1, protocol.EventExited, 1, 1)})
	wrongRank := h.eventsLocked("n2", "n2", []protocol.Event{ev(1, protocol.EventExited, 0, 1)})
	own := h.eventsLocked("n2", "n2", []protocol.Event{ev(2, protocol.EventStarted, 1, 0)})
	ended := h.jobs[attemptKey{"j", 1}].ended
	stops := len(h.nodes["n1"].cmds) - 1 // beyond its start
	h.mu.Unlock()
	if other != 0 || wrongRank != 0 || own != 1 || ended || stops != 0 {
		t.Errorf("accepted %d from another node, %d with another rank, %d of its own; ended %v, %d stops to n1; want 0, 0, 1, false, 0",
			other, wrongRank, own, ended, stops)
	}
	// A running list naming the attempt from another node joins nothing.
	h.register(protocol.RegisterRequest{Node: protocol.NodeInfo{Name: "n3"}, Instance: "n3b",
		Running: []protocol.RunningAttempt{{Job: "j", Attempt: 1, Rank: 0, WorldSize: 2}}})
	if _, ok := h.jobs[attemptKey{"j", 1}].ranks["n3"]; ok {
		t.Error("n3's running list made it a rank of an attempt placed on n1 and n2")
	}

	// After a restart the hub asks where the record places the attempt.
	h = NewHub(HubOptions{Placement: func(job string, attempt int) ([]string, bool) {
		return []string{"n1", "n2"}, job == "j" && attempt == 1
	}})
	h.mu.Lock()
	other = h.eventsLocked("n3", "n3", []protocol.Event{ev(1, protocol.EventExited, 0, 1)})
	own = h.eventsLocked("n1", "n1", []protocol.Event{ev(1, protocol.EventStarted, 0, 0)})
	h.mu.Unlock()
	if other != 0 || own != 1 {
		t.Errorf("after a restart: accepted %d from another node, %d from its own; want 0, 1", other, own)
	}
}

func TestStopAttemptLeavesTheNewerAttemptRunning(t *testing.T) {
	h := NewHub(HubOptions{})
	h.register(protocol.RegisterRequest{Node: protocol.NodeInfo{Name: "n1"}, Instance: "a",
		Running: []protocol.RunningAttempt{{Job: "j", Attempt: 1, Rank: 0, WorldSize: 1}}})
	h.register(protocol.RegisterRequest{Node: protocol.NodeInfo{Name: "n2"}, Instance: "b"})
	a := executor.Assignment{Job: cluster.Job{ID: "j"}, Attempt: 2, Command: []string{"true"},
		Allocations: []cluster.Allocation{{GPU: cluster.GPURef{Node: "n2"}, Milli: 1000}}}
	if err := h.Start(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	if err := h.StopAttempt(context.Background(), "j", 1, time.Second); err != nil {
		t.Fatal(err)
	}
	if c := h.nodes["n1"].cmds; len(c) != 1 || c[0].Type != protocol.CommandStop || c[0].Attempt != 1 {
		t.Errorf("n1's commands %+v; want one stop of attempt 1", c)
	}
	if c := h.nodes["n2"].cmds; len(c) != 1 || c[0].Type != protocol.CommandStart {
		t.Errorf("n2's commands %+v; want its start only", c)
	}
}
