package api

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// Role is what a token may do.
type Role string

// The roles, from least to most trusted for /v1; agent is apart: it may
// only use the agent routes.
const (
	RoleViewer    Role = "viewer"    // reads its tenant's jobs, the fleet, forecasts, stats, models, the mode
	RoleSubmitter Role = "submitter" // a viewer that also submits and cancels its tenant's jobs
	RoleAdmin     Role = "admin"     // everything, for every tenant: modes, retraining, rollback
	RoleAgent     Role = "agent"     // a node agent: /v1/agents/ only
)

// Roles lists every role.
func Roles() []Role { return []Role{RoleViewer, RoleSubmitter, RoleAdmin, RoleAgent} }

// Valid reports whether r is one of the roles.
func (r Role) Valid() bool { return slices.Contains(Roles(), r) }

// MinTokenBytes is the shortest plain token a tokens file may hold: shorter
// ones can be guessed.
const MinTokenBytes = 16

// Token is one bearer token: its SHA-256, the tenant it acts for and its
// role. The plain token is never kept.
type Token struct {
	// Name says whose token it is, for logs (optional).
	Name   string
	SHA256 [sha256.Size]byte
	Tenant string
	Role   Role
	// Node binds an agent token to one node: the agent hub takes it only
	// for that node's registration, polls and events. Empty: any node.
	Node string
}

// Principal is who a request acts for: the token's name, tenant and role,
// and for an agent token bound to a node, that node.
type Principal struct {
	Name   string
	Tenant string
	Role   Role
	Node   string
}

// Tokens are the bearer tokens the API accepts.
type Tokens struct {
	List []Token
}

// NewToken returns the Token of a plain token.
func NewToken(plain, tenant string, role Role) Token {
	return Token{SHA256: sha256.Sum256([]byte(plain)), Tenant: tenant, Role: role}
}

// Validate checks that every token has a valid role, a tenant (except
// agent tokens, which act for no tenant) and that no token is listed twice.
func (ts Tokens) Validate() error {
	var errs []error
	seen := map[[sha256.Size]byte]int{}
	for i, t := range ts.List {
		if !t.Role.Valid() {
			errs = append(errs, fmt.Errorf("tokens[%d].role: %q is not one of viewer, submitter, admin, agent", i, t.Role))
		}
		if t.Tenant == "" && t.Role != RoleAgent {
			errs = append(errs, fmt.Errorf("tokens[%d].tenant: empty (every role but agent acts for a tenant)", i))
		}
		if t.Node != "" && t.Role != RoleAgent {
			errs = append(errs, fmt.Errorf("tokens[%d].node: only an agent token is bound to a node", i))
		}
		if j, ok := seen[t.SHA256]; ok {
			errs = append(errs, fmt.Errorf("tokens[%d]: the same token as tokens[%d]", i, j))
		}
		seen[t.SHA256] = i
	}
	return errors.Join(errs...)
}

