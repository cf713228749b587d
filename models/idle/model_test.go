package idle

import (
	"bytes"
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/datasets"
	"github.com/prescient-sched/prescient/internal/testenv"
	"github.com/prescient-sched/prescient/models"
)

// heliosPools reads three Helios virtual clusters, cut to their first days.
func heliosPools(tb testing.TB, days int, vcs ...string) []*Pool {
	tb.Helper()
	var pools []*Pool
	for _, vc := range vcs {
		path := testenv.Dataset(tb, "helios", "earth_vc_sequence", vc+"_cluster_sequence_vc.csv.gz")
		got, err := datasets.ReadSeries("helios:" + path)
		if err != nil {
			tb.Fatal(err)
		}
		s := got[0]
		n := min(days*1440, len(s.Times))
		p, err := NewPool(s.ID, s.Times[:n], s.Values[:n], s.Capacity[:n], s.Demand[:n], time.Minute)
		if err != nil {
			tb.Fatal(err)
		}
		pools = append(pools, p)
	}
	return pools
}

// fittedTestModel is a model fitted briefly on a slice of real data.
func fittedTestModel(tb testing.TB) *Model {
	tb.Helper()
	cfg := DefaultConfig()
	cfg.MLP.Epochs = 3
	m, err := Fit(context.Background(), cfg, heliosPools(tb, 5, "vc6YE", "vc8Sj"), nil, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

// maes scores a model and persistence on pools, lead steps ahead of
// origins every 5 minutes.
func maes(t *testing.T, m *Model, pools []*Pool, lead int) (model, persistence float64) {
	n := 0
	for _, p := range pools {
		var qs []Query
		for i := HistoryNeeded(p.Step); i+lead < p.Len(); i += 5 {
			qs = append(qs, Query{Pool: p, I: i, Leads: []int{lead}})
		}
		pred, err := m.Predict(qs, []float64{0.5})
		if err != nil {
			t.Fatal(err)
		}
		for k, q := range qs {
			truth := p.Idle[q.I+lead]
			if pred[k] == nil || math.IsNaN(truth) {
				continue
			}
			model += math.Abs(pred[k][0][0] - truth)
			persistence += math.Abs(p.Idle[q.I] - truth)
			n++
		}
	}
	if n < 100 {
		t.Fatalf("only %d scored origins", n)
	}
	return model / float64(n), persistence / float64(n)
}

// On GenAI containers it did not see, grouped in pools of 8, the model
// forecasts idle containers 30 and 60 minutes ahead better than
// persistence (by about a quarter in every fold we tried).
func TestModelBeatsPersistenceOnUnseenGenaiContainers(t *testing.T) {
	path := testenv.Dataset(t, "alibaba-genai", "pod_gpu_duty_cycle_anon.csv.gz")
	series, err := datasets.ReadSeries("genai:" + path)
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	ids := make([]string, len(series))
	for i, s := range series {
		ids[i] = s.ID
	}
	held := HeldOut(ids, 0.3)
	var fitDevs, testDevs []Device
	for _, s := range series {
		d := Device{ID: s.ID, Times: s.Times, Values: s.Values}
		if held[s.ID] {
			testDevs = append(testDevs, d)
		} else {
			fitDevs = append(fitDevs, d)
		}
	}
	fitGrids, err := DeviceGrids(fitDevs, cfg.ThresholdPct, cfg.Step)
	if err != nil {
		t.Fatal(err)
	}
	var pools []*Pool
	for g := range cfg.Groupings {
		pools = append(pools, PoolsFromGrids(fitGrids, cfg.PoolSize, uint64(g))...)
	}
	m, err := Fit(context.Background(), cfg, pools, fitGrids, nil)
	if err != nil {
		t.Fatal(err)
	}
	testGrids, err := DeviceGrids(testDevs, cfg.ThresholdPct, cfg.Step)
	if err != nil {
		t.Fatal(err)
	}
	test := PoolsFromGrids(testGrids, cfg.PoolSize, 0)
	for _, lead := range []int{30, 60} {
		mae, pers := maes(t, m, test, lead)
		t.Logf("%d min ahead: model MAE %.3f, persistence %.3f containers", lead, mae, pers)
		if !(mae < pers) {
			t.Errorf("%d min ahead: model MAE %.3f is not below persistence's %.3f", lead, mae, pers)
		}
	}
	// The survival table: a container idle for an hour is more likely to
	// stay idle 15 minutes than a busy one is to be idle throughout.
	if s := m.Survival; s == nil || !(s.IdleThrough(time.Hour, 15*time.Minute) > s.IdleAt(0, time.Minute)/2) {
		t.Errorf("survival table %+v", m.Survival)
	}
}

// On Helios virtual clusters it did not see the model is not much worse
// than persistence: in these clusters the idle count stays the same over
// an hour at 67-98% of times, so persistence is close to the best median
// forecast, and the model does not beat it (on all of May it comes within
// 0.5%; fitted briefly on ten days, as here, within 10%).
func TestModelMatchesPersistenceOnUnseenHeliosVC(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MLP.Epochs = 5
	m, err := Fit(context.Background(), cfg, heliosPools(t, 10, "vc6YE", "vc8Sj", "vcSoL", "vccaA"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	test := heliosPools(t, 10, "vc3sl", "vcTJs")
	for _, lead := range []int{30, 60} {
		mae, pers := maes(t, m, test, lead)
		t.Logf("%d min ahead: model MAE %.3f, persistence %.3f GPUs", lead, mae, pers)
		if mae > 1.1*pers {
			t.Errorf("%d min ahead: model MAE %.3f is more than 10%% above persistence's %.3f", lead, mae, pers)
		}
	}
}

func TestArtifactRoundTripAndDamage(t *testing.T) {
	m := fittedTestModel(t)
	a := &Artifact{Format: ArtifactFormat, Version: 3, Series: []string{"vc6YE"}, Features: FeatureNames, Model: m}
	var buf bytes.Buffer
	if err := Encode(&buf, a); err != nil {
		t.Fatal(err)
	}
	good := buf.Bytes()
	back, err := Decode(bytes.NewReader(good), "v3.model")
	if err != nil {
		t.Fatal(err)
	}
	pools := heliosPools(t, 1, "vc3sl")
	q := []Query{{Pool: pools[0], I: 600, Leads: []int{30, 60}}}
	want, _ := m.Predict(q, []float64{0.5})
	got, err := back.Model.Predict(q, []float64{0.5})
	if err != nil || got[0][0][0] != want[0][0][0] || got[0][1][0] != want[0][1][0] {
		t.Fatalf("decoded model predicts %v, %v; want %v", got, err, want)
	}
	bad := bytes.Clone(good)
	bad[len(bad)/2] ^= 1
	if _, err := Decode(bytes.NewReader(bad), "v3.model"); !errors.Is(err, models.ErrCorruptArtifact) {
		t.Fatalf("damaged artifact: %v", err)
	}
	if _, err := Decode(bytes.NewReader(good[:40]), "v3.model"); !errors.Is(err, models.ErrCorruptArtifact) {
		t.Fatalf("truncated artifact: %v", err)
	}
}

// FuzzDecode: a damaged or foreign artifact is an error, never a panic.
func FuzzDecode(f *testing.F) {
	var buf bytes.Buffer
	cfg := DefaultConfig()
	cfg.MLP.Epochs = 1
	mlp := models.NewMLP(cfg.MLP, models.Options{Features: FeatureNames})
	X, y := make([][]float64, 300), make([]float64, 300)
	for i := range X {
		X[i] = make([]float64, nFeatures)
		X[i][0], y[i] = float64(i%7)/7, float64(i%3)/30
	}
	if err := mlp.Fit(context.Background(), X, y); err != nil {
		f.Fatal(err)
	}
	data, _ := mlp.MarshalBinary()
	if err := Encode(&buf, &Artifact{Format: ArtifactFormat, Features: FeatureNames, Model: &Model{Config: cfg, MLP: data}}); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add([]byte("PRESCIENT-IDLE\n\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x05hello"))
	f.Add([]byte("PRESCIENT-MODEL\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := Decode(bytes.NewReader(data), "fuzz.model")
		if err != nil {
			if !strings.Contains(err.Error(), "fuzz.model") {
				t.Fatalf("error without the file: %v", err)
			}
			return
		}
		if a.Model == nil || a.Model.mlp == nil {
			t.Fatal("decoded artifact without a usable model")
		}
	})
}
