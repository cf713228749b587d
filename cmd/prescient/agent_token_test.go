package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prescient-sched/prescient/agent/protocol"
	"github.com/prescient-sched/prescient/api"
	"github.com/prescient-sched/prescient/backend/agenthub"
)

// An agent token bound to a node (the tokens file's node) registers that
// node only, through the API's auth in front of the hub as serve wires it.
func TestServeBindsAgentTokensToTheirNode(t *testing.T) {
	tokens, err := api.ParseTokens([]byte(`tokens:
  - {token: "agent-token-of-gpu-01", role: agent, node: gpu-01}
  - {token: "agent-token-of-every-node", role: agent}
`), "tokens.yaml")
	if err != nil {
		t.Fatal(err)
	}
	hub := agenthub.NewHub(agenthub.HubOptions{BoundNode: tokenNode})
	srv := httptest.NewServer(api.New(api.Config{Tokens: tokens, Agents: hub.Handler()}).Handler())
	defer srv.Close()
	register := func(token, node string) int {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+protocol.PathRegister,
			strings.NewReader(`{"node":{"name":"`+node+`"},"instance":"i"}`))
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	for _, tc := range []struct {
		token, node string
		want        int
	}{
		{"agent-token-of-gpu-01", "gpu-02", http.StatusForbidden},
		{"agent-token-of-gpu-01", "gpu-01", http.StatusOK},
		{"agent-token-of-every-node", "gpu-02", http.StatusOK},
	} {
		if got := register(tc.token, tc.node); got != tc.want {
			t.Errorf("%s registering %s: HTTP %d, want %d", tc.token, tc.node, got, tc.want)
		}
	}
}
