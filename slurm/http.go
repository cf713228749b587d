package slurm

import (
	"embed"
	"encoding/json"
	"io"
	"net/http"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/prescient-sched/prescient/internal/bearer"
)

//go:embed page/index.html
var page embed.FS

// Reader is who a request's bearer token reads for: an admin reads
// everything; anyone else the advice of the jobs of their Slurm account.
type Reader struct {
	Account string
	Admin   bool
}

// Access looks a bearer token up: false when it is not one the site gave.
// Nil Access leaves every route open (an advisor on loopback).
type Access func(token string) (Reader, bool)

// Handler serves a Runner's advice, read-only:
//
//	GET /                  a page of the pending jobs' advice and the latest changes (it asks for a token)
//	GET /v1/slurm/advice   {"advice": [Advice...]}, pending jobs in Slurm's order: a token's account's, every job for an admin
//	GET /v1/slurm/events   {"events": [Event...]}, the latest changes, oldest first (admin)
//	GET /v1/slurm/state    State: what the Runner has changed (admin)
//	GET /healthz           "ok"
//	GET /metrics           metrics (Prometheus), when metrics is not nil
//
// With access, the /v1 routes take "Authorization: Bearer TOKEN": 401
// without a token access knows, 403 for a route the token may not read.
func Handler(r *Runner, metrics prometheus.Gatherer, access Access) http.Handler {
	mux := http.NewServeMux()
	js := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(v)
	}
	// reader is the request's reader, or false after answering 401 or 403.
	reader := func(w http.ResponseWriter, req *http.Request, admin bool) (Reader, bool) {
		if access == nil {
			return Reader{Admin: true}, true
		}
		token, given := bearer.Token(req)
		rd, ok := access(token)
		switch {
		case !given || !ok:
			w.Header().Set("WWW-Authenticate", `Bearer realm="prescient"`)
			http.Error(w, "a token is needed: send Authorization: Bearer TOKEN", http.StatusUnauthorized)
			return Reader{}, false
		case admin && !rd.Admin:
			http.Error(w, "only an admin token reads "+req.URL.Path, http.StatusForbidden)
			return Reader{}, false
		}
		return rd, true
	}
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		b, _ := page.ReadFile("page/index.html")
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'")
		w.Write(b)
	})
	mux.HandleFunc("GET /v1/slurm/advice", func(w http.ResponseWriter, req *http.Request) {
		rd, ok := reader(w, req, false)
		if !ok {
			return
		}
		adv := r.Advice()
		if !rd.Admin {
			adv = slices.DeleteFunc(slices.Clone(adv), func(a Advice) bool { return a.Account != rd.Account })
		}
		js(w, map[string]any{"advice": adv})
	})
	mux.HandleFunc("GET /v1/slurm/events", func(w http.ResponseWriter, req *http.Request) {
		if _, ok := reader(w, req, true); ok {
			js(w, map[string]any{"events": r.Events()})
		}
	})
	mux.HandleFunc("GET /v1/slurm/state", func(w http.ResponseWriter, req *http.Request) {
		if _, ok := reader(w, req, true); ok {
			js(w, r.State())
		}
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	if metrics != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(metrics, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	}
	return mux
}
