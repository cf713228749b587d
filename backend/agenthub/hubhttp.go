package agenthub

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/prescient-sched/prescient/agent/protocol"
)

// Handler serves the agent routes:
//
//	POST /v1/agents/register              RegisterRequest → RegisterResponse
//	GET  /v1/agents/{node}/commands       ?session=&after=SEQ&wait_s=S → CommandsResponse
//	POST /v1/agents/{node}/events         EventsRequest → EventsResponse
//	POST /v1/agents/{node}/logs           LogReply → LogReplyResponse
//
// A poll returns the node's commands numbered above after (acknowledging
// those up to it) as soon as there are any, or an empty list after wait_s
// (at most the hub's PollWait); log commands go only to agents whose polls
// say can=log. A poll with a stale session is answered 409
// session_expired, and the agent registers again. Errors are
// {"error": {"code", "message"}}. Authentication (an agent token) is the
// API's, in front of this handler.
func (h *Hub) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+protocol.PathRegister, h.serveRegister)
	mux.HandleFunc("GET /v1/agents/{node}/commands", h.serveCommands)
	mux.HandleFunc("POST /v1/agents/{node}/events", h.serveEvents)
	mux.HandleFunc("POST /v1/agents/{node}/logs", h.serveLogs)
	mux.HandleFunc("/v1/agents/", func(w http.ResponseWriter, r *http.Request) {
		protocol.WriteError(w, http.StatusNotFound, "not_found", fmt.Sprintf("%s %s: no such agent route", r.Method, r.URL.Path))
	})
	return mux
}

func (h *Hub) serveRegister(w http.ResponseWriter, r *http.Request) {
	b, ok := readBody(w, r)
	if !ok {
		return
	}
	req, err := protocol.DecodeRegister(b)
	if err != nil {
		protocol.WriteError(w, http.StatusBadRequest, "invalid_request", "register: "+err.Error())
		return
	}
	if !h.mayActFor(w, r, "register", req.Node.Name) {
		return
	}
	protocol.WriteJSON(w, http.StatusOK, h.register(req))
}

func (h *Hub) serveEvents(w http.ResponseWriter, r *http.Request) {
	node := r.PathValue("node")
	if err := protocol.CheckName("node", node); err != nil {
		protocol.WriteError(w, http.StatusBadRequest, "invalid_request", "events: path: "+err.Error())
		return
	}
	if !h.mayActFor(w, r, "events", node) {
		return
	}
	b, ok := readBody(w, r)
	if !ok {
		return
	}
	req, err := protocol.DecodeEvents(b)
	if err != nil {
		protocol.WriteError(w, http.StatusBadRequest, "invalid_request", "events: "+err.Error())
		return
	}
	h.mu.Lock()
	n := h.eventsLocked(node, req.Instance, req.Events)
	h.mu.Unlock()
	protocol.WriteJSON(w, http.StatusOK, protocol.EventsResponse{Accepted: n})
}

func (h *Hub) serveLogs(w http.ResponseWriter, r *http.Request) {
	node := r.PathValue("node")
	if err := protocol.CheckName("node", node); err != nil {
		protocol.WriteError(w, http.StatusBadRequest, "invalid_request", "logs: path: "+err.Error())
		return
	}
	if !h.mayActFor(w, r, "logs", node) {
		return
	}
	b, ok := readBody(w, r)
	if !ok {
		return
	}
	reply, err := protocol.DecodeLogReply(b)
	if err != nil {
		protocol.WriteError(w, http.StatusBadRequest, "invalid_request", "logs: "+err.Error())
		return
	}
	protocol.WriteJSON(w, http.StatusOK, protocol.LogReplyResponse{Accepted: h.logReply(node, reply)})
}

func (h *Hub) serveCommands(w http.ResponseWriter, r *http.Request) {
	node := r.PathValue("node")
	if !h.mayActFor(w, r, "commands", node) {
		return
	}
	q := r.URL.Query()
	after, err := strconv.ParseInt(q.Get("after"), 10, 64)
	if err != nil || after < 0 {
		protocol.WriteError(w, http.StatusBadRequest, "invalid_request", fmt.Sprintf("commands: after %q: want a non-negative integer", q.Get("after")))
		return
	}
	wait := h.opts.PollWait
	if s := q.Get("wait_s"); s != "" {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || f < 0 || f != f {
			protocol.WriteError(w, http.StatusBadRequest, "invalid_request", fmt.Sprintf("commands: wait_s %q: want a non-negative number of seconds", s))
			return
		}
		wait = min(wait, time.Duration(f*float64(time.Second)))
	}

	// 1. Check the session, acknowledge what the agent has done, note the
	// poll.
	h.mu.Lock()
	n := h.nodes[node]
	switch {
	case n == nil:
		h.mu.Unlock()
		protocol.WriteError(w, http.StatusConflict, "session_expired", fmt.Sprintf("commands: node %q is not registered; register first", node))
		return
	case n.session != q.Get("session"):
		h.mu.Unlock()
		protocol.WriteError(w, http.StatusConflict, "session_expired", fmt.Sprintf("commands: session of node %q expired; register again", node))
		return
	}
	i := 0
	for i < len(n.cmds) && n.cmds[i].Seq <= after {
		i++
	}
	n.cmds = n.cmds[i:]
	n.polls++
	n.lastSeen, n.connected = h.opts.Clock(), true
	n.canLog = slices.Contains(q["can"], protocol.CanLog)
	wake, pending := n.wake, len(n.cmds) > 0
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		n.polls--
		n.lastSeen = h.opts.Clock()
		h.mu.Unlock()
	}()

	// 2. Wait for a command, the wait bound, or the agent going away.
	if !pending && wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-wake:
		case <-t.C:
		case <-r.Context().Done():
		}
		t.Stop()
	}
	h.mu.Lock()
	resp := protocol.CommandsResponse{Commands: append([]protocol.Command{}, n.cmds...)}
	if n.session != q.Get("session") {
		resp.Commands = nil // registered again meanwhile: the new session's poll takes them
	}
	h.mu.Unlock()
	protocol.WriteJSON(w, http.StatusOK, resp)
}

func readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, protocol.MaxBodyBytes))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		protocol.WriteError(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("body over %d bytes", mbe.Limit))
		return nil, false
	case err != nil:
		protocol.WriteError(w, http.StatusBadRequest, "invalid_request", "reading the body: "+err.Error())
		return nil, false
	}
	return b, true
}

// mayActFor answers 403 and false when the request's credentials are
// bound to another node than the one it acts for (HubOptions.BoundNode).
func (h *Hub) mayActFor(w http.ResponseWriter, r *http.Request, what, node string) bool {
	if h.opts.BoundNode == nil {
		return true
	}
	bound, ok := h.opts.BoundNode(r)
	if !ok || bound == node {
		return true
	}
	h.log.Warn("agent request for another node than its token's refused", "request", what, "node", node, "token_node", bound)
	protocol.WriteError(w, http.StatusForbidden, "forbidden", fmt.Sprintf("%s: this token is bound to node %q, not %q", what, bound, node))
	return false
}
