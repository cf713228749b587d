package training_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/prescient-sched/prescient/datasets"
	"github.com/prescient-sched/prescient/internal/testenv"
	"github.com/prescient-sched/prescient/models/idle"
	"github.com/prescient-sched/prescient/training"
)

func TestTrainIdle(t *testing.T) {
	ctx := context.Background()
	t.Run("utilization series: pools of unseen containers, moving-average baseline, per-device windows", func(t *testing.T) {
		series, err := datasets.ReadSeries("genai:" + testenv.Dataset(t, "alibaba-genai", "pod_gpu_duty_cycle_anon.csv.gz"))
		if err != nil {
			t.Fatal(err)
		}
		reg := training.Registry{Dir: t.TempDir()}
		rep, err := training.TrainIdle(ctx, training.DefaultIdleConfig(), series, reg)
		if err != nil {
			t.Fatal(err)
		}
		if rep.ModelVersion != 1 || len(rep.ScoredSeries) < 10 || len(rep.Horizons) != 12 || rep.Windows.UnitPrecision == nil {
			t.Fatalf("report %+v", rep)
		}
		for _, h := range rep.Horizons {
			if h.MAEMovingAverage == nil || h.MAESeasonal != nil {
				t.Fatalf("a series of 23 hours has no seasonal baseline: %+v", h)
			}
		}
		art, err := reg.LoadCurrentIdle()
		if err != nil || art.Model.Survival == nil {
			t.Fatalf("%v", err)
		}
		for _, id := range art.Series {
			for _, s := range rep.ScoredSeries {
				if id == s {
					t.Fatalf("series %s both trained on and scored", id)
				}
			}
		}
		if rep.Gate != "no serving model" {
			t.Errorf("first training's gate %q", rep.Gate)
		}
		// The gate: a network that barely learned (a learning rate of
		// 1e-9, one epoch) scores worse than the serving version on the
		// same held-out containers and is not published.
		bad := training.DefaultIdleConfig()
		bad.Model.MLP.LearnRate, bad.Model.MLP.Epochs = 1e-9, 1
		rep2, err := training.TrainIdle(ctx, bad, series, reg)
		if err != nil {
			t.Fatal(err)
		}
		if cur, _ := reg.Current(idle.Target); *rep2.Published || cur != 1 || !strings.HasPrefix(rep2.Gate, "refused: ") {
			t.Fatalf("an untrained network: published %v, current version %d, gate %q; want refused", *rep2.Published, cur, rep2.Gate)
		}
	})
	t.Run("a single series is split in time", func(t *testing.T) {
		all, err := datasets.ReadSeries("philly-nodes:" + testenv.Dataset(t, "philly", "philly_node_sequence.csv"))
		if err != nil {
			t.Fatal(err)
		}
		s, n := all[0], 8*1440
		s = datasets.Series{ID: s.ID, Times: s.Times[:n], Values: s.Values[:n], Capacity: s.Capacity[:n]}
		reg := training.Registry{Dir: t.TempDir()}
		rep, err := training.TrainIdle(ctx, training.DefaultIdleConfig(), []datasets.Series{s}, reg)
		if err != nil {
			t.Fatal(err)
		}
		art, err := reg.LoadCurrentIdle()
		if err != nil {
			t.Fatal(err)
		}
		if art.TrainedUntil.IsZero() || rep.EvaluatedFrom.Before(art.TrainedUntil) || len(rep.ScoredSeries) != 1 {
			t.Fatalf("trained until %s, scored from %s", art.TrainedUntil, rep.EvaluatedFrom)
		}
	})
	t.Run("count and utilization series do not mix", func(t *testing.T) {
		s := datasets.Series{ID: "a"}
		c := datasets.Series{ID: "b", Capacity: []float64{}}
		_, err := training.TrainIdle(ctx, training.DefaultIdleConfig(), []datasets.Series{s, c}, training.Registry{Dir: t.TempDir()})
		if err == nil || !strings.Contains(err.Error(), "use one kind") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("no series", func(t *testing.T) {
		_, err := training.TrainIdle(ctx, training.DefaultIdleConfig(), nil, training.Registry{Dir: t.TempDir()})
		if !errors.Is(err, training.ErrNoSeriesData) {
			t.Fatalf("err = %v", err)
		}
	})
}
