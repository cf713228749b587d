package models_test

import (
	"bytes"
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/datasets"
	"github.com/prescient-sched/prescient/internal/testenv"
	"github.com/prescient-sched/prescient/models"
)

// synthetic returns causal feature rows and log targets of a seeded
// synthetic history, split in time: the first 80% to fit, the rest to score.
func synthetic(t testing.TB, target models.Target, n int) (fc models.FeatureConfig, Xfit [][]float64, yfit []float64, Xtest [][]float64, ytest []float64) {
	t.Helper()
	cfg := datasets.DefaultGenerateConfig()
	cfg.Jobs, cfg.Seed = n, 7
	jobs, err := datasets.Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	fc = models.DefaultFeatureConfig(target)
	var labelled []cluster.Job
	var y []float64
	for i := range jobs {
		if v, ok := target.Label(&jobs[i]); ok {
			labelled = append(labelled, jobs[i])
			y = append(y, models.Log(v))
		}
	}
	X := fc.Rows(jobs, labelled)
	k := len(X) * 8 / 10
	return fc, X[:k], y[:k], X[k:], y[k:]
}

func maeLog(t *testing.T, m models.Regressor, X [][]float64, y []float64) float64 {
	t.Helper()
	q, err := m.PredictQuantiles(X, []float64{0.5})
	if err != nil {
		t.Fatal(err)
	}
	s := 0.0
	for i := range q {
		s += math.Abs(q[i][0] - y[i])
	}
	return s / float64(len(q))
}

// fastLearner builds a learner small enough for a unit test.
func fastLearner(l models.Learner, fc models.FeatureConfig) models.Model {
	o := models.Options{Features: fc.FeatureNames(), Seed: 1}
	switch l.Name {
	case models.ForestName:
		c := models.DefaultForestConfig()
		c.Trees, c.SampleRows = 8, 1500
		return models.NewForest(c, o)
	}
	return l.New(o)
}

// philly returns causal rows of the first n Philly jobs, split in time:
// the first 80% to fit, the rest to score.
func philly(t testing.TB, n int) (fc models.FeatureConfig, Xfit [][]float64, yfit []float64, Xtest [][]float64, ytest []float64) {
	t.Helper()
	return phillyRows(t, n, true)
}

