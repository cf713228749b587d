package controltest

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/prescient-sched/prescient/service"
)

// Models lists the versions by target, newest first.
func (f *Fake) Models(context.Context) ([]service.ModelVersion, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.failure("Models"); err != nil {
		return nil, err
	}
	out := slices.Clone(f.models)
	slices.SortFunc(out, func(a, b service.ModelVersion) int {
		return cmp.Or(cmp.Compare(a.Target, b.Target), cmp.Compare(b.Version, a.Version))
	})
	return out, nil
}

// Retrain publishes, for every target, a new current version with the
// current one's metrics and selection, as a retraining run that passed its
// gate would.
func (f *Fake) Retrain(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.failure("Retrain"); err != nil {
		return err
	}
	f.retrains++
	now := f.clock()
	for _, target := range f.targets() {
		cur, ok := f.current(target)
		if !ok {
			continue
		}
		next := f.models[cur]
		next.Version = f.latest(target) + 1
		next.CreatedAt = now
		f.models[cur].Current = false
		f.models = append(f.models, next)
	}
	return nil
}

// Rollback makes version to of target current; to 0 is the version below
// the current one.
func (f *Fake) Rollback(_ context.Context, target string, to int) (service.ModelVersion, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.failure("Rollback"); err != nil {
		return service.ModelVersion{}, err
	}
	if to < 0 {
		return service.ModelVersion{}, fmt.Errorf("to: %d is negative: %w", to, service.ErrInvalid)
	}
	cur, ok := f.current(target)
	if !ok {
		return service.ModelVersion{}, fmt.Errorf("model target %q: %w", target, service.ErrNotFound)
	}
	want := -1
	for i, m := range f.models {
		if m.Target != target {
			continue
		}
		if to > 0 && m.Version == to || to == 0 && m.Version < f.models[cur].Version && (want < 0 || m.Version > f.models[want].Version) {
			want = i
		}
	}
	switch {
	case want < 0 && to == 0:
		return service.ModelVersion{}, fmt.Errorf("model %s: no version before %d: %w", target, f.models[cur].Version, service.ErrConflict)
	case want < 0:
		return service.ModelVersion{}, fmt.Errorf("model %s version %d: %w", target, to, service.ErrNotFound)
	}
	f.models[cur].Current = false
	f.models[want].Current = true
	return f.models[want], nil
}

func (f *Fake) targets() []string {
	var ts []string
	for _, m := range f.models {
		if !slices.Contains(ts, m.Target) {
			ts = append(ts, m.Target)
		}
	}
	return ts
}

func (f *Fake) current(target string) (int, bool) {
	for i, m := range f.models {
		if m.Target == target && m.Current {
			return i, true
		}
	}
	return 0, false
}

func (f *Fake) latest(target string) int {
	v := 0
	for _, m := range f.models {
		if m.Target == target {
			v = max(v, m.Version)
		}
	}
	return v
}

// Mode is the current mode.
func (f *Fake) Mode() service.Mode {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mode
}

// SetMode changes the mode; an unknown mode is ErrInvalid.
func (f *Fake) SetMode(_ context.Context, m service.Mode) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.failure("SetMode"); err != nil {
		return err
	}
	if m != service.ModeAdvisor && m != service.ModeAutopilot {
		return fmt.Errorf("mode: %q is not advisor or autopilot: %w", m, service.ErrInvalid)
	}
	f.mode = m
	return nil
}
