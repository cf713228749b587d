package idle

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/prescient-sched/prescient/models"
)

// Target is the registry's name for idle forecasts.
const Target models.Target = "idle"

// Config says how to build and train the model.
type Config struct {
	// Step is the grid the pools are put on.
	Step time.Duration
	// Horizon is how far ahead it forecasts, in steps of ForecastStep.
	Horizon, ForecastStep time.Duration
	// HorizonsPerOrigin is how many lead times of each training origin
	// (one every OriginEvery, ForecastStep when 0) become rows, drawn at
	// random.
	HorizonsPerOrigin int
	OriginEvery       time.Duration
	// ThresholdPct is the utilization below which a device is idle.
	ThresholdPct float64
	// PoolSize is how many devices a pool of utilization series holds;
	// Groupings is how many different groupings of the training devices
	// are drawn (each device is in one pool per grouping).
	PoolSize, Groupings int
	MLP                 models.MLPConfig
	Seed                int64
}

// DefaultConfig forecasts 2 hours in steps of 5 minutes on a 1-minute grid.
func DefaultConfig() Config {
	mlp := models.DefaultMLPConfig()
	mlp.Hidden = []int{32, 16}
	mlp.Levels = []float64{0.1, 0.25, 0.5, 0.75, 0.9}
	mlp.Epochs = 30
	mlp.Patience = 4
	return Config{Step: time.Minute, Horizon: 2 * time.Hour, ForecastStep: 5 * time.Minute, HorizonsPerOrigin: 3,
		ThresholdPct: 5, PoolSize: 8, Groupings: 8, MLP: mlp, Seed: 1}
}

// Validate rejects a config no model can be trained with.
func (c Config) Validate() error {
	switch {
	case c.Step <= 0 || c.ForecastStep < c.Step || c.ForecastStep%c.Step != 0:
		return fmt.Errorf("idle: step %s and forecast step %s: want positive, the forecast step a multiple of the step", c.Step, c.ForecastStep)
	case c.Horizon < c.ForecastStep:
		return fmt.Errorf("idle: horizon %s is shorter than a forecast step of %s", c.Horizon, c.ForecastStep)
	case c.OriginEvery < 0:
		return fmt.Errorf("idle: origin spacing %s is negative", c.OriginEvery)
	case c.HorizonsPerOrigin < 1 || c.PoolSize < 1 || c.Groupings < 1:
		return fmt.Errorf("idle: horizons per origin %d, pool size %d, groupings %d: want at least 1", c.HorizonsPerOrigin, c.PoolSize, c.Groupings)
	case !(c.ThresholdPct > 0 && c.ThresholdPct <= 100):
		return fmt.Errorf("idle: threshold %g%%: want (0, 100]", c.ThresholdPct)
	}
	return c.MLP.Validate()
}

// Model forecasts a pool's idle count from its recent history.
type Model struct {
	Config Config
	// MLP is the fitted models.MLP, as MarshalBinary wrote it.
	MLP []byte
	// Survival is fitted on per-device series; nil when trained on counts.
	Survival *Survival
	// Rows is how many training rows it was fitted on.
	Rows int

	mlp *models.MLP
}

// ErrTooLittleData is returned when the series give too few rows to fit.
var ErrTooLittleData = errors.New("too little data")

// minRows is the fewest training rows worth fitting on.
const minRows = 200

// Fit trains a model on pools (and, when devices is not empty, fits the
// survival table on them).
func Fit(ctx context.Context, cfg Config, pools []*Pool, devices []Grid, progress func(done, total int)) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	X, y := trainingRows(cfg, pools)
	if len(X) < minRows {
		return nil, fmt.Errorf("idle: %w: %d training rows from %d pools, want %d", ErrTooLittleData, len(X), len(pools), minRows)
	}
	mlp := models.NewMLP(cfg.MLP, models.Options{Features: FeatureNames, Seed: cfg.Seed, Progress: progress})
	if err := mlp.Fit(ctx, X, y); err != nil {
		return nil, fmt.Errorf("idle: fit: %w", err)
	}
	data, err := mlp.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("idle: %w", err)
	}
	m := &Model{Config: cfg, MLP: data, Rows: len(X), mlp: mlp}
	if len(devices) > 0 {
		m.Survival = FitSurvival(devices, int(cfg.Horizon/cfg.Step))
	}
	return m, nil
}

