package training

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/collector"
	"github.com/prescient-sched/prescient/datasets"
	"github.com/prescient-sched/prescient/models"
)

// FleetPeakSeries reads from telemetry the GPU-memory series of the
// finished jobs that ran long enough to teach the peak refinement (the
// window's Observe and Horizon): one point a step, the most the job's
// processes held on one GPU, from its start to its end. The telemetry is
// read a day at a time, only for the days such a job ran; jobs with no
// process samples have no series.
func FleetPeakSeries(ctx context.Context, mem JobMemoryReader, jobs []cluster.Job, w models.PeakWindow, step time.Duration) ([]datasets.Series, error) {
	if step <= 0 {
		return nil, fmt.Errorf("fleet peak series: step %s: want a positive duration", step)
	}
	runs := map[string]jobRun{}
	for i := range jobs {
		j := &jobs[i]
		if !j.State.Terminal() || j.StartTime.IsZero() || j.EndTime.Sub(j.StartTime) < w.Observe+w.Horizon {
			continue
		}
		runs[string(j.ID)] = jobRun{j.StartTime, j.EndTime}
	}
	points := map[string]map[time.Time]float64{}
	_, err := jobMemoryByDay(ctx, mem, runs, step, "fleet peak series", func(s collector.JobMemorySeries, run jobRun) {
		for _, p := range s.Points {
			if p.Time.Before(run.start.Truncate(step)) || p.Time.After(run.end) || math.IsNaN(p.Value) {
				continue
			}
			if points[s.Job] == nil {
				points[s.Job] = map[time.Time]float64{}
			}
			points[s.Job][p.Time] = max(points[s.Job][p.Time], p.Value)
		}
	})
	if err != nil {
		return nil, err
	}
	out := make([]datasets.Series, 0, len(points))
	for _, id := range slices.Sorted(maps.Keys(points)) {
		s := datasets.Series{ID: id}
		for _, t := range slices.SortedFunc(maps.Keys(points[id]), time.Time.Compare) {
			s.Times = append(s.Times, t)
			s.Values = append(s.Values, points[id][t])
		}
		out = append(out, s)
	}
	return out, nil
}

// RetrainPeak fits the peak refinement on the fleet's own series as
// TrainPeak does and publishes it only if it is not worse than the serving
// version on the same scored windows (the gate; see peakBetter). Without
// a serving version, or one that does not load, it publishes.
func RetrainPeak(ctx context.Context, cfg PeakConfig, series []datasets.Series, reg Registry) (PeakReport, error) {
	rep, fitted, test, err := fitPeakScored(ctx, cfg, series)
	if err != nil {
		return PeakReport{}, err
	}
	if len(fitted) == 0 {
		return PeakReport{}, fmt.Errorf("peak refinement: no learner to publish among %v (baselines are not published)", peakLearners(cfg))
	}
	best := selectPeak(fitted)
	newRow := rep.Models[best.name]
	cur, err := reg.Current(models.TargetPeak)
	switch {
	case errors.Is(err, ErrNoModel) || cur == 0:
		rep.Gate = "no serving model"
	case err != nil:
		return PeakReport{}, err
	default:
		art, err := reg.LoadPeak(cur)
		if err != nil {
			rep.Gate = "serving model does not load: " + err.Error()
			break
		}
		if art.Window != cfg.Window || !slices.Equal(art.Features, models.PeakFeatureNames()) {
			rep.Gate = fmt.Sprintf("serving version %d not comparable: another window or feature list", cur)
			break
		}
		old, err := scorePeakArtifact(art, test)
		if err != nil {
			rep.Gate = "serving model does not score: " + err.Error()
			break
		}
		verdict := fmt.Sprintf("%s p90_coverage %.3f, reservation %.3f × (peak so far × 1.2); version %d's %.3f, %.3f, on %d windows",
			best.name, newRow["p90_coverage"], newRow["mean_reservation_vs_peak_x1_2"], cur, old["p90_coverage"],
			old["mean_reservation_vs_peak_x1_2"], len(test.examples))
		if peakBetter(old, newRow) {
			published := false
			rep.Selected, rep.Published, rep.Gate = best.name, &published, "refused: "+verdict
			return rep, nil
		}
		rep.Gate = "passed: " + verdict
	}
	return publishPeak(cfg, rep, best, series, reg)
}

// selectPeak is the learner to publish: among those whose P90 covers at
// least peakCoverageGoal of the calibration series' peaks the one that
// reserves least there, else the one that covers most. The scored series
// do not choose: their figures then say how the choice holds on series
// it never saw.
func selectPeak(fitted []fittedPeak) fittedPeak {
	return slices.MinFunc(fitted, func(a, b fittedPeak) int {
		switch {
		case peakBetter(a.calib, b.calib):
			return -1
		case peakBetter(b.calib, a.calib):
			return 1
		}
		return cmp.Compare(a.name, b.name)
	})
}

// peakBetter reports whether scores a are strictly better than b: covering
// the goal beats not covering it; between two that cover it, the smaller
// reservation wins; between two that do not, the higher coverage.
func peakBetter(a, b map[string]float64) bool {
	ca, cb := a["p90_coverage"] >= peakCoverageGoal, b["p90_coverage"] >= peakCoverageGoal
	switch {
	case ca != cb:
		return ca
	case ca:
		return a["mean_reservation_vs_peak_x1_2"] < b["mean_reservation_vs_peak_x1_2"]
	}
	return a["p90_coverage"] > b["p90_coverage"]
}

// scorePeakArtifact scores a published refinement on scored windows, as
// fitPeakScored scores the learners.
func scorePeakArtifact(a *models.PeakArtifact, test peakTest) (map[string]float64, error) {
	X := make([][]float64, len(test.examples))
	for i, e := range test.examples {
		X[i] = e.X
	}
	return scoreCalibrated(a, a.ShiftP90, X, test.examples, test.reservation)
}
