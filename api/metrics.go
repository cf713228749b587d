package api

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/prescient-sched/prescient/service"
)

// routeKey overrides the route label of a request that no route matched
// (the dashboard).
const routeKey = "prescient.route"

// metrics are the API's Prometheus metrics.
type metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newMetrics(reg *prometheus.Registry, svc service.Service, log *slog.Logger) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "prescient_api_requests_total",
			Help: "HTTP requests answered, by route pattern, method and status code.",
		}, []string{"route", "method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "prescient_api_request_duration_seconds",
			Help:    "Time to answer an HTTP request, by route pattern, method and status code; the agents' long polls (GET /v1/agents/...) are counted, not timed.",
			Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
		}, []string{"route", "method", "code"}),
	}
	m.requests = register(reg, m.requests, log)
	m.duration = register(reg, m.duration, log)
	if svc != nil {
		register(reg, prometheus.Collector(&serviceCollector{svc: svc, log: log, timeout: 2 * time.Second}), log)
	}
	return m
}

// register registers c, or returns the collector already registered in its
// place; a registry that refuses c otherwise is logged and c works
// unregistered.
func register[C prometheus.Collector](reg *prometheus.Registry, c C, log *slog.Logger) C {
	err := reg.Register(c)
	var dup prometheus.AlreadyRegisteredError
	switch {
	case err == nil:
	case errors.As(err, &dup):
		if existing, ok := dup.ExistingCollector.(C); ok {
			return existing
		}
	default:
		log.Warn("metrics: not registered", "err", err)
	}
	return c
}

// middleware counts and times every request by its route pattern (never
// the raw path, whose IDs would make the label set unbounded).
func (m *metrics) middleware(c *gin.Context) {
	start := time.Now()
	c.Next()
	route := c.FullPath()
	if r := c.GetString(routeKey); r != "" {
		route = r
	}
	if route == "" {
		route = "unmatched"
	}
	code := strconv.Itoa(c.Writer.Status())
	m.requests.WithLabelValues(route, c.Request.Method, code).Inc()
	if route == agentRoute && c.Request.Method == http.MethodGet {
		return // a long poll waits up to 30 s by design: its time says nothing of the API's
	}
	m.duration.WithLabelValues(route, c.Request.Method, code).Observe(time.Since(start).Seconds())
}

// agentRoute is the route pattern of the agent protocol.
const agentRoute = "/v1/agents/*path"

// serviceCollector reports what the control plane knows cheaply, read at
// each scrape: the mode and the fleet's counts.
type serviceCollector struct {
	svc     service.Service
	log     *slog.Logger
	timeout time.Duration
}

var (
	descMode     = prometheus.NewDesc("prescient_mode", "The control plane's mode: 1 for the current one.", []string{"mode"}, nil)
	descGPUs     = prometheus.NewDesc("prescient_fleet_gpus", "GPUs in the fleet.", nil, nil)
	descGPUsBusy = prometheus.NewDesc("prescient_fleet_gpus_busy", "GPUs allocated to jobs, in whole GPUs.", nil, nil)
	descJobs     = prometheus.NewDesc("prescient_jobs", "Jobs queued and running now.", []string{"state"}, nil)
	descNodes    = prometheus.NewDesc("prescient_fleet_nodes", "Nodes by state.", []string{"state"}, nil)

	// The fleet's latest GPU telemetry named, labelled and in the units of
	// NVIDIA's dcgm-exporter, so that dashboards written for it work.
	dcgmLabels   = []string{"gpu", "modelName", "Hostname"}
	descDCGMUtil = prometheus.NewDesc("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", dcgmLabels, nil)
	descDCGMFB   = prometheus.NewDesc("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", dcgmLabels, nil)
	descDCGMPow  = prometheus.NewDesc("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", dcgmLabels, nil)
)

func (sc *serviceCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descMode, descGPUs, descGPUsBusy, descJobs, descNodes, descDCGMUtil, descDCGMFB, descDCGMPow} {
		ch <- d
	}
}

func (sc *serviceCollector) Collect(ch chan<- prometheus.Metric) {
	mode := sc.svc.Mode()
	for _, m := range []service.Mode{service.ModeAdvisor, service.ModeAutopilot} {
		ch <- prometheus.MustNewConstMetric(descMode, prometheus.GaugeValue, boolFloat(m == mode), string(m))
	}
	ctx, cancel := context.WithTimeout(context.Background(), sc.timeout)
	defer cancel()
	fs, err := sc.svc.Fleet(ctx)
	if err != nil {
		sc.log.Warn("metrics: fleet state unavailable", "err", err)
		ch <- prometheus.NewInvalidMetric(descGPUs, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(descGPUs, prometheus.GaugeValue, float64(fs.GPUs))
	ch <- prometheus.MustNewConstMetric(descGPUsBusy, prometheus.GaugeValue, fs.GPUsBusy)
	ch <- prometheus.MustNewConstMetric(descJobs, prometheus.GaugeValue, float64(fs.Queued), "queued")
	ch <- prometheus.MustNewConstMetric(descJobs, prometheus.GaugeValue, float64(fs.Running), "running")
	nodes := map[string]int{}
	for _, n := range fs.Nodes {
		nodes[n.State]++
	}
	for state, n := range nodes {
		ch <- prometheus.MustNewConstMetric(descNodes, prometheus.GaugeValue, float64(n), state)
	}
	for _, n := range fs.Nodes {
		for _, g := range n.GPUs {
			labels := []string{strconv.Itoa(g.Index), g.Model, n.Name}
			if g.UtilizationPct != nil {
				ch <- prometheus.MustNewConstMetric(descDCGMUtil, prometheus.GaugeValue, *g.UtilizationPct, labels...)
			}
			if g.MemoryUsedBytes != nil {
				ch <- prometheus.MustNewConstMetric(descDCGMFB, prometheus.GaugeValue, float64(*g.MemoryUsedBytes)/(1<<20), labels...)
			}
			if g.PowerW != nil {
				ch <- prometheus.MustNewConstMetric(descDCGMPow, prometheus.GaugeValue, *g.PowerW, labels...)
			}
		}
	}
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
