package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/prescient-sched/prescient/service"
)

// ReadyCheck is one dependency the server needs before it takes traffic:
// the store, later the telemetry database and the model registry.
type ReadyCheck struct {
	Name  string
	Check func(ctx context.Context) error
}

// DefaultMaxBodyBytes bounds a JSON request body unless Config says
// otherwise.
const DefaultMaxBodyBytes = 1 << 20

// DefaultBodyTimeout bounds a request body's arrival unless Config says
// otherwise.
const DefaultBodyTimeout = 15 * time.Second

// Config configures a Server.
type Config struct {
	Checks  []ReadyCheck
	Logger  *slog.Logger
	Version string
	// CheckTimeout bounds each readiness check (default 2 s).
	CheckTimeout time.Duration

	// Service is the control plane the /v1 routes serve. Without it the
	// server answers only the probes, /metrics, the OpenAPI document and
	// the mounted handlers.
	Service service.Service
	// Tokens are the bearer tokens /v1 accepts (SetTokens replaces them).
	// With none, every /v1 request is refused: auth is never off.
	Tokens Tokens
	// MetricsNeedToken makes /metrics ask for a valid token of any role;
	// it is open by default, as Prometheus expects.
	MetricsNeedToken bool
	// MaxBodyBytes bounds a JSON request body (default 1 MiB).
	MaxBodyBytes int64
	// BodyTimeout bounds how long a request's body may take to arrive
	// after its headers (default 15 s): a client that declares a body and
	// sends it slowly, or never, is cut off then instead of holding a
	// connection. It does not bound the answer: long polls live on.
	BodyTimeout time.Duration
	// Agents serves /v1/agents/ (the agent hub); only agent tokens reach
	// it, and the handler sees the full path and the Principal in the
	// request's context.
	Agents http.Handler
	// Dashboard serves what no other route takes with GET or HEAD, "/"
	// first; it is open (the page asks for a token and calls /v1 with it).
	Dashboard http.Handler
	// Registry is where the API registers its metrics and what /metrics
	// serves (pass the same one to the webhooks and other parts to serve
	// theirs too); nil means a new registry with the Go and process
	// collectors. A registry that already has the API's metrics (a second
	// server) shares them.
	Registry *prometheus.Registry
}

// Server answers the HTTP API.
type Server struct {
	cfg     Config
	log     *slog.Logger
	engine  *gin.Engine
	metrics *metrics
	tokens  atomic.Pointer[Tokens] // cfg.Tokens, then each SetTokens
}

// SetTokens replaces the bearer tokens /v1 accepts, from the next
// request on (a tokens file read again). Safe for concurrent use.
func (s *Server) SetTokens(ts Tokens) { s.tokens.Store(&ts) }

// access says who may call a route.
type access int

const (
	accessOpen    access = iota // anyone
	accessMetrics               // anyone, or any valid token when MetricsNeedToken
	accessRead                  // viewer, submitter, admin
	accessSubmit                // submitter, admin
	accessAdmin                 // admin
	accessAgent                 // agent
)

// roles lists the roles of an access class that needs a token.
func (a access) roles() []Role {
	switch a {
	case accessRead:
		return []Role{RoleViewer, RoleSubmitter, RoleAdmin}
	case accessSubmit:
		return []Role{RoleSubmitter, RoleAdmin}
	case accessAdmin:
		return []Role{RoleAdmin}
	case accessAgent:
		return []Role{RoleAgent}
	}
	return Roles()
}

// route is one entry of the routing table: its method, path, who may call
// it and its handler.
type route struct {
	method, path string
	access       access
	handle       gin.HandlerFunc
}

