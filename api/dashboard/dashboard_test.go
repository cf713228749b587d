package dashboard_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path"
	"strings"
	"testing"

	"github.com/prescient-sched/prescient/api"
	"github.com/prescient-sched/prescient/api/dashboard"
)

func TestHandlerServesThePageAndItsAssets(t *testing.T) {
	tests := []struct {
		name        string
		method      string
		path        string
		wantStatus  int
		wantType    string
		wantContain string
	}{
		{name: "the page at /", method: "GET", path: "/", wantStatus: 200, wantType: "text/html", wantContain: `id="util-chart"`},
		{name: "the page asks for a token", method: "GET", path: "/", wantStatus: 200, wantType: "text/html", wantContain: `id="login-form"`},
		{name: "its script", method: "GET", path: "/dashboard.js", wantStatus: 200, wantType: "text/javascript", wantContain: "import"},
		{name: "the API client", method: "GET", path: "/core.js", wantStatus: 200, wantType: "text/javascript", wantContain: "Authorization"},
		{name: "the jobs panel", method: "GET", path: "/jobs.js", wantStatus: 200, wantType: "text/javascript", wantContain: "/v1/jobs"},
		{name: "the fleet panel", method: "GET", path: "/fleet.js", wantStatus: 200, wantType: "text/javascript", wantContain: "AGGREGATE_ABOVE"},
		{name: "the what-if panel", method: "GET", path: "/whatif.js", wantStatus: 200, wantType: "text/javascript", wantContain: "/v1/whatif"},
		{name: "the models and mode panels", method: "GET", path: "/models.js", wantStatus: 200, wantType: "text/javascript", wantContain: "/v1/mode"},
		{name: "the charts", method: "GET", path: "/charts.js", wantStatus: 200, wantType: "text/javascript", wantContain: "createElementNS"},
		{name: "its style", method: "GET", path: "/dashboard.css", wantStatus: 200, wantType: "text/css", wantContain: ".chart svg"},
		{name: "HEAD of the page", method: "HEAD", path: "/", wantStatus: 200, wantType: "text/html"},
		{name: "/index.html redirects to the page's one address", method: "GET", path: "/index.html", wantStatus: 301},
		{name: "an unknown path is 404", method: "GET", path: "/nope.js", wantStatus: 404},
		{name: "no escape from the assets", method: "GET", path: "/../dashboard.go", wantStatus: 404},
		{name: "POST is 405", method: "POST", path: "/", wantStatus: 405},
	}
	h := dashboard.Handler()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(tt.method, tt.path, nil))
			if rec.Code != tt.wantStatus {
				t.Fatalf("%s %s = %d, want %d (%s)", tt.method, tt.path, rec.Code, tt.wantStatus, rec.Body)
			}
			if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, tt.wantType) {
				t.Errorf("Content-Type %q, want %s", ct, tt.wantType)
			}
			if body := rec.Body.String(); !strings.Contains(body, tt.wantContain) {
				t.Errorf("body does not contain %q", tt.wantContain)
			}
		})
	}
}

func TestPageIsLockedDown(t *testing.T) {
	srv := httptest.NewServer(dashboard.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	csp := resp.Header.Get("Content-Security-Policy")
	for _, want := range []string{"script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("Content-Security-Policy %q lacks %q", csp, want)
		}
	}
	if got := resp.Header.Get("X-Content-Type-Options"); got != "nosniff" {
		t.Errorf("X-Content-Type-Options %q, want nosniff", got)
	}
	// The policy forbids inline scripts: the page must have none, or it would not run.
	if strings.Contains(string(body), "<script>") || strings.Contains(string(body), "onclick=") {
		t.Errorf("the page has inline script, which its own Content-Security-Policy blocks")
	}
}

// FuzzHandlerPaths checks that no request path makes the handler panic or
// serve anything but the page and its assets.
func FuzzHandlerPaths(f *testing.F) {
	for _, seed := range []string{"/", "/index.html", "/dashboard.js", "/../dashboard.go", "/assets/index.html",
		"//charts.js", "/%2e%2e/dashboard.go", "/.", "/dashboard.css/", "/v1/jobs", "/\x00"} {
		f.Add(seed)
	}
	// The names the page and its assets have after cleaning the path.
	served := map[string]bool{"": true, "index.html": true, "dashboard.js": true, "charts.js": true, "dashboard.css": true,
		"core.js": true, "jobs.js": true, "fleet.js": true, "whatif.js": true, "models.js": true}
	h := dashboard.Handler()
	f.Fuzz(func(t *testing.T, p string) {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.URL.Path = p
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusOK:
			if name := strings.TrimPrefix(path.Clean("/"+p), "/"); !served[name] {
				t.Fatalf("GET %q = 200 (as %q); only the page and its assets are served", p, name)
			}
		case http.StatusMovedPermanently, http.StatusNotFound, http.StatusBadRequest: // 400: a path with "..", which no browser sends
		default:
			t.Fatalf("GET %q = %d; want 200, 301, 400 or 404", p, rec.Code)
		}
	})
}

// TestMountedOnTheAPIServer checks the dashboard behind the API server's
// router, as `prescient serve` mounts it: the page and its assets at /, a
// 404 for what it does not have, and /v1 left to the API.
func TestMountedOnTheAPIServer(t *testing.T) {
	h := api.New(api.Config{Dashboard: dashboard.Handler(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}).Handler()
	tests := []struct {
		method, path string
		wantStatus   int
		wantType     string
	}{
		{"GET", "/", 200, "text/html"},
		{"HEAD", "/", 200, "text/html"},
		{"GET", "/dashboard.js", 200, "text/javascript"},
		{"GET", "/nope.js", 404, "text/plain"},
		{"GET", "/v1/nope", 404, "application/json"},
		{"POST", "/", 404, "application/json"},
	}
	for _, tt := range tests {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(tt.method, tt.path, nil))
		if ct := rec.Header().Get("Content-Type"); rec.Code != tt.wantStatus || !strings.HasPrefix(ct, tt.wantType) {
			t.Errorf("%s %s = %d %s, want %d %s", tt.method, tt.path, rec.Code, ct, tt.wantStatus, tt.wantType)
		}
	}
}
