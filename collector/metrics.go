package collector

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Metrics are the collector's own Prometheus metrics. Names and meaning
// are documented in docs/telemetry.md.
type Metrics struct {
	// Samples counts device samples taken (one per GPU or MIG device and
	// interval).
	Samples prometheus.Counter
	// Written counts samples the sink has stored.
	Written prometheus.Counter
	// Rejected counts samples the database refused as malformed.
	Rejected prometheus.Counter
	// Dropped counts samples lost: spool full (reason="spool_full"), a
	// spool record that could not be read back (reason="spool_corrupt"),
	// a spool append that failed (reason="spool_append"), or no spool to
	// keep them (reason="no_spool").
	Dropped *prometheus.CounterVec
	// WriteSeconds is the latency of one sink write.
	WriteSeconds prometheus.Histogram
	// SpoolBytes is what the spool holds, not yet written.
	SpoolBytes prometheus.Gauge
	// Errors counts failures by device (a GPU's UUID, "sink" or "spool")
	// and kind (the NVML call, "write", "append", ...).
	Errors *prometheus.CounterVec
	// dcgm serves the devices' latest samples with dcgm-exporter's names.
	dcgm *dcgmGauges
}

// NewMetrics creates the metrics and registers them with reg (which may be
// nil: then they are only counted).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Samples: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "prescient_collector_samples_total", Help: "Device samples taken (one per GPU or MIG device per interval).",
		}),
		Written: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "prescient_collector_samples_written_total", Help: "Samples the sink stored.",
		}),
		Rejected: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "prescient_collector_samples_rejected_total", Help: "Samples the database refused as malformed (not retried).",
		}),
		Dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "prescient_collector_samples_dropped_total", Help: "Samples lost, by reason: spool_full, spool_corrupt, spool_append, no_spool.",
		}, []string{"reason"}),
		WriteSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "prescient_collector_write_seconds", Help: "Latency of one batch write to the sink.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
		}),
		SpoolBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "prescient_collector_spool_bytes", Help: "Bytes the on-disk spool holds, not yet written.",
		}),
		Errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "prescient_collector_errors_total", Help: "Errors by device (GPU UUID, sink, spool) and kind (NVML call, write, ...).",
		}, []string{"device", "kind"}),
	}
	m.dcgm = newDCGMGauges()
	if reg != nil {
		reg.MustRegister(m.Samples, m.Written, m.Rejected, m.Dropped, m.WriteSeconds, m.SpoolBytes, m.Errors, m.dcgm)
	}
	return m
}

// Totals are the counters' values at one moment.
type Totals struct {
	Samples, Written, Rejected, DroppedSpoolFull int64
}

// Totals reads the counters.
func (m *Metrics) Totals() Totals {
	return Totals{
		Samples:          counterValue(m.Samples),
		Written:          counterValue(m.Written),
		Rejected:         counterValue(m.Rejected),
		DroppedSpoolFull: counterValue(m.Dropped.WithLabelValues("spool_full")),
	}
}

func counterValue(c prometheus.Counter) int64 {
	var d dto.Metric
	if err := c.Write(&d); err != nil {
		return 0
	}
	return int64(d.GetCounter().GetValue())
}