// New returns a server with its routes.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.CheckTimeout <= 0 {
		cfg.CheckTimeout = 2 * time.Second
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.BodyTimeout <= 0 {
		cfg.BodyTimeout = DefaultBodyTimeout
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
		cfg.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	// gin's mode is package state; release mode only stops it printing
	// its route table to stdout.
	gin.SetMode(gin.ReleaseMode)
	s := &Server{cfg: cfg, log: cfg.Logger.With("component", "api")}
	s.SetTokens(cfg.Tokens)
	s.metrics = newMetrics(cfg.Registry, cfg.Service, s.log)

	e := gin.New()
	e.HandleMethodNotAllowed = true
	e.RedirectTrailingSlash = false
	e.ContextWithFallback = true
	e.Use(s.metrics.middleware, s.logErrors, gin.CustomRecoveryWithWriter(nil, s.recovered))
	e.NoRoute(s.noRoute)
	e.NoMethod(func(c *gin.Context) {
		writeError(c, http.StatusMethodNotAllowed, "method_not_allowed",
			c.Request.Method+" "+c.Request.URL.Path+" takes "+c.Writer.Header().Get("Allow"))
	})
	for _, r := range s.routeTable() {
		e.Handle(r.method, r.path, s.authorize(r.access), r.handle)
	}
	s.engine = e
	return s
}

// routeTable lists every route the server answers.
func (s *Server) routeTable() []route {
	rs := []route{
		{http.MethodGet, "/healthz", accessOpen, s.healthz},
		{http.MethodHead, "/healthz", accessOpen, s.healthz},
		{http.MethodGet, "/readyz", accessOpen, s.readyz},
		{http.MethodHead, "/readyz", accessOpen, s.readyz},
		{http.MethodGet, "/metrics", accessMetrics, gin.WrapH(promhttp.HandlerFor(s.cfg.Registry, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))},
		{http.MethodGet, "/v1/openapi.json", accessOpen, serveOpenAPI},
	}
	if s.cfg.Service != nil {
		h := &handlers{svc: s.cfg.Service, log: s.log, maxBody: s.cfg.MaxBodyBytes}
		rs = append(rs,
			route{http.MethodPost, "/v1/jobs", accessSubmit, h.submit},
			route{http.MethodGet, "/v1/jobs", accessRead, h.listJobs},
			route{http.MethodGet, "/v1/jobs/:id", accessRead, h.getJob},
			route{http.MethodGet, "/v1/jobs/:id/events", accessRead, h.jobEvents},
			route{http.MethodGet, "/v1/jobs/:id/log", accessRead, h.jobLog},
			route{http.MethodDelete, "/v1/jobs/:id", accessSubmit, h.cancel},
			route{http.MethodPost, "/v1/jobs/:id/cancel", accessSubmit, h.cancel},
			route{http.MethodGet, "/v1/fleet", accessRead, h.fleet},
			route{http.MethodPost, "/v1/predict", accessRead, h.predict},
			route{http.MethodGet, "/v1/recommendations", accessRead, h.recommendations},
			route{http.MethodPost, "/v1/whatif", accessRead, h.whatIf},
			route{http.MethodGet, "/v1/stats", accessRead, h.stats},
			route{http.MethodGet, "/v1/forecasts/idle", accessRead, h.idleForecast},
			route{http.MethodGet, "/v1/models", accessRead, h.models},
			route{http.MethodPost, "/v1/models/retrain", accessAdmin, h.retrain},
			route{http.MethodPost, "/v1/models/:target/rollback", accessAdmin, h.rollback},
			route{http.MethodGet, "/v1/tenants", accessAdmin, h.tenants},
			route{http.MethodGet, "/v1/mode", accessRead, h.getMode},
			route{http.MethodPut, "/v1/mode", accessAdmin, h.setMode},
			route{http.MethodGet, "/v1/whoami", accessRead, h.whoami},
		)
	}
	if s.cfg.Agents != nil {
		for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete} {
			rs = append(rs, route{m, agentRoute, accessAgent, gin.WrapH(s.cfg.Agents)})
		}
	}
	return rs
}

// Handler returns the server's HTTP handler. Serve it with a
// ReadHeaderTimeout: the handler bounds the body's arrival itself
// (Config.BodyTimeout).
func (s *Server) Handler() http.Handler { return boundBody(s.engine, s.cfg.BodyTimeout) }

// noRoute hands GET and HEAD outside /v1 to the dashboard; everything else
// is a JSON 404.
func (s *Server) noRoute(c *gin.Context) {
	p := c.Request.URL.Path
	isAPI := p == "/v1" || strings.HasPrefix(p, "/v1/")
	if s.cfg.Dashboard != nil && !isAPI && (c.Request.Method == http.MethodGet || c.Request.Method == http.MethodHead) {
		c.Set(routeKey, "dashboard")
		c.Status(http.StatusOK)
		s.cfg.Dashboard.ServeHTTP(c.Writer, c.Request)
		return
	}
	writeError(c, http.StatusNotFound, "not_found", "no route "+c.Request.Method+" "+p)
}

