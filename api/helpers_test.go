package api_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/api"
	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/cluster/clustertest"
	"github.com/prescient-sched/prescient/control/controltest"
	"github.com/prescient-sched/prescient/service"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// The tokens of the test server: two tenants, every role.
const (
	tokViewerA    = "viewer-of-tenant-a-0001"
	tokSubmitterA = "submitter-of-tenant-a-01"
	tokViewerB    = "viewer-of-tenant-b-0001"
	tokSubmitterB = "submitter-of-tenant-b-01"
	tokAdmin      = "admin-of-tenant-ops-0001"
	tokAgent      = "agent-for-every-node-001"
)

func testTokens() api.Tokens {
	return api.Tokens{List: []api.Token{
		api.NewToken(tokViewerA, "a", api.RoleViewer),
		api.NewToken(tokSubmitterA, "a", api.RoleSubmitter),
		api.NewToken(tokViewerB, "b", api.RoleViewer),
		api.NewToken(tokSubmitterB, "b", api.RoleSubmitter),
		api.NewToken(tokAdmin, "ops", api.RoleAdmin),
		api.NewToken(tokAgent, "", api.RoleAgent),
	}}
}

// env is a server over a fake control plane with a fixed clock.
type env struct {
	t    testing.TB
	fake *controltest.Fake
	srv  *api.Server
	now  time.Time
}

type envOption func(*api.Config)

func newEnv(t testing.TB, opts ...envOption) *env {
	t.Helper()
	e := &env{t: t, now: clustertest.Epoch}
	e.fake = controltest.New(
		controltest.WithClock(func() time.Time { return e.now }),
		controltest.WithNodes(clustertest.Node("n1").GPUs(8, "A100-SXM4-80GB").Obj()),
		controltest.WithModels(
			service.ModelVersion{Target: "duration", Version: 1, CreatedAt: clustertest.Epoch, Selected: "forest", Metrics: map[string]map[string]float64{"test": {"mae_s": 610}}},
			service.ModelVersion{Target: "duration", Version: 2, Current: true, CreatedAt: clustertest.Epoch, Selected: "ensemble", Metrics: map[string]map[string]float64{"test": {"mae_s": 540}}},
		),
	)
	cfg := api.Config{
		Service: e.fake,
		Tokens:  testTokens(),
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		Version: "test",
	}
	for _, o := range opts {
		o(&cfg)
	}
	e.srv = api.New(cfg)
	return e
}

// do sends a request with the token ("" for none) and a body ("" for none).
func (e *env) do(method, path, token, body string) *httptest.ResponseRecorder {
	e.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, path, r)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	e.srv.Handler().ServeHTTP(rec, req)
	return rec
}

// submit submits a one-GPU job with the ID as the token's tenant.
func (e *env) submit(token, id string) service.JobStatus {
	e.t.Helper()
	rec := e.do(http.MethodPost, "/v1/jobs", token, `{"id":"`+id+`","gpus":1,"labels":{"experiment":"e1"}}`)
	if rec.Code != http.StatusCreated {
		e.t.Fatalf("submit %s: %d %s", id, rec.Code, rec.Body)
	}
	var st service.JobStatus
	decode(e.t, rec, &st)
	return st
}

func decode(t testing.TB, rec *httptest.ResponseRecorder, v any) {
	t.Helper()
	if err := json.Unmarshal(rec.Body.Bytes(), v); err != nil {
		t.Fatalf("response %d is not JSON of %T: %v\n%s", rec.Code, v, err, rec.Body)
	}
}

// errorOf decodes an error body and fails when it is not one.
func errorOf(t testing.TB, rec *httptest.ResponseRecorder) api.ErrorDetail {
	t.Helper()
	var body api.ErrorBody
	decode(t, rec, &body)
	if body.Error.Code == "" || body.Error.Message == "" {
		t.Fatalf("status %d: not an error body: %s", rec.Code, rec.Body)
	}
	return body.Error
}

// golden compares got with testdata/name, or rewrites it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Indent(&buf, got, "", "  "); err != nil {
		t.Fatalf("%s: not JSON: %v\n%s", name, err, got)
	}
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./api -update to write it)", err)
	}
	if !bytes.Equal(bytes.TrimSpace(want), bytes.TrimSpace(buf.Bytes())) {
		t.Fatalf("%s differs from the golden file:\ngot:\n%s\nwant:\n%s", name, buf.Bytes(), want)
	}
}

func specOf(tenant string, gpus int) cluster.JobSpec {
	return cluster.JobSpec{Tenant: tenant, Tier: cluster.TierStandard, GPUs: gpus, GPUMilli: cluster.MilliGPU}
}
