package predictor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/prescient-sched/prescient/models/idle"
	"github.com/prescient-sched/prescient/training"
)

// Idle serves idle-window forecasts from the registry's current idle model
// and reloads it when a new version is published. Without a published
// model it forecasts from the executor's knowledge alone.
type Idle struct {
	reg     training.Registry
	log     *slog.Logger
	current atomic.Pointer[idle.Artifact]
}

// NewIdle loads the current idle model, if there is one; a current version
// that fails to load is an error.
func NewIdle(reg training.Registry, log *slog.Logger) (*Idle, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Idle{reg: reg, log: log.With("component", "predictor")}
	if _, err := p.Reload(); err != nil {
		return nil, err
	}
	return p, nil
}

// Reload loads the current version when it changed; a version that fails
// to load is refused and the previous one keeps serving.
func (p *Idle) Reload() (bool, error) {
	v, err := p.reg.Current(idle.Target)
	if errors.Is(err, training.ErrNoModel) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if a := p.current.Load(); a != nil && a.Version == v {
		return false, nil
	}
	a, err := p.reg.LoadIdle(v)
	if err != nil {
		p.log.Error("refused idle model version; keeping the previous one", "version", v, "err", err)
		return false, fmt.Errorf("predictor: idle version %d refused: %w", v, err)
	}
	p.current.Store(a)
	p.log.Info("model loaded", "target", idle.Target, "version", v)
	return true, nil
}

// Version is the serving idle model's version, 0 when none.
func (p *Idle) Version() int {
	if a := p.current.Load(); a != nil {
		return a.Version
	}
	return 0
}

// IdleWindows forecasts, for the GPUs of in, how many will be idle at each
// step and each GPU's idle windows (idle.Forecaster.Forecast).
func (p *Idle) IdleWindows(ctx context.Context, in idle.Input) (idle.Forecast, error) {
	if err := ctx.Err(); err != nil {
		return idle.Forecast{}, err
	}
	f := idle.Forecaster{}
	if a := p.current.Load(); a != nil {
		f.Model = a.Model
	}
	return f.Forecast(in)
}

// Current is the serving model and its version (nil and 0 when none): one
// snapshot, for a caller that needs the model, its threshold and its
// version to agree.
func (p *Idle) Current() (*idle.Model, int) {
	if a := p.current.Load(); a != nil {
		return a.Model, a.Version
	}
	return nil, 0
}
