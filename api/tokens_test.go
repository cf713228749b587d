package api_test

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prescient-sched/prescient/api"
)

func TestParseTokens(t *testing.T) {
	sum := sha256.Sum256([]byte("hashed-token-of-the-admin"))
	file := `tokens:
  - {name: ci, token: "submitter-token-0001", tenant: ml, role: submitter}
  - token_sha256: "` + hex.EncodeToString(sum[:]) + `"
    tenant: ops
    role: Admin
  - {token: "agent-token-for-nodes", role: agent}
  - {token: "agent-token-of-gpu-07", role: agent, node: gpu-07}
`
	ts, err := api.ParseTokens([]byte(file), "tokens.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		token  string
		want   api.Principal
		wantOK bool
	}{
		{"submitter-token-0001", api.Principal{Name: "ci", Tenant: "ml", Role: api.RoleSubmitter}, true},
		{"hashed-token-of-the-admin", api.Principal{Tenant: "ops", Role: api.RoleAdmin}, true},
		{"agent-token-for-nodes", api.Principal{Role: api.RoleAgent}, true},
		{"agent-token-of-gpu-07", api.Principal{Role: api.RoleAgent, Node: "gpu-07"}, true},
		{"submitter-token-0002", api.Principal{}, false},
		{"", api.Principal{}, false},
	}
	for _, tt := range tests {
		got, ok := ts.Lookup(tt.token)
		if ok != tt.wantOK || got != tt.want {
			t.Errorf("Lookup(%q) = %+v, %v; want %+v, %v", tt.token, got, ok, tt.want, tt.wantOK)
		}
	}
}

func TestParseTokensErrorsNameFileLineAndField(t *testing.T) {
	tests := []struct {
		name, file string
		want       []string
	}{
		{"empty file", ``, []string{"tokens.yaml", "empty"}},
		{"not a mapping", `- a`, []string{"tokens.yaml:1", "mapping"}},
		{"unknown top-level key", "tokenz: []", []string{"tokens.yaml:1", `"tokenz"`}},
		{"tokens not a list", "tokens: {}", []string{"tokens.yaml:1", "list"}},
		{"short token", "tokens:\n  - {token: short, tenant: a, role: viewer}", []string{"tokens.yaml:2", "tokens[0].token", "at least 16"}},
		{"both token forms", "tokens:\n  - {token: aaaaaaaaaaaaaaaaaaaa, token_sha256: ab, tenant: a, role: viewer}", []string{"tokens[0]", "exactly one"}},
		{"bad hash", "tokens:\n  - {token_sha256: xyz, tenant: a, role: viewer}", []string{"tokens[0].token_sha256", "64 hex digits"}},
		{"unknown role", "tokens:\n  - {token: aaaaaaaaaaaaaaaaaaaa, tenant: a, role: root}", []string{"tokens[0].role", `"root"`}},
		{"no tenant", "tokens:\n  - {token: aaaaaaaaaaaaaaaaaaaa, role: viewer}", []string{"tokens[0].tenant", "empty"}},
		{"unknown field", "tokens:\n  - {token: aaaaaaaaaaaaaaaaaaaa, tenant: a, role: viewer, scope: all}", []string{"tokens[0].scope", "unknown field"}},
		{"node on a user's token", "tokens:\n  - {token: aaaaaaaaaaaaaaaaaaaa, tenant: a, role: admin, node: gpu-01}", []string{"tokens.yaml:2", "tokens[0].node", "only an agent token"}},
		{"duplicate", "tokens:\n  - {token: aaaaaaaaaaaaaaaaaaaa, tenant: a, role: viewer}\n  - {token: aaaaaaaaaaaaaaaaaaaa, tenant: b, role: admin}", []string{"tokens[1]", "tokens[0]"}},
		{"second entry of three", "tokens:\n  - {token: aaaaaaaaaaaaaaaaaaaa, tenant: a, role: viewer}\n  - {token: bbbbbbbbbbbbbbbbbbbb, tenant: a, role: boss}\n", []string{"tokens.yaml:3", "tokens[1].role"}},
		{"YAML syntax", "tokens: [", []string{"tokens.yaml"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := api.ParseTokens([]byte(tt.file), "tokens.yaml")
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestLoadTokens(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.yaml")
	if err := os.WriteFile(path, []byte("tokens:\n  - {token: aaaaaaaaaaaaaaaaaaaa, tenant: a, role: viewer}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ts, err := api.LoadTokens(path)
	if err != nil || len(ts.List) != 1 {
		t.Fatalf("LoadTokens = %+v, %v", ts, err)
	}
	if _, err := api.LoadTokens(filepath.Join(t.TempDir(), "missing.yaml")); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Fatalf("a missing file: %v", err)
	}
}

func FuzzParseTokens(f *testing.F) {
	for _, s := range []string{
		"tokens:\n  - {token: aaaaaaaaaaaaaaaaaaaa, tenant: a, role: viewer}\n",
		"tokens:\n  - {token_sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08, tenant: ops, role: admin}\n",
		"tokens:\n  - {token: aaaaaaaaaaaaaaaaaaaa, role: agent}\n  - {token: bbbbbbbbbbbbbbbbbbbb, tenant: b, role: submitter, name: ci}\n",
		"tokens: []", "tokens:", "", "- x", "tokens: [{token: [1]}]", "tokens: [&a {token: *a}]",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data string) {
		ts, err := api.ParseTokens([]byte(data), "tokens.yaml")
		if err != nil {
			if !strings.Contains(err.Error(), "tokens.yaml") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		if err := ts.Validate(); err != nil {
			t.Fatalf("ParseTokens returned tokens that do not validate: %v", err)
		}
		for _, tok := range ts.List {
			if !tok.Role.Valid() {
				t.Fatalf("token with role %q", tok.Role)
			}
		}
	})
}

func TestGenerateToken(t *testing.T) {
	a, b := api.GenerateToken(), api.GenerateToken()
	if len(a) != 64 || a == b {
		t.Fatalf("GenerateToken: %q, %q; want two different 64-digit tokens", a, b)
	}
	ts := api.Tokens{List: []api.Token{api.NewToken(a, "ops", api.RoleAdmin)}}
	if p, ok := ts.Lookup(a); !ok || p.Role != api.RoleAdmin {
		t.Fatal("a generated token does not look up")
	}
}
