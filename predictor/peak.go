package predictor

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/prescient-sched/prescient/datasets"
	"github.com/prescient-sched/prescient/models"
	"github.com/prescient-sched/prescient/training"
)

// ErrNoPeakModel is returned by RefinePeak while the registry serves no
// peak-refinement model (`prescient train --target memory --series ...`
// publishes one).
var ErrNoPeakModel = errors.New("the model registry serves no peak-refinement model")

// PeakForecast is a running job's refined GPU-memory peak over the next
// HorizonS seconds, in the unit of its series (bytes from the collector).
type PeakForecast struct {
	PeakSoFarBytes float64 `json:"peak_so_far_bytes"`
	P50Bytes       float64 `json:"p50_bytes"`
	P90Bytes       float64 `json:"p90_bytes"`
	HorizonS       float64 `json:"horizon_s"`
	ModelVersion   string  `json:"model_version"` // e.g. "peak:2"
}

// servedPeak is the loaded peak artifact; mu serialises its model, whose
// learners are not all safe for concurrent prediction.
type servedPeak struct {
	art *models.PeakArtifact
	mu  sync.Mutex
}

// RefinePeak forecasts the peak of a running job's GPU-memory series
// (times increasing, from its start to now) over the model's horizon,
// from the published peak model. A series shorter than the model's
// watching window is models.ErrTooLittleSeen; without a model,
// ErrNoPeakModel.
func (p *Predictor) RefinePeak(ctx context.Context, s datasets.Series) (PeakForecast, error) {
	if err := ctx.Err(); err != nil {
		return PeakForecast{}, err
	}
	sp := p.peak.Load()
	if sp == nil {
		return PeakForecast{}, ErrNoPeakModel
	}
	sp.mu.Lock()
	r, err := sp.art.Refine(s.Times, s.Values)
	sp.mu.Unlock()
	if err != nil {
		return PeakForecast{}, fmt.Errorf("predictor: series %s: %w", s.ID, err)
	}
	return PeakForecast{PeakSoFarBytes: r.PeakSoFar, P50Bytes: r.P50, P90Bytes: r.P90, HorizonS: sp.art.Window.Horizon.Seconds(),
		ModelVersion: string(models.TargetPeak) + ":" + strconv.Itoa(sp.art.Version)}, nil
}

// PeakVersion is the serving peak model's version; 0 when none.
func (p *Predictor) PeakVersion() int {
	if sp := p.peak.Load(); sp != nil {
		return sp.art.Version
	}
	return 0
}

// reloadPeak loads the peak target's current version when it changed; a
// version that fails to load is refused and the previous one keeps
// serving.
func (p *Predictor) reloadPeak() (bool, error) {
	v, err := p.reg.Current(models.TargetPeak)
	if errors.Is(err, training.ErrNoModel) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if sp := p.peak.Load(); sp != nil && sp.art.Version == v {
		return false, nil
	}
	art, err := p.reg.LoadPeak(v)
	if err != nil {
		p.log.Error("refused model version; keeping the previous one", "target", models.TargetPeak, "version", v, "err", err)
		return false, fmt.Errorf("predictor: %s version %d refused: %w", models.TargetPeak, v, err)
	}
	p.peak.Store(&servedPeak{art: art})
	p.log.Info("model loaded", "target", models.TargetPeak, "version", v, "model", art.Selected)
	return true, nil
}
