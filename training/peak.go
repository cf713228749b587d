package training

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"time"

	"github.com/prescient-sched/prescient/datasets"
	"github.com/prescient-sched/prescient/models"
)

// PeakConfig says how to evaluate the online refinement of the memory
// footprint on a set of series.
type PeakConfig struct {
	Window models.PeakWindow
	// Step is how far apart the windows of one series start.
	Step time.Duration
	// TestShare of the series (chosen by a hash of their ID) is scored;
	// the rest is fitted on. Series are never split.
	TestShare float64
	// Learners to fit, by name; empty means every learner that does not
	// need the job features (the baselines' rolling median does).
	Learners []string
	Seed     int64
}

// DefaultPeakConfig watches 10 minutes, forecasts 2 hours, starts a window
// every 30 minutes and scores 30% of the series.
func DefaultPeakConfig() PeakConfig {
	return PeakConfig{Window: models.DefaultPeakWindow(), Step: 30 * time.Minute, TestShare: 0.3, Seed: 1}
}

// PeakReport compares the refined forecasts with the "peak so far"
// baselines on the scored series.
type PeakReport struct {
	Series        int     `json:"series"`
	FitExamples   int     `json:"fit_examples"`
	ScoredSamples int     `json:"scored_examples"`
	ObserveS      float64 `json:"observe_s"`
	HorizonS      float64 `json:"horizon_s"`
	// Models and Baselines map a name to p90_coverage (share of future
	// peaks at or below the P90 forecast), mean_reservation_vs_peak_x1_2
	// (mean P90 divided by the mean of peak so far × 1.2), mae_log and,
	// for models, fit_s.
	Models    map[string]map[string]float64 `json:"models"`
	Baselines map[string]map[string]float64 `json:"baselines"`
	// After TrainPeak: the learner published, its version, and whether it
	// was published.
	Selected     string `json:"selected,omitempty"`
	ModelVersion int    `json:"model_version,omitempty"`
	Published    *bool  `json:"published,omitempty"`
	// Gate, after RetrainPeak, says how the new version compared with the
	// serving one.
	Gate string `json:"gate,omitempty"`
}

// EvaluatePeak fits the learners on some series' windows and scores them
// on the others' against reserving the peak so far, or 1.2 times it.
func EvaluatePeak(ctx context.Context, cfg PeakConfig, series []datasets.Series) (PeakReport, error) {
	rep, _, err := fitPeak(ctx, cfg, series)
	return rep, err
}

// fittedPeak is one learner as fitPeak fitted and calibrated it, with
// its scores on the calibration windows (what selectPeak reads: the
// scored series must not choose the learner they score).
type fittedPeak struct {
	name  string
	model models.Model
	shift float64
	calib map[string]float64
}

// fitPeak is EvaluatePeak, returning the fitted learners too.
func fitPeak(ctx context.Context, cfg PeakConfig, series []datasets.Series) (PeakReport, []fittedPeak, error) {
	rep, fitted, _, err := fitPeakScored(ctx, cfg, series)
	return rep, fitted, err
}

// peakTest is what fitPeakScored scored on: the windows of the scored
// series and the reservation of 1.2 × their peak so far.
type peakTest struct {
	examples    []models.PeakExample
	reservation float64
}

// fitPeakScored is fitPeak, returning what it scored on too.
func fitPeakScored(ctx context.Context, cfg PeakConfig, series []datasets.Series) (PeakReport, []fittedPeak, peakTest, error) {
	return fitPeakRoles(ctx, cfg, series, func(id string) peakRole { return peakRoleOf(id, cfg.TestShare) })
}

