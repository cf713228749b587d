package training_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/datasets"
	"github.com/prescient-sched/prescient/datasets/datasetstest"
	"github.com/prescient-sched/prescient/models"
	"github.com/prescient-sched/prescient/training"
)

// quick leaves out the forest, the slowest learner, where a test is about
// the registry rather than the models.
var quick = []string{models.GlobalMedianName, models.RollingMedianName, models.MLPName}

func TestTrainOnPhillyBeatsTheGlobalMedianOnTheLaterWindow(t *testing.T) {
	jobs := datasetstest.Philly(t)[:6000]
	reg := training.Registry{Dir: t.TempDir()}
	rep, err := training.TrainAndPublish(context.Background(), training.Config{Target: models.TargetDuration, Seed: 1, NoRefit: true}, jobs, reg)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Published || rep.ModelVersion != 1 {
		t.Fatalf("first run not published as version 1: %+v", rep)
	}
	global := rep.Baselines[models.GlobalMedianName]["mae_log"]
	for name, m := range rep.Models {
		if m["mae_log"] >= global {
			t.Errorf("%s: mae_log %.3f does not beat the global median's %.3f", name, m["mae_log"], global)
		}
		if m["fit_s"] <= 0 {
			t.Errorf("%s: fit_s missing", name)
		}
		for _, k := range []string{"mae_s", "median_ae_s", "mae_log", "spearman", "p90_coverage"} {
			if _, ok := m[k]; !ok {
				t.Errorf("%s: report lacks %s", name, k)
			}
		}
	}
	learned, baselines := 0, 0
	for _, l := range models.Learners() {
		if l.Baseline {
			baselines++
		} else {
			learned++
		}
	}
	if len(rep.Models) != learned || len(rep.Baselines) != baselines {
		t.Fatalf("report has models %v and baselines %v", rep.Models, rep.Baselines)
	}

	// Evaluation on the weeks after: jobs before serve only as history.
	later := datasetstest.Philly(t)[:8000]
	from := later[6500].SubmitTime
	art, err := reg.LoadCurrent(models.TargetDuration)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := training.Evaluate(context.Background(), art, later, from, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if ev.EvaluatedRows != 1500 || ev.ModelVersion != 1 || ev.Models[ev.Selected] == nil && ev.Baselines[ev.Selected] == nil {
		t.Fatalf("evaluation report: %+v", ev)
	}
	if _, err := training.Evaluate(context.Background(), art, later, later[len(later)-1].SubmitTime.Add(time.Hour), time.Time{}); !errors.Is(err, training.ErrNoData) {
		t.Fatalf("evaluating an empty window: err = %v, want ErrNoData", err)
	}
}

func TestRegistry(t *testing.T) {
	jobs := datasetstest.Philly(t)[:3000]
	ctx := context.Background()
	cfg := training.Config{Target: models.TargetDuration, Learners: quick, Seed: 1}

	t.Run("the gate refuses a model worse than the serving one on newer jobs", func(t *testing.T) {
		reg := training.Registry{Dir: t.TempDir()}
		if _, err := training.TrainAndPublish(ctx, cfg, jobs[:2500], reg); err != nil {
			t.Fatal(err)
		}
		worse := cfg
		worse.Learners = []string{models.GlobalMedianName}
		rep, err := training.TrainAndPublish(ctx, worse, jobs, reg)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Published || !strings.HasPrefix(rep.Gate, "refused") || rep.ModelVersion != 1 {
			t.Fatalf("worse model not refused: %+v", rep)
		}
		if v, _ := reg.Current(models.TargetDuration); v != 1 {
			t.Fatalf("current = %d, want 1", v)
		}
	})
	t.Run("retraining on the same jobs publishes nothing: no unseen jobs to compare on", func(t *testing.T) {
		reg := training.Registry{Dir: t.TempDir()}
		if _, err := training.TrainAndPublish(ctx, cfg, jobs, reg); err != nil {
			t.Fatal(err)
		}
		rep, err := training.TrainAndPublish(ctx, cfg, jobs, reg)
		if err != nil || rep.Published || !strings.Contains(rep.Gate, "too few jobs") {
			t.Fatalf("%v: %+v", err, rep)
		}
	})
	t.Run("publishing keeps the last N versions and rollback serves an older one", func(t *testing.T) {
		reg := training.Registry{Dir: t.TempDir(), Keep: 2}
		// The rolling median forecasts the same for every version: each
		// new one ties the serving one and passes the gate.
		same := cfg
		same.Learners = []string{models.RollingMedianName}
		for _, n := range []int{2000, 2500, 3000} {
			rep, err := training.TrainAndPublish(ctx, same, jobs[:n], reg)
			if err != nil {
				t.Fatal(err)
			}
			if !rep.Published {
				t.Fatalf("an equal model was refused: %s", rep.Gate)
			}
		}
		vs, _ := reg.Versions(models.TargetDuration)
		if !slices.Equal(vs, []int{2, 3}) {
			t.Fatalf("versions %v, want [2 3]", vs)
		}
		list, err := reg.List(models.TargetDuration)
		if err != nil || len(list) != 2 || !list[0].Current || list[0].Version != 3 || len(list[0].Features) == 0 || list[0].Metrics[list[0].Selected] == nil {
			t.Fatalf("list: %v %+v", err, list)
		}
		if v, err := reg.Rollback(models.TargetDuration, 0); err != nil || v != 2 {
			t.Fatalf("rollback = %d, %v; want 2", v, err)
		}
		if _, err := reg.Rollback(models.TargetDuration, 1); err == nil {
			t.Fatal("rollback to a pruned version succeeded")
		}
		if _, err := reg.Rollback(models.TargetDuration, 0); err == nil {
			t.Fatal("rollback past the oldest version succeeded")
		}
	})
	t.Run("a corrupt serving artifact is refused at load and does not block publishing", func(t *testing.T) {
		reg := training.Registry{Dir: t.TempDir()}
		if _, err := training.TrainAndPublish(ctx, cfg, jobs, reg); err != nil {
			t.Fatal(err)
		}
		path := reg.ArtifactPath(models.TargetDuration, 1)
		if err := os.WriteFile(path, []byte("PRESCIENT-MODEL\nnot really"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := reg.LoadCurrent(models.TargetDuration)
		if !errors.Is(err, models.ErrCorruptArtifact) || !strings.Contains(err.Error(), filepath.Base(path)) {
			t.Fatalf("err = %v, want ErrCorruptArtifact naming the file", err)
		}
		rep, err := training.TrainAndPublish(ctx, cfg, jobs, reg)
		if err != nil || !rep.Published || rep.ModelVersion != 2 {
			t.Fatalf("publish after a corrupt version: %v %+v", err, rep)
		}
	})
	t.Run("an empty registry has no current model", func(t *testing.T) {
		if _, err := (training.Registry{Dir: t.TempDir()}).LoadCurrent(models.TargetMemory); !errors.Is(err, training.ErrNoModel) {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestTrainMemoryFromLabelledHistory(t *testing.T) {
	cfg := datasets.DefaultGenerateConfig()
	cfg.Jobs = 4000
	jobs, err := datasets.Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	reg := training.Registry{Dir: t.TempDir()}
	rep, err := training.TrainAndPublish(context.Background(), training.Config{Target: models.TargetMemory, Learners: quick, Seed: 1}, jobs, reg)
	if err != nil {
		t.Fatal(err)
	}
	global := rep.Baselines[models.GlobalMedianName]
	best := rep.Models[models.MLPName]
	if best == nil || best["pinball_p90_log"] >= global["pinball_p90_log"] || best["mae_log"] >= global["mae_log"] {
		t.Fatalf("memory model does not beat the global median: %v vs %v", best, global)
	}
	if _, ok := best["mae_bytes"]; !ok {
		t.Fatalf("memory report lacks mae_bytes: %v", best)
	}

	t.Run("history without memory labels is not enough to train", func(t *testing.T) {
		cfg.LabelMemory = false
		unlabelled, _ := datasets.Generate(cfg)
		_, err := training.TrainAndPublish(context.Background(), training.Config{Target: models.TargetMemory, Learners: quick}, unlabelled, reg)
		if !errors.Is(err, training.ErrNoData) {
			t.Fatalf("err = %v, want ErrNoData", err)
		}
	})
}

func TestEveryRunsAtOnceThenOnScheduleUntilCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var runs atomic.Int32
	done := make(chan error)
	go func() {
		done <- training.Every(ctx, 10*time.Millisecond, nil, func(context.Context) error {
			if runs.Add(1) == 3 {
				cancel()
			}
			return errors.New("a failed run does not stop the schedule")
		})
	}()
	select {
	case err := <-done:
		if err != nil || runs.Load() != 3 {
			t.Fatalf("err = %v after %d runs", err, runs.Load())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("schedule did not stop")
	}
}

func TestTrainRejectsBadConfig(t *testing.T) {
	for name, cfg := range map[string]training.Config{
		"an unknown target":      {Target: "latency"},
		"an unknown learner":     {Target: models.TargetDuration, Learners: []string{"xgboost"}},
		"a holdout fraction ≥ 1": {Target: models.TargetDuration, HoldoutFraction: 1},
	} {
		t.Run(name+" is refused", func(t *testing.T) {
			if _, _, err := training.Train(context.Background(), cfg, nil); err == nil {
				t.Fatal("no error")
			}
		})
	}
}

// BenchmarkTrainPhilly fits each learner on the Philly table before
// 2017-11-10 (the evaluation protocol's training set), one core.
func BenchmarkTrainPhilly(b *testing.B) {
	philly := datasetstest.Philly(b)
	until := time.Date(2017, 11, 10, 0, 0, 0, 0, time.UTC)
	for _, l := range models.Learners() {
		b.Run(l.Name, func(b *testing.B) {
			for b.Loop() {
				cfg := training.Config{Target: models.TargetDuration, Until: until, Learners: []string{l.Name}, Seed: 1}
				if _, _, err := training.Train(context.Background(), cfg, philly); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
