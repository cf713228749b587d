package main

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/api"
)

// A live serve reads its tokens file again: a token struck from the file
// is refused and one added is taken, without a restart; a broken edit
// leaves the tokens in force.
func TestServeReadsTheTokensFileAgain(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.yaml")
	writeTokens := func(body string) {
		t.Helper()
		if err := os.WriteFile(tokens, []byte("tokens:\n"+body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeTokens("  - {name: old, token: old-admin-token-0123456789, tenant: ops, role: admin}\n")
	url := startServe(t, "--db", filepath.Join(dir, "p.db"), "--tokens", tokens, "--tokens-reload", "100ms",
		"--backend", "sim", "--fleet", "uniform:1x8:A100-SXM4-80GB")
	old := &api.Client{Server: url, Token: "old-admin-token-0123456789"}
	added := &api.Client{Server: url, Token: "new-admin-token-0123456789"}
	// status is the HTTP status a client's call gets: 200, or its error's.
	status := func(c *api.Client) int {
		t.Helper()
		_, err := c.Tenants(context.Background())
		var apiErr *api.Error
		switch {
		case err == nil:
			return http.StatusOK
		case errors.As(err, &apiErr):
			return apiErr.Status
		}
		t.Fatal(err)
		return 0
	}
	// becomes waits until the old and the added token get these statuses.
	becomes := func(what string, oldWant, addedWant int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for status(old) != oldWant || status(added) != addedWant {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the old token gets %d, the added one %d; want %d and %d", what, status(old), status(added), oldWant, addedWant)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	becomes("at start", http.StatusOK, http.StatusUnauthorized)

	writeTokens("  - {name: new, token: new-admin-token-0123456789, tenant: ops, role: admin}\n")
	becomes("the old token struck off, a new one added", http.StatusUnauthorized, http.StatusOK)

	writeTokens("  - {name: new, token: short, tenant: ops, role: admin}\n") // too short a token: refused
	time.Sleep(500 * time.Millisecond)                                       // five periods
	becomes("after a broken edit", http.StatusUnauthorized, http.StatusOK)
}
