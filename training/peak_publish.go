package training

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/prescient-sched/prescient/datasets"
	"github.com/prescient-sched/prescient/models"
)

// peakCoverageGoal is the P90 coverage a refinement must reach on unseen
// series to be preferred for its smaller reservation.
const peakCoverageGoal = 0.90

// TrainPeak fits the online refinement of the memory footprint as
// EvaluatePeak does (fit, calibrate the P90 on other series, score on
// series neither saw), selects the learner that reserves least among those
// whose P90 covers at least 90% of the calibration series' peaks (or, when
// none does, the one that covers most) and publishes it, as fitted and calibrated, to
// the registry's peak target. It has no gate (RetrainPeak has): each run
// publishes a version, and `models rollback --target peak` undoes it.
func TrainPeak(ctx context.Context, cfg PeakConfig, series []datasets.Series, reg Registry) (PeakReport, error) {
	rep, fitted, err := fitPeak(ctx, cfg, series)
	if err != nil {
		return PeakReport{}, err
	}
	if len(fitted) == 0 {
		return PeakReport{}, fmt.Errorf("peak refinement: no learner to publish among %v (baselines are not published)", peakLearners(cfg))
	}
	return publishPeak(cfg, rep, selectPeak(fitted), series, reg)
}

// publishPeak publishes a fitted learner, calibrated, as the next version
// of the peak target, with the report's metrics.
func publishPeak(cfg PeakConfig, rep PeakReport, best fittedPeak, series []datasets.Series, reg Registry) (PeakReport, error) {
	from, until := seriesSpan(series)
	art := &models.PeakArtifact{Format: models.PeakArtifactFormat, CreatedAt: time.Now().UTC(), Window: cfg.Window, Step: cfg.Step,
		Series: len(series), DataFrom: from, DataUntil: until, FittedSeries: fittedSeries(cfg, series),
		Features: models.PeakFeatureNames(), ShiftP90: best.shift,
		Metrics: map[string]map[string]float64{}}
	for name, m := range rep.Models {
		art.Metrics[name] = m
	}
	for name, m := range rep.Baselines {
		art.Metrics[name] = m
	}
	if err := art.SetModel(best.name, best.model); err != nil {
		return PeakReport{}, err
	}
	v, err := reg.PublishPeak(art)
	if err != nil {
		return PeakReport{}, err
	}
	published := true
	rep.Selected, rep.ModelVersion, rep.Published = best.name, v, &published
	return rep, nil
}

// PublishPeak stores a peak artifact as the next version of the peak
// target, makes it current and prunes old versions, like Publish.
func (r Registry) PublishPeak(a *models.PeakArtifact) (int, error) {
	t := models.TargetPeak
	vs, err := r.Versions(t)
	if err != nil {
		return 0, err
	}
	if err := os.MkdirAll(r.dir(t), 0o755); err != nil {
		return 0, fmt.Errorf("registry: %w", err)
	}
	a.Version = 1
	if len(vs) > 0 {
		a.Version = vs[len(vs)-1] + 1
	}
	var buf bytes.Buffer
	if err := models.EncodePeak(&buf, a); err != nil {
		return 0, err
	}
	if err := writeFileAtomic(r.ArtifactPath(t, a.Version), buf.Bytes()); err != nil {
		return 0, err
	}
	man := Manifest{Target: t, Version: a.Version, Format: a.Format, CreatedAt: a.CreatedAt, DataFrom: a.DataFrom,
		DataUntil: a.DataUntil, Rows: a.Series, Selected: a.Selected, Features: a.Features, Metrics: a.Metrics}
	js, err := json.MarshalIndent(man, "", "  ")
	if err != nil {
		return 0, fmt.Errorf("registry: manifest: %w", err)
	}
	if err := writeFileAtomic(r.manifestPath(t, a.Version), append(js, '\n')); err != nil {
		return 0, err
	}
	if err := r.setCurrent(t, a.Version); err != nil {
		return 0, err
	}
	return a.Version, r.prune(t, a.Version)
}

// LoadPeak decodes version v of the peak target.
func (r Registry) LoadPeak(v int) (*models.PeakArtifact, error) {
	path := r.ArtifactPath(models.TargetPeak, v)
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	defer f.Close()
	a, err := models.DecodePeak(f, path)
	if err != nil {
		return nil, err
	}
	if a.Version != v {
		return nil, fmt.Errorf("%s: holds version %d: %w", path, a.Version, models.ErrCorruptArtifact)
	}
	return a, nil
}