// logErrors logs the errors handlers left on the context.
func (s *Server) logErrors(c *gin.Context) {
	c.Next()
	for _, err := range c.Errors {
		s.log.Error("request failed", "method", c.Request.Method, "path", c.Request.URL.Path, "status", c.Writer.Status(), "err", err.Err)
	}
}

// recovered answers a panic in a handler with a logged 500.
func (s *Server) recovered(c *gin.Context, v any) {
	s.log.Error("handler panicked", "method", c.Request.Method, "path", c.Request.URL.Path, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
	writeError(c, http.StatusInternalServerError, "internal", "internal error (logged)")
	c.Abort()
}

// healthz says the process is alive; it checks nothing else.
func (s *Server) healthz(c *gin.Context) {
	writeJSON(c, http.StatusOK, map[string]string{"status": "ok", "version": s.cfg.Version})
}

type checkResult struct {
	Name  string `json:"name"`
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

// readyz runs every readiness check and answers 503 when one fails.
func (s *Server) readyz(c *gin.Context) {
	status, results := http.StatusOK, make([]checkResult, 0, len(s.cfg.Checks))
	for _, chk := range s.cfg.Checks {
		ctx, cancel := context.WithTimeout(c.Request.Context(), s.cfg.CheckTimeout)
		err := chk.Check(ctx)
		cancel()
		res := checkResult{Name: chk.Name, OK: err == nil}
		if err != nil {
			res.Error = err.Error()
			status = http.StatusServiceUnavailable
			s.log.Warn("readiness check failed", "check", chk.Name, "err", err)
		}
		results = append(results, res)
	}
	word := "ready"
	if status != http.StatusOK {
		word = "not_ready"
	}
	writeJSON(c, status, map[string]any{"status": word, "checks": results})
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
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	b, _ := encodeJSON(ErrorBody{Error: ErrorDetail{Code: code, Message: msg}}) // strings always encode
	_, _ = w.Write(b)
}

func writeError(c *gin.Context, status int, code, msg string) {
	writeJSON(c, status, ErrorBody{Error: ErrorDetail{Code: code, Message: msg}})
	c.Abort()
}

// writeJSON writes v as one JSON object and a newline. A value that does
// not encode (a NaN from the control plane, say) is a 500, and the error
// is left on the context for the log.
func writeJSON(c *gin.Context, status int, v any) {
	b, err := encodeJSON(v)
	if err != nil {
		_ = c.Error(err)
		status = http.StatusInternalServerError
		b, _ = encodeJSON(ErrorBody{Error: ErrorDetail{Code: "internal", Message: "internal error (logged)"}})
	}
	c.Header("Content-Type", "application/json; charset=utf-8")
	c.Header("X-Content-Type-Options", "nosniff")
	c.Status(status)
	if c.Request.Method == http.MethodHead {
		return
	}
	_, _ = c.Writer.Write(b)
}

// serviceError answers an error of the control plane: the caller's fault
// is 400, 404 or 409 with the Service's message; anything else is a 500
// whose cause goes to the log, not to the client.
func serviceError(c *gin.Context, log *slog.Logger, err error) {
	switch {
	case errors.Is(err, service.ErrInvalid):
		writeError(c, http.StatusBadRequest, "invalid_request", err.Error())
	case errors.Is(err, service.ErrNotFound):
		writeError(c, http.StatusNotFound, "not_found", err.Error())
	case errors.Is(err, service.ErrConflict):
		writeError(c, http.StatusConflict, "conflict", err.Error())
	case c.Request.Context().Err() != nil:
		log.Debug("request ended before the control plane answered", "path", c.Request.URL.Path, "err", err)
		writeError(c, http.StatusServiceUnavailable, "unavailable", "the request was cancelled")
	default:
		log.Error("control plane error", "method", c.Request.Method, "route", c.FullPath(), "err", err)
		writeError(c, http.StatusInternalServerError, "internal", "internal error (logged)")
	}
}