// Lookup finds the token's principal. It hashes the presented token and
// compares the hash with every listed one in constant time, so neither the
// comparison nor the number of comparisons depends on which token matched.
func (ts Tokens) Lookup(plain string) (Principal, bool) {
	sum := sha256.Sum256([]byte(plain))
	found := -1
	for i := range ts.List {
		if subtle.ConstantTimeCompare(sum[:], ts.List[i].SHA256[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return Principal{}, false
	}
	t := ts.List[found]
	return Principal{Name: t.Name, Tenant: t.Tenant, Role: t.Role, Node: t.Node}, true
}

// GenerateToken returns a new random token: 32 bytes from crypto/rand,
// hex-encoded (for the demo's admin token, or a tokens file).
func GenerateToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

// LoadTokens reads a tokens file (see ParseTokens).
func LoadTokens(path string) (Tokens, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Tokens{}, fmt.Errorf("tokens file: %w", err)
	}
	return ParseTokens(data, path)
}

// ParseTokens parses a tokens file: YAML with one key, tokens, a list of
// entries that each give either the plain token or its SHA-256 in hex:
//
//	tokens:
//	  - {name: ci, token: "a-long-random-string", tenant: ml, role: submitter}
//	  - {token_sha256: "9f86d0...", tenant: ops, role: admin}
//	  - {token: "agent-token-for-all-nodes", role: agent}
//	  - {token: "agent-token-of-gpu-07-only", role: agent, node: gpu-07}
//
// Errors name the file, the line and the field. The result is validated.
func ParseTokens(data []byte, path string) (Tokens, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return Tokens{}, fmt.Errorf("tokens file %s: %w", path, err)
	}
	if len(doc.Content) == 0 {
		return Tokens{}, fmt.Errorf("tokens file %s: empty (want a list under the key tokens)", path)
	}
	top := doc.Content[0]
	if top.Kind != yaml.MappingNode {
		return Tokens{}, fmt.Errorf("tokens file %s:%d: the top level must be a mapping with the key tokens", path, top.Line)
	}
	var list *yaml.Node
	for i := 0; i+1 < len(top.Content); i += 2 {
		k, v := top.Content[i], top.Content[i+1]
		if k.Value != "tokens" {
			return Tokens{}, fmt.Errorf("tokens file %s:%d: unknown key %q (want tokens)", path, k.Line, k.Value)
		}
		list = v
	}
	if list == nil || list.Kind != yaml.SequenceNode {
		line := top.Line
		if list != nil {
			line = list.Line
		}
		return Tokens{}, fmt.Errorf("tokens file %s:%d: tokens must be a list", path, line)
	}
	var ts Tokens
	var errs []error
	for i, n := range list.Content {
		t, err := parseToken(n)
		if err != nil {
			errs = append(errs, fmt.Errorf("tokens file %s:%d: tokens[%d]%w", path, n.Line, i, err))
			continue
		}
		ts.List = append(ts.List, t)
	}
	if err := errors.Join(errs...); err != nil {
		return Tokens{}, err
	}
	if err := ts.Validate(); err != nil {
		return Tokens{}, fmt.Errorf("tokens file %s: %w", path, err)
	}
	return ts, nil
}

// fieldError is an error about one field of an entry; its text starts
// with ".field: " so that it follows the entry's index.
type fieldError struct {
	field string
	err   error
}

func (e fieldError) Error() string { return "." + e.field + ": " + e.err.Error() }
func (e fieldError) Unwrap() error { return e.err }

func parseToken(n *yaml.Node) (Token, error) {
	if n.Kind != yaml.MappingNode {
		return Token{}, fmt.Errorf(": want a mapping with token or token_sha256, tenant and role")
	}
	var t Token
	var plain, hashed string
	var hasPlain, hasHash bool
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if v.Kind != yaml.ScalarNode {
			return Token{}, fieldError{k.Value, fmt.Errorf("line %d: want a plain value", v.Line)}
		}
		switch k.Value {
		case "name":
			t.Name = v.Value
		case "token":
			plain, hasPlain = v.Value, true
		case "token_sha256":
			hashed, hasHash = v.Value, true
		case "tenant":
			t.Tenant = v.Value
		case "role":
			t.Role = Role(strings.ToLower(v.Value))
		case "node":
			t.Node = v.Value
		default:
			return Token{}, fieldError{k.Value, fmt.Errorf("line %d: unknown field (want name, token, token_sha256, tenant, role, node)", k.Line)}
		}
	}
	switch {
	case hasPlain == hasHash:
		return Token{}, fmt.Errorf(": give exactly one of token and token_sha256")
	case hasPlain && len(plain) < MinTokenBytes:
		return Token{}, fieldError{"token", fmt.Errorf("%d bytes; a token needs at least %d", len(plain), MinTokenBytes)}
	case hasPlain:
		t.SHA256 = sha256.Sum256([]byte(plain))
	default:
		b, err := hex.DecodeString(hashed)
		if err != nil || len(b) != sha256.Size {
			return Token{}, fieldError{"token_sha256", fmt.Errorf("want %d hex digits", 2*sha256.Size)}
		}
		copy(t.SHA256[:], b)
	}
	if !t.Role.Valid() {
		return Token{}, fieldError{"role", fmt.Errorf("%q is not one of viewer, submitter, admin, agent", t.Role)}
	}
	if t.Tenant == "" && t.Role != RoleAgent {
		return Token{}, fieldError{"tenant", errors.New("empty (every role but agent acts for a tenant)")}
	}
	if t.Node != "" && t.Role != RoleAgent {
		return Token{}, fieldError{"node", fmt.Errorf("%q: only an agent token is bound to a node", t.Node)}
	}
	return t, nil
}
