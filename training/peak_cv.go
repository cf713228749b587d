package training

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/prescient-sched/prescient/datasets"
)

// PeakFold is one fold of CrossValidatePeak: its series were scored by
// learners fitted, calibrated and chosen on the other series.
type PeakFold struct {
	Fold    int `json:"fold"`
	Series  int `json:"series"`
	Windows int `json:"windows"`
	// Selected is the learner TrainPeak would have published without
	// this fold's series.
	Selected  string                        `json:"selected"`
	Models    map[string]map[string]float64 `json:"models"`
	Baselines map[string]map[string]float64 `json:"baselines"`
}

// PeakCVReport is CrossValidatePeak's answer.
type PeakCVReport struct {
	Folds []PeakFold `json:"folds"`
	// Pooled holds the figures over every fold's windows, for each learner
	// and baseline and for "served" (each fold's Selected): coverage and
	// mae_log over all windows, the reservation as the sum of P90s over
	// the sum of 1.2 × the peaks so far.
	Pooled map[string]map[string]float64 `json:"pooled"`
}

// CrossValidatePeak scores the online refinement on series it never saw,
// every series once: the series fall by a hash of their ID into folds,
// and each fold is scored by the learners fitted and calibrated (as
// TrainPeak does) on the other folds' series, the one TrainPeak would
// publish among them chosen there too.
func CrossValidatePeak(ctx context.Context, cfg PeakConfig, series []datasets.Series, folds int) (PeakCVReport, error) {
	if folds < 2 || folds > 20 {
		return PeakCVReport{}, fmt.Errorf("peak cross-validation: %d folds: want 2 to 20", folds)
	}
	var rep PeakCVReport
	type sums struct{ windows, covered, absLog, res, base float64 }
	pooled := map[string]*sums{}
	add := func(name string, row map[string]float64, windows int, base float64) {
		s := pooled[name]
		if s == nil {
			s = &sums{}
			pooled[name] = s
		}
		n := float64(windows)
		s.windows += n
		s.covered += row["p90_coverage"] * n
		s.absLog += row["mae_log"] * n
		s.res += row["mean_reservation_vs_peak_x1_2"] * base
		s.base += base
	}
	for f := range folds {
		roleOf := func(id string) peakRole { return peakRoleBeside(id, foldOf(id, folds) == f) }
		r, fitted, test, err := fitPeakRoles(ctx, cfg, series, roleOf)
		if err != nil {
			return PeakCVReport{}, fmt.Errorf("peak cross-validation: fold %d of %d: %w", f+1, folds, err)
		}
		if len(fitted) == 0 {
			return PeakCVReport{}, fmt.Errorf("peak cross-validation: no learner to select among %v", peakLearners(cfg))
		}
		best := selectPeak(fitted)
		n := 0
		for _, s := range series {
			if foldOf(s.ID, folds) == f {
				n++
			}
		}
		rep.Folds = append(rep.Folds, PeakFold{Fold: f + 1, Series: n, Windows: len(test.examples), Selected: best.name,
			Models: r.Models, Baselines: r.Baselines})
		for _, rows := range []map[string]map[string]float64{r.Models, r.Baselines} {
			for name, row := range rows {
				add(name, row, len(test.examples), test.reservation)
			}
		}
		add(ServedName, r.Models[best.name], len(test.examples), test.reservation)
	}
	rep.Pooled = map[string]map[string]float64{}
	for _, name := range slices.Sorted(maps.Keys(pooled)) {
		s := pooled[name]
		rep.Pooled[name] = map[string]float64{"p90_coverage": s.covered / s.windows, "mae_log": s.absLog / s.windows,
			"mean_reservation_vs_peak_x1_2": s.res / s.base, "windows": s.windows}
	}
	return rep, nil
}

// foldOf is the fold of k a series falls in, by a hash of its ID.
func foldOf(id string, k int) int { return int(seriesHash("fold\x00"+id) % uint64(k)) }
