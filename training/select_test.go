package training

import (
	"testing"

	"github.com/prescient-sched/prescient/models"
)

// The lowest gate score serves, but learners within selectionTolerance
// of it are tied and the preferred one serves; a learner only compared
// never does while another was fitted.
func TestSelectBest(t *testing.T) {
	row := func(v float64) map[string]float64 { return map[string]float64{"mae_log": v} }
	for _, c := range []struct {
		name    string
		metrics map[string]map[string]float64
		want    string
	}{
		{"clear winner", map[string]map[string]float64{models.KNNName: row(0.90), models.EnsembleName: row(0.95), models.RollingMedianName: row(0.97)}, models.KNNName},
		{"tie goes to the ensemble", map[string]map[string]float64{models.KNNName: row(0.900), models.EnsembleName: row(0.905), models.RollingMedianName: row(0.97)}, models.EnsembleName},
		{"a seeded learner, only compared, does not serve beside the ensemble", map[string]map[string]float64{models.ForestName: row(0.80), models.EnsembleName: row(0.95)}, models.EnsembleName},
		{"a seeded learner serves when it is all there is", map[string]map[string]float64{models.ForestName: row(0.80), models.MLPName: row(0.85)}, models.ForestName},
		{"a baseline well ahead serves", map[string]map[string]float64{models.EnsembleName: row(0.95), models.RollingMedianName: row(0.90)}, models.RollingMedianName},
		{"a learner tied with a baseline is preferred", map[string]map[string]float64{models.KNNName: row(0.905), models.RollingMedianName: row(0.90)}, models.KNNName},
		{"compared learners only when alone", map[string]map[string]float64{models.GBTName: row(0.5), models.GlobalMedianName: row(2)}, models.GlobalMedianName},
		{"a compared learner alone", map[string]map[string]float64{models.GBTName: row(0.5)}, models.GBTName},
		{"gate score over the metric", map[string]map[string]float64{models.KNNName: {"mae_log": 0.8, gateScoreKey: 1.0}, models.EnsembleName: {"mae_log": 0.9, gateScoreKey: 0.95}}, models.EnsembleName},
	} {
		if got := selectBest(models.TargetDuration, c.metrics); got != c.want {
			t.Errorf("%s: selected %s, want %s", c.name, got, c.want)
		}
	}
}

// The refinement published is chosen on the calibration series, not on
// the series that then score it.
func TestSelectPeakReadsTheCalibrationSeries(t *testing.T) {
	row := func(cov, res float64) map[string]float64 {
		return map[string]float64{"p90_coverage": cov, "mean_reservation_vs_peak_x1_2": res}
	}
	fitted := []fittedPeak{
		{name: "a", calib: row(0.92, 0.95)},
		{name: "b", calib: row(0.91, 0.85)},
		{name: "c", calib: row(0.80, 0.70)}, // reserves least but misses the goal
	}
	if got := selectPeak(fitted).name; got != "b" {
		t.Errorf("selected %s, want b (covers 90%% of the calibration peaks, reserving least)", got)
	}
}
