package control

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/prescient-sched/prescient/models"
	"github.com/prescient-sched/prescient/models/idle"
	"github.com/prescient-sched/prescient/service"
	"github.com/prescient-sched/prescient/training"
)

// ModelServer is implemented by a forecaster that serves the registry's
// versions: by target, the version it serves, which is not CURRENT's
// when that one did not load. Models marks them serving.
type ModelServer interface {
	ServingModels() map[string]int
}

// modelTargets are the registry's targets the models endpoints list.
var modelTargets = []models.Target{models.TargetDuration, models.TargetMemory, models.TargetPeak, idle.Target}

// Models implements Service: every published version of every target,
// newest first within a target.
func (p *Plane) Models(_ context.Context) ([]service.ModelVersion, error) {
	if p.cfg.Registry.Dir == "" {
		return nil, nil
	}
	var serving map[string]int
	if ms, ok := p.cfg.Forecaster.(ModelServer); ok {
		serving = ms.ServingModels()
	}
	var out []service.ModelVersion
	for _, t := range modelTargets {
		ms, err := p.cfg.Registry.List(t)
		if err != nil {
			return nil, fmt.Errorf("models: %w", err)
		}
		for _, m := range ms {
			mv := modelVersion(m)
			mv.Serving = serving[mv.Target] == mv.Version
			out = append(out, mv)
		}
	}
	return out, nil
}

func modelVersion(m training.Manifest) service.ModelVersion {
	return service.ModelVersion{Target: string(m.Target), Version: m.Version, Current: m.Current, CreatedAt: m.CreatedAt,
		Selected: m.Selected, Metrics: m.Metrics, DataFrom: m.DataFrom, DataUntil: m.DataUntil}
}

// Retrain implements Service: it starts cfg.Retrain in the background; a
// run already going gives ErrConflict.
func (p *Plane) Retrain(ctx context.Context) error {
	if p.cfg.Retrain == nil {
		return fmt.Errorf("retraining is not configured: %w", service.ErrInvalid)
	}
	p.mu.Lock()
	if p.retraining {
		p.mu.Unlock()
		return fmt.Errorf("a retraining run is going: %w", service.ErrConflict)
	}
	p.retraining = true
	p.mu.Unlock()
	go func() {
		defer func() {
			p.mu.Lock()
			p.retraining = false
			p.mu.Unlock()
		}()
		p.log.Info("retraining started")
		if err := p.cfg.Retrain(context.WithoutCancel(ctx)); err != nil {
			p.log.Error("retraining failed", "error", err)
			return
		}
		p.log.Info("retraining done")
	}()
	return nil
}

// Rollback implements Service.
func (p *Plane) Rollback(_ context.Context, target string, to int) (service.ModelVersion, error) {
	t := models.Target(target)
	if !slices.Contains(modelTargets, t) {
		return service.ModelVersion{}, fmt.Errorf("target %q: want one of duration, memory, peak, idle: %w", target, service.ErrInvalid)
	}
	if to < 0 {
		return service.ModelVersion{}, fmt.Errorf("version %d is negative: %w", to, service.ErrInvalid)
	}
	if p.cfg.Registry.Dir == "" {
		return service.ModelVersion{}, fmt.Errorf("no model registry: %w", service.ErrNotFound)
	}
	if to > 0 {
		vs, err := p.cfg.Registry.Versions(t)
		if err != nil {
			return service.ModelVersion{}, fmt.Errorf("rollback: %w", err)
		}
		if !slices.Contains(vs, to) {
			return service.ModelVersion{}, fmt.Errorf("%s version %d is not published: %w", t, to, service.ErrNotFound)
		}
	}
	v, err := p.cfg.Registry.Rollback(t, to)
	if errors.Is(err, training.ErrNoModel) {
		return service.ModelVersion{}, fmt.Errorf("rollback %s: %w: %w", t, service.ErrNotFound, err)
	}
	if err != nil {
		return service.ModelVersion{}, fmt.Errorf("rollback %s: %w: %w", t, service.ErrConflict, err)
	}
	ms, err := p.cfg.Registry.List(t)
	if err != nil {
		return service.ModelVersion{}, fmt.Errorf("rollback: %w", err)
	}
	for _, m := range ms {
		if m.Version == v {
			p.log.Info("model rolled back", "target", t, "version", v)
			return modelVersion(m), nil
		}
	}
	return service.ModelVersion{}, fmt.Errorf("rollback %s: version %d vanished", t, v)
}
