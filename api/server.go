package api

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"time"
)

// ReadyCheck is one dependency the server needs before it takes traffic:
// the store, later the telemetry database and the model registry.
type ReadyCheck struct {
	Name  string
	Check func(ctx context.Context) error
}

// Config configures a Server.
type Config struct {
	Checks  []ReadyCheck
	Logger  *slog.Logger
	Version string
	// CheckTimeout bounds each readiness check (default 2 s).
	CheckTimeout time.Duration
}

// Server answers the HTTP API.
type Server struct {
	cfg     Config
	handler http.Handler
}

// New returns a server with its routes.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.CheckTimeout <= 0 {
		cfg.CheckTimeout = 2 * time.Second
	}
	cfg.Logger = cfg.Logger.With("component", "api")
	s := &Server{cfg: cfg}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)
	for _, path := range []string{"/healthz", "/readyz"} {
		mux.HandleFunc(path, methodNotAllowed(http.MethodGet, http.MethodHead))
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		WriteError(w, http.StatusNotFound, "not_found", "no route "+r.Method+" "+r.URL.Path)
	})
	s.handler = mux
	return s
}

// Handler returns the server's HTTP handler.
func (s *Server) Handler() http.Handler { return s.handler }

// healthz says the process is alive; it checks nothing else.
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "version": s.cfg.Version})
}

type checkResult struct {
	Name  string `json:"name"`
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

// readyz runs every readiness check and answers 503 when one fails.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	status, results := http.StatusOK, make([]checkResult, 0, len(s.cfg.Checks))
	for _, c := range s.cfg.Checks {
		ctx, cancel := context.WithTimeout(r.Context(), s.cfg.CheckTimeout)
		err := c.Check(ctx)
		cancel()
		res := checkResult{Name: c.Name, OK: err == nil}
		if err != nil {
			res.Error = err.Error()
			status = http.StatusServiceUnavailable
			s.cfg.Logger.Warn("readiness check failed", "check", c.Name, "err", err)
		}
		results = append(results, res)
	}
	word := "ready"
	if status != http.StatusOK {
		word = "not_ready"
	}
	writeJSON(w, status, map[string]any{"status": word, "checks": results})
}

// methodNotAllowed answers 405 with the methods a route takes.
func methodNotAllowed(allowed ...string) http.HandlerFunc {
	allow := strings.Join(allowed, ", ")
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allow)
		WriteError(w, http.StatusMethodNotAllowed, "method_not_allowed", r.Method+" "+r.URL.Path+" takes "+allow)
	}
}

// ErrorBody is the JSON shape of every error the API returns.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is a machine-readable code and a message for people.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// WriteError writes {"error": {"code": code, "message": msg}} with status.
func WriteError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, ErrorBody{Error: ErrorDetail{Code: code, Message: msg}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
