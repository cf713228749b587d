package slurm

import (
	"embed"
	"encoding/json"
	"io"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

//go:embed page/index.html
var page embed.FS

// Handler serves a Runner's advice, read-only and without authentication:
//
//	GET /                  a page of the pending jobs' advice and the latest changes
//	GET /v1/slurm/advice   {"advice": [Advice...]}, pending jobs in Slurm's order
//	GET /v1/slurm/events   {"events": [Event...]}, the latest changes, oldest first
//	GET /v1/slurm/state    State: what the Runner has changed
//	GET /healthz           "ok"
//	GET /metrics           metrics (Prometheus), when metrics is not nil
func Handler(r *Runner, metrics prometheus.Gatherer) http.Handler {
	mux := http.NewServeMux()
	js := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(v)
	}
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		b, _ := page.ReadFile("page/index.html")
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'")
		w.Write(b)
	})
	mux.HandleFunc("GET /v1/slurm/advice", func(w http.ResponseWriter, _ *http.Request) {
		js(w, map[string]any{"advice": r.Advice()})
	})
	mux.HandleFunc("GET /v1/slurm/events", func(w http.ResponseWriter, _ *http.Request) {
		js(w, map[string]any{"events": r.Events()})
	})
	mux.HandleFunc("GET /v1/slurm/state", func(w http.ResponseWriter, _ *http.Request) { js(w, r.State()) })
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	if metrics != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(metrics, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	}
	return mux
}