// fitPeakRoles is fitPeakScored with each series' role given by roleOf.
func fitPeakRoles(ctx context.Context, cfg PeakConfig, series []datasets.Series, roleOf func(id string) peakRole) (PeakReport, []fittedPeak, peakTest, error) {
	// 1. Windows of every series, split by series.
	// A fifth of the fitted series calibrates the P90 (split conformal):
	// its shift is what those series needed to be covered 90% of the time.
	var fit, calib, test []models.PeakExample
	for _, s := range series {
		ex := cfg.Window.Examples(s.ID, s.Times, s.Values, cfg.Step)
		switch roleOf(s.ID) {
		case peakScored:
			test = append(test, ex...)
		case peakCalibrates:
			calib = append(calib, ex...)
		default:
			fit = append(fit, ex...)
		}
	}
	if len(fit) < minRows || len(calib) < minRows || len(test) < minRows {
		return PeakReport{}, nil, peakTest{}, fmt.Errorf("peak refinement: %w: %d windows to fit, %d to calibrate, %d to score", ErrNoData, len(fit), len(calib), len(test))
	}
	rep := PeakReport{Series: len(series), FitExamples: len(fit), ScoredSamples: len(test),
		ObserveS: cfg.Window.Observe.Seconds(), HorizonS: cfg.Window.Horizon.Seconds(),
		Models: map[string]map[string]float64{}, Baselines: map[string]map[string]float64{}}
	X, y := make([][]float64, len(fit)), make([]float64, len(fit))
	for i, e := range fit {
		X[i], y[i] = e.X, models.PeakTarget(e)
	}
	Xt := make([][]float64, len(test))
	for i, e := range test {
		Xt[i] = e.X
	}
	Xc := make([][]float64, len(calib))
	for i, e := range calib {
		Xc[i] = e.X
	}
	baseRes, calibRes := 0.0, 0.0
	for _, e := range test {
		baseRes += 1.2 * e.PeakSoFar
	}
	for _, e := range calib {
		calibRes += 1.2 * e.PeakSoFar
	}

	// 2. The baselines: the peak so far, and 1.2 times it.
	rep.Baselines = peakBaselines(peakTest{examples: test, reservation: baseRes})

	// 3. The learners, on log(future peak / peak so far).
	var fitted []fittedPeak
	for _, name := range peakLearners(cfg) {
		l, err := models.LookupLearner(name)
		if err != nil {
			return PeakReport{}, nil, peakTest{}, err
		}
		m := l.New(models.Options{Features: models.PeakFeatureNames(), Seed: cfg.Seed})
		start := time.Now()
		if err := m.Fit(ctx, X, y); err != nil {
			return PeakReport{}, nil, peakTest{}, fmt.Errorf("peak refinement: %s: %w", name, err)
		}
		fitS := time.Since(start).Seconds()
		shift, err := conformalShift(m, Xc, calib, 0.9)
		if err != nil {
			return PeakReport{}, nil, peakTest{}, fmt.Errorf("peak refinement: %s: %w", name, err)
		}
		row, err := scoreCalibrated(m, shift, Xt, test, baseRes)
		if err != nil {
			return PeakReport{}, nil, peakTest{}, fmt.Errorf("peak refinement: %s: %w", name, err)
		}
		row["fit_s"] = fitS
		if l.Baseline {
			rep.Baselines[name] = row // the global median: one fitted margin for every window
			continue
		}
		rep.Models[name] = row
		calibRow, err := scoreCalibrated(m, shift, Xc, calib, calibRes)
		if err != nil {
			return PeakReport{}, nil, peakTest{}, fmt.Errorf("peak refinement: %s: %w", name, err)
		}
		fitted = append(fitted, fittedPeak{name: name, model: m, shift: shift, calib: calibRow})
	}
	return rep, fitted, peakTest{examples: test, reservation: baseRes}, nil
}

// scoreCalibrated scores m, its P90 raised by shift, on the windows ex
// (rows X) against reservation, the sum of 1.2 × their peaks so far.
func scoreCalibrated(m interface {
	PredictQuantiles(X [][]float64, qs []float64) ([][]float64, error)
}, shift float64, X [][]float64, ex []models.PeakExample, reservation float64) (map[string]float64, error) {
	q, err := m.PredictQuantiles(X, []float64{0.5, 0.9})
	if err != nil {
		return nil, err
	}
	p50, p90 := make([]float64, len(ex)), make([]float64, len(ex))
	for i, e := range ex {
		p50[i], p90[i] = e.PeakSoFar*math.Exp(q[i][0]), e.PeakSoFar*math.Exp(q[i][1]+shift)
	}
	return peakScore(ex, p50, p90, reservation), nil
}

// calibShare of the series that are not scored calibrate the P90.
const calibShare = 0.2

// peakRole is what a series is used for in fitting the refinement.
type peakRole int

const (
	peakFits peakRole = iota
	peakCalibrates
	peakScored
)

// peakRoleOf is the one rule that says, by a hash of its ID, whether a
// series is scored (testShare of them), calibrates the P90 (calibShare of
// the rest) or is fitted on.
func peakRoleOf(id string, testShare float64) peakRole {
	return peakRoleBeside(id, inTest(id, testShare))
}

// peakRoleBeside is the role of a series that is scored or not: one that
// is not calibrates the P90 (calibShare of them, by a hash of its ID) or
// is fitted on.
func peakRoleBeside(id string, scored bool) peakRole {
	switch {
	case scored:
		return peakScored
	case inTest("calibrate\x00"+id, calibShare):
		return peakCalibrates
	}
	return peakFits
}

