package main

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/control"
	"github.com/prescient-sched/prescient/control/telemetry"
	"github.com/prescient-sched/prescient/datasets"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/models"
	"github.com/prescient-sched/prescient/models/idle"
	"github.com/prescient-sched/prescient/predictor"
	"github.com/prescient-sched/prescient/training"
)

// Until a duration model is published, the control plane plans with these
// forecasts (and says so in each forecast's source).
const (
	defaultP50 = time.Hour
	defaultP90 = 4 * time.Hour
	// retryModelsEvery is how often an empty registry is looked at again.
	retryModelsEvery = 30 * time.Second
	// pollModelsEvery is how often the registry's CURRENT pointers are
	// read while models serve, so that a version made current by hand,
	// by a rollback or by another process serves within this long: a
	// read of a few small files.
	pollModelsEvery = 5 * time.Second
)

// liveForecaster serves the registry's published models to the control
// plane and picks up new versions (retraining, rollback, CURRENT changed
// on disk: it reads the CURRENT pointers at most every pollModelsEvery);
// a current version that does not load is logged and the newest version
// that does serves instead. Before the first duration model is published
// it answers defaultP50/defaultP90.
type liveForecaster struct {
	reg training.Registry
	log *slog.Logger
	// poll is how often CURRENT is read while models serve.
	poll time.Duration

	mu      sync.Mutex
	p       *predictor.Predictor
	lastTry time.Time
}

var (
	_ executor.Forecaster   = (*liveForecaster)(nil)
	_ executor.Observer     = (*liveForecaster)(nil)
	_ telemetry.PeakRefiner = (*liveForecaster)(nil)
	_ control.ModelServer   = (*liveForecaster)(nil)
)

func newLiveForecaster(reg training.Registry, log *slog.Logger) *liveForecaster {
	f := &liveForecaster{reg: reg, log: log.With("component", "forecasts"), poll: pollModelsEvery}
	f.reload()
	return f
}

// reload loads what the registry publishes now.
func (f *liveForecaster) reload() {
	if f.reg.Dir == "" {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastTry = time.Now()
	if f.p != nil {
		if _, err := f.p.Reload(); err != nil {
			f.log.Warn("a published model failed to load; the newest one that loads serves", "versions", f.p.Versions(), "err", err)
		}
		return
	}
	p, err := predictor.New(f.reg, f.log)
	switch {
	case errors.Is(err, training.ErrNoModel):
		f.log.Info("no model published yet: forecasts are the defaults", "registry", f.reg.Dir, "p50", defaultP50, "p90", defaultP90)
	case err != nil:
		f.log.Warn("model registry unreadable: forecasts are the defaults", "registry", f.reg.Dir, "err", err)
	default:
		f.p = p
		f.log.Info("serving models", "versions", p.Versions())
	}
}

// current is the predictor serving, reloaded first when the registry is
// due a look: every poll while models serve, every retryModelsEvery
// while none does.
func (f *liveForecaster) current() *predictor.Predictor {
	f.mu.Lock()
	every := f.poll
	if f.p == nil {
		every = retryModelsEvery
	}
	p, stale := f.p, time.Since(f.lastTry) > every
	f.mu.Unlock()
	if stale {
		f.reload()
		f.mu.Lock()
		p = f.p
		f.mu.Unlock()
	}
	return p
}

// ServingModels implements control.ModelServer: the duration, memory and
// peak versions that serve forecasts now.
func (f *liveForecaster) ServingModels() map[string]int {
	p := f.current()
	if p == nil {
		return nil
	}
	out := map[string]int{}
	for _, t := range []models.Target{models.TargetDuration, models.TargetMemory, models.TargetPeak} {
		if v := p.Serving(t); v > 0 {
			out[string(t)] = v
		}
	}
	return out
}

// Forecast implements executor.Forecaster.
func (f *liveForecaster) Forecast(ctx context.Context, jobs []*cluster.Job) ([]executor.Forecast, error) {
	if p := f.current(); p != nil {
		fc, err := predictor.Adapter{P: p}.Forecast(ctx, jobs)
		if !errors.Is(err, predictor.ErrNoDurationModel) {
			return fc, err
		}
	}
	out := make([]executor.Forecast, len(jobs))
	for i, j := range jobs {
		out[i] = executor.Forecast{Job: j.ID, DurationP50: defaultP50, DurationP90: defaultP90, Source: "default (no duration model published)"}
	}
	return out, nil
}

// Observe implements executor.Observer: the serving models' histories hear
// of every job that ends.
func (f *liveForecaster) Observe(j cluster.Job) {
	if p := f.current(); p != nil {
		p.Observe(j)
	}
}

// RefinePeak implements telemetry.PeakRefiner with the registry's published
// peak model; predictor.ErrNoPeakModel until one is published.
func (f *liveForecaster) RefinePeak(ctx context.Context, s datasets.Series) (predictor.PeakForecast, error) {
	if p := f.current(); p != nil {
		return p.RefinePeak(ctx, s)
	}
	return predictor.PeakForecast{}, predictor.ErrNoPeakModel
}

// durationLabel reads the label duration_s (seconds) of a job.
func durationLabel(labels map[string]string) (time.Duration, bool) {
	v, ok := labels["duration_s"]
	if !ok {
		return 0, false
	}
	s, err := strconv.ParseFloat(v, 64)
	if err != nil || s <= 0 || s > 365*24*3600 {
		return 0, false
	}
	return time.Duration(s * float64(time.Second)), true
}

// liveIdle serves the registry's published idle model to the control
// plane's idle forecasts and looks for a new version (retraining,
// rollback) at most every retryModelsEvery; without one, forecasts come
// from the running jobs and the queue alone.
type liveIdle struct {
	reg training.Registry
	log *slog.Logger

	mu      sync.Mutex
	p       *predictor.Idle
	lastTry time.Time
}

var _ telemetry.IdleForecaster = (*liveIdle)(nil)

func newLiveIdle(reg training.Registry, log *slog.Logger) *liveIdle {
	l := &liveIdle{reg: reg, log: log.With("component", "forecasts")}
	l.current()
	return l
}

func (l *liveIdle) current() *predictor.Idle {
	l.mu.Lock()
	defer l.mu.Unlock()
	if time.Since(l.lastTry) < retryModelsEvery {
		return l.p
	}
	l.lastTry = time.Now()
	if l.p == nil {
		p, err := predictor.NewIdle(l.reg, l.log)
		if err != nil {
			l.log.Warn("idle model unreadable: idle forecasts rest on the running jobs and the queue", "registry", l.reg.Dir, "err", err)
			return nil
		}
		l.p = p
		return p
	}
	if _, err := l.p.Reload(); err != nil {
		l.log.Warn("a published idle model failed to load; the previous one keeps serving", "err", err)
	}
	return l.p
}

// Current implements telemetry.IdleForecaster.
func (l *liveIdle) Current() (*idle.Model, int) {
	if p := l.current(); p != nil {
		return p.Current()
	}
	return nil, 0
}
