package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prescient-sched/prescient/api"
)

func TestProbes(t *testing.T) {
	storeDown := errors.New("database is locked")
	tests := []struct {
		name       string
		path       string
		checkErr   error
		wantStatus int
		wantWord   string
	}{
		{name: "healthz answers while a dependency is down", path: "/healthz", checkErr: storeDown, wantStatus: 200, wantWord: "ok"},
		{name: "readyz is ready when every check passes", path: "/readyz", wantStatus: 200, wantWord: "ready"},
		{name: "readyz is 503 when a check fails", path: "/readyz", checkErr: storeDown, wantStatus: 503, wantWord: "not_ready"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := api.New(api.Config{Checks: []api.ReadyCheck{{Name: "store", Check: func(context.Context) error { return tt.checkErr }}}})
			rec := httptest.NewRecorder()
			srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tt.path, nil))
			if rec.Code != tt.wantStatus {
				t.Fatalf("GET %s = %d, want %d", tt.path, rec.Code, tt.wantStatus)
			}
			var body struct{ Status string }
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body.Status != tt.wantWord {
				t.Fatalf("GET %s body %s: status %q, want %q (%v)", tt.path, rec.Body, body.Status, tt.wantWord, err)
			}
		})
	}
}

func TestUnknownRouteIsJSONError(t *testing.T) {
	rec := httptest.NewRecorder()
	api.New(api.Config{}).Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/nope", nil))
	var body api.ErrorBody
	if rec.Code != http.StatusNotFound || json.Unmarshal(rec.Body.Bytes(), &body) != nil || body.Error.Code != "not_found" {
		t.Fatalf("GET /v1/nope = %d %s; want 404 with error code not_found", rec.Code, rec.Body)
	}
}

func TestWrongMethodOnAProbeIs405(t *testing.T) {
	rec := httptest.NewRecorder()
	api.New(api.Config{}).Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/healthz", nil))
	var body api.ErrorBody
	if rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Allow") == "" ||
		json.Unmarshal(rec.Body.Bytes(), &body) != nil || body.Error.Code != "method_not_allowed" {
		t.Fatalf("POST /healthz = %d (Allow %q) %s; want 405 method_not_allowed with Allow", rec.Code, rec.Header().Get("Allow"), rec.Body)
	}
}

func TestWhoAmISaysTheTokensTenantAndRole(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct {
		token string
		want  api.Identity
	}{
		{tokViewerA, api.Identity{Tenant: "a", Role: api.RoleViewer}},
		{tokSubmitterB, api.Identity{Tenant: "b", Role: api.RoleSubmitter}},
		{tokAdmin, api.Identity{Tenant: "ops", Role: api.RoleAdmin}},
	} {
		rec := e.do(http.MethodGet, "/v1/whoami", c.token, "")
		var got api.Identity
		if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &got) != nil || got != c.want {
			t.Errorf("GET /v1/whoami as %s = %d %s; want %+v", c.want.Role, rec.Code, rec.Body, c.want)
		}
	}
}