// fittedSeries are the IDs of the series cfg fits or calibrates on.
func fittedSeries(cfg PeakConfig, series []datasets.Series) []string {
	var out []string
	for _, s := range series {
		if peakRoleOf(s.ID, cfg.TestShare) != peakScored {
			out = append(out, s.ID)
		}
	}
	slices.Sort(out)
	return out
}

// EvaluatePublishedPeak scores the published refinement art, without
// fitting anything, on the windows of the series it was neither fitted
// nor calibrated on, beside the "peak so far" baselines: how it holds on
// containers it never saw. The report names it as Selected, with
// FitExamples 0.
func EvaluatePublishedPeak(art *models.PeakArtifact, series []datasets.Series) (PeakReport, error) {
	if art.FittedSeries == nil {
		return PeakReport{}, fmt.Errorf("peak refinement version %d does not record the series it was fitted on (published by an older release): train it again to score it on unseen series", art.Version)
	}
	seen := map[string]bool{}
	for _, id := range art.FittedSeries {
		seen[id] = true
	}
	var test []models.PeakExample
	unseen := 0
	for _, s := range series {
		if seen[s.ID] {
			continue
		}
		unseen++
		test = append(test, art.Window.Examples(s.ID, s.Times, s.Values, art.Step)...)
	}
	if len(test) < minRows {
		return PeakReport{}, fmt.Errorf("peak refinement: %w: %d of the %d series are new to version %d, with %d windows to score", ErrNoData, unseen, len(series), art.Version, len(test))
	}
	pt := peakTest{examples: test}
	for _, e := range test {
		pt.reservation += 1.2 * e.PeakSoFar
	}
	row, err := scorePeakArtifact(art, pt)
	if err != nil {
		return PeakReport{}, fmt.Errorf("peak refinement version %d: %w", art.Version, err)
	}
	rep := PeakReport{Series: unseen, ScoredSamples: len(test), ObserveS: art.Window.Observe.Seconds(), HorizonS: art.Window.Horizon.Seconds(),
		Models: map[string]map[string]float64{art.Selected: row}, Baselines: peakBaselines(pt),
		Selected: art.Selected, ModelVersion: art.Version}
	return rep, nil
}

// peakBaselines scores reserving the peak so far, and 1.2 times it.
func peakBaselines(t peakTest) map[string]map[string]float64 {
	out := map[string]map[string]float64{}
	for name, factor := range map[string]float64{"peak_so_far": 1, "peak_so_far_x1_2": 1.2} {
		p90 := make([]float64, len(t.examples))
		for i, e := range t.examples {
			p90[i] = factor * e.PeakSoFar
		}
		out[name] = peakScore(t.examples, p90, p90, t.reservation)
	}
	return out
}

// conformalShift is how much (in log space) the model's level-q quantile
// must be raised for the calibration windows to be covered with
// probability q: the ⌈(n+1)q⌉-th smallest of their excesses over it
// (split conformal quantile regression; it may be negative).
func conformalShift(m models.Regressor, X [][]float64, calib []models.PeakExample, q float64) (float64, error) {
	pred, err := m.PredictQuantiles(X, []float64{q})
	if err != nil {
		return 0, err
	}
	excess := make([]float64, len(calib))
	for i, e := range calib {
		excess[i] = models.PeakTarget(e) - pred[i][0]
	}
	slices.Sort(excess)
	k := min(int(math.Ceil(float64(len(excess)+1)*q)), len(excess)) - 1
	return excess[k], nil
}

func peakLearners(cfg PeakConfig) []string {
	if len(cfg.Learners) > 0 {
		return cfg.Learners
	}
	return []string{models.GlobalMedianName, models.ForestName, models.MLPName}
}

func peakScore(test []models.PeakExample, p50, p90 []float64, baseReservation float64) map[string]float64 {
	covered, res, absLog := 0, 0.0, 0.0
	for i, e := range test {
		if e.FuturePeak <= p90[i] {
			covered++
		}
		res += p90[i]
		absLog += math.Abs(math.Log(math.Max(p50[i], 1e-9)) - math.Log(math.Max(e.FuturePeak, 1e-9)))
	}
	n := float64(len(test))
	return map[string]float64{
		"p90_coverage":                  float64(covered) / n,
		"mean_reservation_vs_peak_x1_2": res / baseReservation,
		"mae_log":                       absLog / n,
	}
}

// inTest puts a share of the series, chosen by a hash of the ID, in the
// scored set.
func inTest(id string, share float64) bool {
	return float64(seriesHash(id)%10000)/10000 < share
}

// seriesHash is the hash that puts series in sets: FNV-1a of the ID.
func seriesHash(id string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(id))
	return h.Sum64()
}
