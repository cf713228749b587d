package slurm

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are a Runner's Prometheus metrics: what an operator's alerts
// watch (cycles failing, changes failing, how much autopilot holds).
type Metrics struct {
	cycles   *prometheus.CounterVec // by result
	duration prometheus.Histogram   // of a cycle that read the cluster
	changes  *prometheus.CounterVec // by kind and result
	pending  prometheus.Gauge       // pending jobs advised
	advised  prometheus.Gauge       // of them, with a limit below their own
	lowered  prometheus.Gauge       // jobs whose limit autopilot holds lowered
	niced    prometheus.Gauge       // jobs whose Nice autopilot set
	held     prometheus.Gauge       // jobs autopilot holds
	parked   prometheus.Gauge       // nodes autopilot parked
	last     prometheus.Gauge       // Unix time of the last cycle that succeeded
}

// NewMetrics registers a Runner's metrics with reg (one Runner per
// registry).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		cycles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "prescient_slurm_cycles_total",
			Help: "Advisor cycles over the Slurm cluster, by result (ok, failed).",
		}, []string{"result"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "prescient_slurm_cycle_seconds",
			Help:    "Time a cycle took: reading the cluster and its accounting, forecasting, advising and changing.",
			Buckets: prometheus.ExponentialBucketsRange(0.05, 120, 12),
		}),
		changes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "prescient_slurm_changes_total",
			Help: "Changes made to the cluster, by kind (comment, lower, restore, nice, restore_nice, hold, release, power_down, power_up) and result (ok, failed).",
		}, []string{"kind", "result"}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "prescient_slurm_pending_jobs",
			Help: "Pending jobs (records: an array counts once) advised in the last cycle.",
		}),
		advised: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "prescient_slurm_advised_lower_jobs",
			Help: "Pending jobs whose recommended limit is below the user's own, in the last cycle.",
		}),
		lowered: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "prescient_slurm_lowered_jobs",
			Help: "Jobs whose limit autopilot holds lowered (restored when it stops).",
		}),
		niced: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "prescient_slurm_ordered_jobs",
			Help: "Jobs whose Nice autopilot set to order them (restored when it stops).",
		}),
		held: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "prescient_slurm_held_jobs",
			Help: "Pending jobs autopilot holds for cleaner power (released when it stops).",
		}),
		parked: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "prescient_slurm_parked_nodes",
			Help: "Nodes autopilot powered down and has not woken.",
		}),
		last: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "prescient_slurm_last_cycle_timestamp_seconds",
			Help: "When the last cycle that succeeded ended (Unix time): alert when it falls behind.",
		}),
	}
	for _, c := range []prometheus.Collector{m.cycles, m.duration, m.changes, m.pending, m.advised, m.lowered, m.niced, m.held, m.parked, m.last} {
		if err := reg.Register(c); err != nil {
			var dup prometheus.AlreadyRegisteredError
			if errors.As(err, &dup) {
				return nil, errors.New("slurm: metrics: the registry has a Runner's metrics already (one Runner per registry)")
			}
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) cycle(err error, took time.Duration, end time.Time, advice []Advice, st *State) {
	if m == nil {
		return
	}
	if err != nil {
		m.cycles.WithLabelValues("failed").Inc()
		return
	}
	m.cycles.WithLabelValues("ok").Inc()
	m.duration.Observe(took.Seconds())
	m.last.Set(float64(end.Unix()))
	m.pending.Set(float64(len(advice)))
	lower := 0
	for i := range advice {
		if advice[i].Lowers() {
			lower++
		}
	}
	m.advised.Set(float64(lower))
	m.lowered.Set(float64(len(st.Lowered)))
	m.niced.Set(float64(len(st.Niced)))
	m.held.Set(float64(len(st.Held)))
	m.parked.Set(float64(len(st.Parked)))
}

func (m *Metrics) change(kind ActionKind, err error) {
	if m == nil {
		return
	}
	result := "ok"
	if err != nil {
		result = "failed"
	}
	m.changes.WithLabelValues(string(kind), result).Inc()
}
