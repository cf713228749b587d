package control

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/datasets/datasetstest"
	"github.com/prescient-sched/prescient/models"
	"github.com/prescient-sched/prescient/service"
	"github.com/prescient-sched/prescient/training"
)

// servingOne is a forecaster that serves version 1 of duration.
type servingOne struct{ labelForecaster }

func (servingOne) ServingModels() map[string]int { return map[string]int{"duration": 1} }

func TestModelsRetrainAndRollback(t *testing.T) {
	philly := datasetstest.Philly(t)
	reg := training.Registry{Dir: t.TempDir()}
	for _, n := range []int{800, 1600} {
		rep, err := training.TrainAndPublish(context.Background(), training.Config{Target: models.TargetDuration,
			Learners: []string{models.RollingMedianName}, Seed: 1}, philly[:n], reg)
		if err != nil || !rep.Published {
			t.Fatalf("publish on %d jobs: %+v, %v", n, rep, err)
		}
	}
	ran := make(chan struct{})
	release := make(chan struct{})
	e := newEnv(t, fleetOf(1, 8), func(c *Config) {
		c.Registry = reg
		c.Forecaster = servingOne{labelForecaster{}} // version 1 serves: CURRENT's did not load
		c.Retrain = func(context.Context) error { close(ran); <-release; return nil }
	})
	ms, err := e.plane.Models(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 2 || ms[0].Version != 2 || !ms[0].Current || ms[1].Current || ms[0].Target != "duration" || len(ms[0].Metrics) == 0 {
		t.Fatalf("models %+v, want versions 2 (current) and 1 of duration with metrics", ms)
	}
	if ms[0].Serving || !ms[1].Serving {
		t.Errorf("serving %v, %v; want version 1 marked, which the forecaster serves", ms[0].Serving, ms[1].Serving)
	}
	back, err := e.plane.Rollback(e.ctx, "duration", 0)
	if err != nil || back.Version != 1 || !back.Current {
		t.Fatalf("Rollback = %+v, %v; want version 1 current", back, err)
	}
	if _, err := e.plane.Rollback(e.ctx, "duration", 9); !errors.Is(err, service.ErrNotFound) {
		t.Errorf("rollback to a missing version: %v, want ErrNotFound", err)
	}
	if _, err := e.plane.Rollback(e.ctx, "memory", 0); !errors.Is(err, service.ErrNotFound) {
		t.Errorf("rollback of a target without models: %v, want ErrNotFound", err)
	}
	if _, err := e.plane.Rollback(e.ctx, "vibes", 0); !errors.Is(err, service.ErrInvalid) {
		t.Errorf("rollback of an unknown target: %v, want ErrInvalid", err)
	}
	if err := e.plane.Retrain(e.ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ran:
	case <-time.After(5 * time.Second):
		t.Fatal("retraining did not start")
	}
	if err := e.plane.Retrain(e.ctx); !errors.Is(err, service.ErrConflict) {
		t.Errorf("a second retraining while one runs: %v, want ErrConflict", err)
	}
	close(release)
	none := newEnv(t, fleetOf(1, 8), nil)
	if ms, err := none.plane.Models(none.ctx); err != nil || len(ms) != 0 {
		t.Errorf("no registry: %+v, %v", ms, err)
	}
	if err := none.plane.Retrain(none.ctx); !errors.Is(err, service.ErrInvalid) {
		t.Errorf("retrain without a retrain function: %v, want ErrInvalid", err)
	}
}