// trainingRows draws rows from every pool: origins every ForecastStep with
// enough history, HorizonsPerOrigin lead times each, in time order (the
// perceptron stops early on the latest rows).
func trainingRows(cfg Config, pools []*Pool) ([][]float64, []float64) {
	type row struct {
		at time.Time
		x  []float64
		y  float64
	}
	var rows []row
	rng := rand.New(rand.NewPCG(uint64(cfg.Seed), 0x1d1e))
	every, maxK := steps(cfg.ForecastStep, cfg.Step), int(cfg.Horizon/cfg.ForecastStep)
	originEvery := every
	if cfg.OriginEvery > 0 {
		originEvery = steps(cfg.OriginEvery, cfg.Step)
	}
	for _, p := range pools {
		for i := HistoryNeeded(p.Step); i < p.Len(); i += originEvery {
			o, ok := originAt(p, i)
			if !ok {
				continue
			}
			for range cfg.HorizonsPerOrigin {
				k := (1 + rng.IntN(maxK)) * every
				if !p.known(i + k) {
					continue
				}
				x := make([]float64, nFeatures)
				o.row(p, i, k, x)
				rows = append(rows, row{p.Time(i), x, p.frac(i+k) - o.f0})
			}
		}
	}
	slices.SortStableFunc(rows, func(a, b row) int { return a.at.Compare(b.at) })
	X, y := make([][]float64, len(rows)), make([]float64, len(rows))
	for i, r := range rows {
		X[i], y[i] = r.x, r.y
	}
	return X, y
}

// Levels are the quantile levels the model answers.
func (m *Model) Levels() []float64 { return m.Config.MLP.Levels }

// Query asks for a pool's idle count at origin I, Leads grid steps ahead.
type Query struct {
	Pool  *Pool
	I     int
	Leads []int
}

// Predict answers each query's idle count at each lead for quantile levels
// qs: out[q][l][k] is query q's count at lead l for level qs[k], clamped
// to [0, capacity now] and rounded to whole units. A query whose pool has no value at its origin gets
// nil.
func (m *Model) Predict(queries []Query, qs []float64) ([][][]float64, error) {
	if m.mlp == nil {
		return nil, models.ErrNotFitted
	}
	var X [][]float64
	rows := 0
	for _, qu := range queries {
		rows += len(qu.Leads)
	}
	backing := make([]float64, 0, nFeatures*rows)
	type at struct{ q, l int }
	var where []at
	origins := make([]origin, len(queries))
	okq := make([]bool, len(queries))
	for q, qu := range queries {
		o, ok := originAt(qu.Pool, qu.I)
		if !ok {
			continue
		}
		origins[q], okq[q] = o, true
		for l, k := range qu.Leads {
			start := len(backing)
			backing = backing[:start+nFeatures]
			o.row(qu.Pool, qu.I, k, backing[start:])
			where = append(where, at{q, l})
		}
	}
	X = make([][]float64, len(where))
	for r := range where {
		X[r] = backing[r*nFeatures : (r+1)*nFeatures : (r+1)*nFeatures]
	}
	out := make([][][]float64, len(queries))
	for q, qu := range queries {
		if okq[q] {
			out[q] = make([][]float64, len(qu.Leads))
		}
	}
	if len(X) == 0 {
		return out, nil
	}
	pred, err := m.mlp.PredictQuantiles(X, qs)
	if err != nil {
		return nil, fmt.Errorf("idle: %w", err)
	}
	for r, w := range where {
		o := origins[w.q]
		for k := range pred[r] {
			// Idle counts are whole units, and so is the median of a
			// count: rounding keeps "no change" exact where the model
			// sees less than half a unit of change.
			pred[r][k] = math.Round(o.cap0 * math.Min(math.Max(o.f0+pred[r][k], 0), 1))
		}
		out[w.q][w.l] = pred[r]
	}
	return out, nil
}

// restore decodes the perceptron after the model was read back.
func (m *Model) restore() error {
	mlp := models.NewMLP(m.Config.MLP, models.Options{Features: FeatureNames})
	if err := mlp.UnmarshalBinary(m.MLP); err != nil {
		return fmt.Errorf("perceptron: %w", err)
	}
	if mlp.P != nFeatures {
		return fmt.Errorf("perceptron takes %d features, this build computes %d", mlp.P, nFeatures)
	}
	m.mlp = mlp
	return nil
}