// phillyRows is philly with the given FeatureConfig.Relative.
func phillyRows(t testing.TB, n int, relative bool) (fc models.FeatureConfig, Xfit [][]float64, yfit []float64, Xtest [][]float64, ytest []float64) {
	t.Helper()
	res, err := datasets.ReadTrace("philly:"+testenv.Dataset(t, "philly", "philly_jobs.csv"), datasets.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	jobs := res.Jobs[:n]
	fc = models.DefaultFeatureConfig(models.TargetDuration)
	fc.Relative = relative
	X := fc.Rows(jobs, jobs)
	y := make([]float64, len(jobs))
	for i := range jobs {
		v, _ := fc.Target.Label(&jobs[i])
		y[i] = models.Log(v)
	}
	k := n * 8 / 10
	return fc, X[:k], y[:k], X[k:], y[k:]
}

func TestEveryLearner(t *testing.T) {
	fc, Xfit, yfit, Xtest, ytest := philly(t, 5000)
	global := &models.GlobalMedian{}
	if err := global.Fit(context.Background(), Xfit, yfit); err != nil {
		t.Fatal(err)
	}
	globalErr := maeLog(t, global, Xtest, ytest)
	qs := []float64{0.1, 0.5, 0.9}
	for _, l := range models.Learners() {
		t.Run(l.Name+" predicts non-decreasing quantiles and survives a round trip", func(t *testing.T) {
			m := fastLearner(l, fc)
			if err := m.Fit(context.Background(), Xfit, yfit); err != nil {
				t.Fatal(err)
			}
			q, err := m.PredictQuantiles(Xtest, qs)
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range q {
				if !slices.IsSorted(r) || math.IsNaN(r[0]) {
					t.Fatalf("row %d: quantiles %v are not non-decreasing", i, r)
				}
			}
			data, err := m.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			back := l.New(models.Options{Features: fc.FeatureNames()})
			if err := back.UnmarshalBinary(data); err != nil {
				t.Fatal(err)
			}
			q2, err := back.PredictQuantiles(Xtest, qs)
			if err != nil {
				t.Fatal(err)
			}
			for i := range q {
				if !slices.Equal(q[i], q2[i]) {
					t.Fatalf("row %d: %v before the round trip, %v after", i, q[i], q2[i])
				}
			}
		})
		if l.Baseline && l.Name == models.GlobalMedianName {
			continue
		}
		t.Run(l.Name+" beats the global median on later Philly jobs", func(t *testing.T) {
			m := fastLearner(l, fc)
			if err := m.Fit(context.Background(), Xfit, yfit); err != nil {
				t.Fatal(err)
			}
			if got := maeLog(t, m, Xtest, ytest); got >= globalErr {
				t.Fatalf("mae_log %.3f, global median %.3f", got, globalErr)
			}
		})
	}
}

func TestLearnersRejectBadInput(t *testing.T) {
	fc := models.DefaultFeatureConfig(models.TargetDuration)
	for _, l := range models.Learners() {
		m := l.New(models.Options{Features: fc.FeatureNames()})
		t.Run(l.Name+" refuses to predict before it is fitted", func(t *testing.T) {
			if _, err := m.PredictQuantiles([][]float64{make([]float64, fc.NumFeatures())}, []float64{0.5}); !errors.Is(err, models.ErrNotFitted) {
				t.Fatalf("err = %v, want ErrNotFitted", err)
			}
		})
		t.Run(l.Name+" refuses rows and targets of different lengths", func(t *testing.T) {
			if err := m.Fit(context.Background(), [][]float64{make([]float64, fc.NumFeatures())}, nil); !errors.Is(err, models.ErrShape) {
				t.Fatalf("err = %v, want ErrShape", err)
			}
		})
		t.Run(l.Name+" refuses garbage instead of a model", func(t *testing.T) {
			if err := m.UnmarshalBinary([]byte("garbage")); err == nil {
				t.Fatal("no error")
			}
		})
	}
}

func TestForestRefusesADamagedTree(t *testing.T) {
	fc, Xfit, yfit, _, _ := synthetic(t, models.TargetDuration, 800)
	c := models.DefaultForestConfig()
	c.Trees, c.SampleRows = 2, 400
	f := models.NewForest(c, models.Options{Features: fc.FeatureNames()})
	if err := f.Fit(context.Background(), Xfit, yfit); err != nil {
		t.Fatal(err)
	}
	f.Trees[0].Left[0] = 0 // a cycle
	data, err := f.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if err := models.NewForest(c, models.Options{}).UnmarshalBinary(data); err == nil {
		t.Fatal("a tree whose root points at itself was accepted")
	}
}

func TestArtifact(t *testing.T) {
	art := testArtifact(t)
	var buf bytes.Buffer
	if err := models.Encode(&buf, art); err != nil {
		t.Fatal(err)
	}
	good := buf.Bytes()
	t.Run("round trip keeps the models and the history", func(t *testing.T) {
		back, err := models.Decode(bytes.NewReader(good), "v1.model")
		if err != nil {
			t.Fatal(err)
		}
		if back.Selected != art.Selected || back.History.Observed() != art.History.Observed() || len(back.Models) != len(art.Models) {
			t.Fatalf("decoded artifact differs: %+v", back)
		}
	})
	t.Run("a flipped byte is refused as corrupt, naming the file", func(t *testing.T) {
		bad := slices.Clone(good)
		bad[len(bad)/2] ^= 0xff
		_, err := models.Decode(bytes.NewReader(bad), "v1.model")
		if !errors.Is(err, models.ErrCorruptArtifact) || !bytes.Contains([]byte(err.Error()), []byte("v1.model")) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("a truncated file is refused as corrupt", func(t *testing.T) {
		if _, err := models.Decode(bytes.NewReader(good[:len(good)-10]), "x"); !errors.Is(err, models.ErrCorruptArtifact) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("another format version is refused as incompatible", func(t *testing.T) {
		old := *art
		old.Format = models.ArtifactFormat + 1
		var b bytes.Buffer
		if err := models.Encode(&b, &old); err != nil {
			t.Fatal(err)
		}
		if _, err := models.Decode(&b, "x"); !errors.Is(err, models.ErrIncompatibleArtifact) {
			t.Fatalf("err = %v", err)
		}
	})
}

// testArtifact is a small artifact with the two baselines.
func testArtifact(t testing.TB) *models.Artifact {
	fc, Xfit, yfit, _, _ := synthetic(t, models.TargetDuration, 400)
	art := &models.Artifact{Format: models.ArtifactFormat, Target: fc.Target, CreatedAt: time.Now().UTC(),
		Features: fc, FeatureNames: fc.FeatureNames(), History: models.NewHistory(fc),
		Selected: models.RollingMedianName, Models: map[string][]byte{}}
	p := fc.NumFeatures()
	art.Importance, art.Center, art.Scale = make([]float64, p), make([]float64, p), slices.Repeat([]float64{1}, p)
	for _, name := range []string{models.GlobalMedianName, models.RollingMedianName} {
		l, _ := models.LookupLearner(name)
		m := l.New(models.Options{Features: art.FeatureNames})
		if err := m.Fit(context.Background(), Xfit, yfit); err != nil {
			t.Fatal(err)
		}
		data, err := m.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		art.Models[name] = data
	}
	art.History.Observe(&cluster.Job{ID: "x", State: cluster.StateSucceeded, SubmitTime: t0, Outcome: cluster.Outcome{RunTime: time.Minute}})
	return art
}

func FuzzDecode(f *testing.F) {
	var buf bytes.Buffer
	if err := models.Encode(&buf, testArtifact(f)); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add([]byte("PRESCIENT-MODEL\n\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x10"))
	f.Fuzz(func(t *testing.T, data []byte) {
		art, err := models.Decode(bytes.NewReader(data), "fuzz")
		if err != nil {
			return
		}
		// What decodes must serve without panicking.
		m, err := art.Model(art.Selected)
		if err != nil {
			t.Fatal(err)
		}
		j := cluster.Job{ID: "q", SubmitTime: t0}
		row := art.History.Features(nil, &j)
		if _, err := m.PredictQuantiles([][]float64{row}, []float64{0.5, 0.9}); err != nil {
			t.Fatal(err)
		}
	})
}

func BenchmarkFit(b *testing.B) {
	fc, Xfit, yfit, _, _ := synthetic(b, models.TargetDuration, 12000)
	for _, l := range models.Learners() {
		b.Run(l.Name+"/rows=9600", func(b *testing.B) {
			for b.Loop() {
				m := l.New(models.Options{Features: fc.FeatureNames(), Seed: 1})
				if err := m.Fit(context.Background(), Xfit, yfit); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkPredict10k(b *testing.B) {
	fc, Xfit, yfit, _, _ := synthetic(b, models.TargetDuration, 12000)
	X := make([][]float64, 10000)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range X {
		X[i] = Xfit[rng.IntN(len(Xfit))]
	}
	for _, l := range models.Learners() {
		m := l.New(models.Options{Features: fc.FeatureNames(), Seed: 1})
		if err := m.Fit(context.Background(), Xfit, yfit); err != nil {
			b.Fatal(err)
		}
		b.Run(l.Name, func(b *testing.B) {
			for b.Loop() {
				if _, err := m.PredictQuantiles(X, []float64{0.5, 0.9}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkFeatureRows(b *testing.B) {
	cfg := datasets.DefaultGenerateConfig()
	cfg.Jobs = 74167
	jobs, err := datasets.Generate(cfg)
	if err != nil {
		b.Fatal(err)
	}
	fc := models.DefaultFeatureConfig(models.TargetDuration)
	for b.Loop() {
		fc.Rows(jobs, jobs)
	}
}

// One seed grows one forest: golearn lists attributes and grows children
// in map order, which must not reach the trees.
func TestForestIsTheSameForOneSeed(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var X [][]float64
	var y []float64
	for range 3000 {
		r := []float64{float64(rng.IntN(5)), rng.Float64(), float64(rng.IntN(50)), rng.NormFloat64()}
		X, y = append(X, r), append(y, 2*r[0]+r[1]+rng.NormFloat64())
	}
	fit := func() *models.Forest {
		f := models.NewForest(models.ForestConfig{Trees: 5, MinNode: 5, Classes: 16}, models.Options{Seed: 1})
		if err := f.Fit(context.Background(), X, y); err != nil {
			t.Fatal(err)
		}
		return f
	}
	first := fit()
	for range 3 {
		if again := fit(); !reflect.DeepEqual(again.Trees, first.Trees) {
			t.Fatal("the same seed grew another forest")
		}
	}
}
