package training

import (
	"math"
	"slices"

	"github.com/prescient-sched/prescient/models"
)

// Metrics scores forecasts against actuals, in the target's unit (seconds
// or bytes) and in log space.
type Metrics struct {
	MAE         float64 // mean absolute error of P50, target unit
	MedianAE    float64 // median absolute error of P50, target unit
	MAELog      float64 // mean absolute error of log P50
	Spearman    float64 // rank correlation of P50 and actual
	P90Coverage float64 // share of actuals at or below P90
	PinballP90  float64 // mean pinball loss at P90 in log space
	// UnblendedMAELog is MAELog of a learned model's own forecasts, where
	// the scored ones are as served (models.Blend); 0 otherwise.
	UnblendedMAELog float64
}

// Map writes the metrics with report keys: mae_s or mae_bytes and so on.
func (m Metrics) Map(t models.Target) map[string]float64 {
	u := t.Unit()
	out := map[string]float64{
		"mae_" + u: m.MAE, "median_ae_" + u: m.MedianAE, "mae_log": m.MAELog,
		"spearman": m.Spearman, "p90_coverage": m.P90Coverage, "pinball_p90_log": m.PinballP90,
	}
	if m.UnblendedMAELog != 0 {
		out["mae_log_unblended"] = m.UnblendedMAELog
	}
	return out
}

// Score computes the metrics of forecasts p50 and p90 (in log space, as the
// learners give them) against the actual values y (in log space).
func Score(yLog, p50Log, p90Log []float64) Metrics {
	n := len(yLog)
	if n == 0 {
		return Metrics{}
	}
	var m Metrics
	abs := make([]float64, n)
	covered := 0
	for i := range n {
		actual, pred := models.Exp(yLog[i]), models.Exp(p50Log[i])
		abs[i] = math.Abs(pred - actual)
		m.MAE += abs[i]
		m.MAELog += math.Abs(p50Log[i] - yLog[i])
		if yLog[i] <= p90Log[i] {
			covered++
		}
		e := yLog[i] - p90Log[i]
		m.PinballP90 += math.Max(0.9*e, -0.1*e)
	}
	fn := float64(n)
	m.MAE /= fn
	m.MAELog /= fn
	m.PinballP90 /= fn
	m.P90Coverage = float64(covered) / fn
	slices.Sort(abs)
	m.MedianAE = models.QuantileSorted(abs, 0.5)
	m.Spearman = models.Spearman(p50Log, yLog)
	return m
}
