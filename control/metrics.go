package control

import (
	"errors"
	"math"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/store"
)

// jobMetrics are the plane's Prometheus metrics of its jobs' lives: what a
// user's dashboards and alerts watch (Config.Metrics). Each is observed
// where the plane tells its notifier, from the store's record of the job.
type jobMetrics struct {
	waits       *prometheus.HistogramVec // first start less submission
	events      *prometheus.CounterVec   // starts, preemptions, checkpoints, requeues
	failures    *prometheus.CounterVec   // by reason
	fcError     *prometheus.HistogramVec // |ln(run time / P50)|
	p90Coverage *prometheus.CounterVec   // run time within P90 or not
}

func newJobMetrics(reg *prometheus.Registry) (*jobMetrics, error) {
	m := &jobMetrics{
		waits: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "prescient_job_wait_seconds",
			Help:    "Time from a job's submission to its first start, by tenant and tier.",
			Buckets: prometheus.ExponentialBucketsRange(1, 7*24*3600, 16),
		}, []string{"tenant", "tier"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "prescient_job_events_total",
			Help: "Job lifecycle events by type (started, preempted, checkpointed, requeued, start_failed, ...) and tier.",
		}, []string{"type", "tier"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "prescient_job_failures_total",
			Help: "Jobs failed, by reason: exit_code (the job's own), start_refused (the backend refused its every start), other.",
		}, []string{"reason", "tier"}),
		fcError: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "prescient_forecast_abs_log_error",
			Help:    "|ln(run time / forecast P50)| of each job that succeeded, by the forecast's source (model, default, ...; 0: exact, 0.69: off by 2x).",
			Buckets: []float64{0.05, 0.1, 0.2, 0.35, 0.5, 0.7, 1, 1.5, 2, 3},
		}, []string{"source"}),
		p90Coverage: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "prescient_forecast_p90_covered_total",
			Help: "Jobs that succeeded, by whether their run time was within the forecast P90 (covered=true): the P90's coverage is true over all.",
		}, []string{"covered"}),
	}
	for _, c := range []prometheus.Collector{m.waits, m.events, m.failures, m.fcError, m.p90Coverage} {
		if err := reg.Register(c); err != nil {
			var dup prometheus.AlreadyRegisteredError
			if errors.As(err, &dup) {
				return nil, errors.New("control: config: Metrics: the registry has the plane's metrics already (one plane per registry)")
			}
			return nil, err
		}
	}
	// Every counter's series exists from the start at zero, so that a rate
	// or an alert on one that has not happened yet reads 0, not no data.
	for _, t := range cluster.Tiers() {
		for _, typ := range store.EventTypes() {
			m.events.WithLabelValues(string(typ), t.String())
		}
		for _, r := range failureReasons {
			m.failures.WithLabelValues(r, t.String())
		}
	}
	m.p90Coverage.WithLabelValues("true")
	m.p90Coverage.WithLabelValues("false")
	for _, src := range forecastSources {
		m.fcError.WithLabelValues(src)
	}
	return m, nil
}

// forecastSources are the sources of the plane's forecasts as the
// forecast error's label has them: the served model and the default when
// none serves. Their series exist from the start, so that the first jobs
// to finish show as an increase.
var forecastSources = []string{"model", "default"}

// failureReasons are the reason labels of prescient_job_failures_total.
var failureReasons = []string{"exit_code", "start_refused", "other"}

// observe counts one lifecycle event of j (as the store has it after the
// event); f is the job's forecast, known or not.
func (m *jobMetrics) observe(typ store.EventType, j cluster.Job, msg string, f executor.Forecast, known bool, now time.Time) {
	if m == nil {
		return
	}
	tier := j.Spec.Tier.String()
	m.events.WithLabelValues(string(typ), tier).Inc()
	switch typ {
	case store.EventStarted:
		if j.Attempts == 1 {
			m.waits.WithLabelValues(j.Spec.Tenant, tier).Observe(max(now.Sub(j.SubmitTime), 0).Seconds())
		}
	case store.EventFailed:
		reason := "other"
		switch {
		case strings.HasPrefix(msg, failExitCode):
			reason = "exit_code"
		case strings.HasPrefix(msg, failStartRefused):
			reason = "start_refused"
		}
		m.failures.WithLabelValues(reason, tier).Inc()
	case store.EventFinished:
		run := j.Outcome.RunTime
		if run <= 0 && !j.StartTime.IsZero() && !j.EndTime.IsZero() {
			run = j.EndTime.Sub(j.StartTime)
		}
		if !known || run <= 0 || f.DurationP50 <= 0 {
			return
		}
		source, _, _ := strings.Cut(f.Source, " ") // "model", "default": not the version, which would grow the labels
		m.fcError.WithLabelValues(source).Observe(math.Abs(math.Log(run.Seconds() / f.DurationP50.Seconds())))
		m.p90Coverage.WithLabelValues(map[bool]string{true: "true", false: "false"}[run <= f.DurationP90]).Inc()
	}
}
