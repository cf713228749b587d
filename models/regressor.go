package models

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"sort"
)

// Regressor is a quantile regressor: fitted on rows X with targets y (in
// log space, see Log), it predicts for each row the requested quantiles
// qs (each in (0, 1)), non-decreasing in q.
type Regressor interface {
	Fit(ctx context.Context, X [][]float64, y []float64) error
	PredictQuantiles(X [][]float64, qs []float64) ([][]float64, error)
}

// Model is a Regressor that has a name and can be saved in an artifact and
// restored from it.
type Model interface {
	Regressor
	Name() string
	MarshalBinary() ([]byte, error)
	UnmarshalBinary(data []byte) error
}

// Options are what every learner is built with.
type Options struct {
	// Features names the columns of X (FeatureConfig.FeatureNames); the
	// baselines find their columns by name.
	Features []string
	// Seed makes fitting repeatable.
	Seed int64
	// Progress, when set, is told how far fitting is (done of total steps).
	Progress func(done, total int)
	Logger   *slog.Logger
}

func (o Options) progress(done, total int) {
	if o.Progress != nil {
		o.Progress(done, total)
	}
}

func (o Options) logger() *slog.Logger {
	if o.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return o.Logger
}

func (o Options) column(name string) (int, error) {
	i := slices.Index(o.Features, name)
	if i < 0 {
		return 0, fmt.Errorf("feature %q is not among the model's features", name)
	}
	return i, nil
}

// offsetColumn is the column learners model their target relative to: the
// rolling median of comparable jobs, so that they learn corrections to
// the strongest baseline; -1 when the features lack it.
func (o Options) offsetColumn() int {
	i, err := o.column(FeatureComparableQ50)
	if err != nil {
		return -1
	}
	return i
}

// residuals returns y minus each row's offset column (y itself for -1).
func residuals(X [][]float64, y []float64, col int) []float64 {
	if col < 0 {
		return y
	}
	r := make([]float64, len(y))
	for i := range y {
		r[i] = y[i] - X[i][col]
	}
	return r
}

// offsetOf is row x's offset: its offset column, or 0 for -1.
func offsetOf(x []float64, col int) float64 {
	if col < 0 {
		return 0
	}
	return x[col]
}

// Learner describes a kind of model. Each learner's file registers itself.
type Learner struct {
	Name string
	Doc  string
	// Baseline learners need no learning; every learned model is compared
	// with them.
	Baseline bool
	// Compared learners are fitted and reported beside the others but
	// serve only where nothing else was fitted. The seeded learners are:
	// two trainings of the forest on the whole Philly table with seeds 1
	// and 2 scored mae_log 0.959 and 0.939 on the same holdout, more than
	// the learners differ, so serving the best of them served the seed.
	// Their ensemble (the median of forest, gbt and MLP) serves instead.
	// gbt alone also won a holdout and then lost the next window.
	Compared bool
	New      func(o Options) Model
}

// learners is the package's only mutable state: each learner's file adds
// itself from its init function; nothing changes it afterwards.
var learners = map[string]Learner{}

func register(l Learner) {
	if _, dup := learners[l.Name]; dup {
		panic("models: learner " + l.Name + " registered twice")
	}
	learners[l.Name] = l
}

// Learners lists the learners, sorted by name.
func Learners() []Learner {
	out := make([]Learner, 0, len(learners))
	for _, n := range slices.Sorted(maps.Keys(learners)) {
		out = append(out, learners[n])
	}
	return out
}

// LookupLearner finds a learner by name.
func LookupLearner(name string) (Learner, error) {
	l, ok := learners[name]
	if !ok {
		return Learner{}, fmt.Errorf("%w: %q (known: %v)", ErrUnknownLearner, name, slices.Sorted(maps.Keys(learners)))
	}
	return l, nil
}

// Errors the learners return.
var (
	ErrUnknownLearner = errors.New("unknown learner")
	ErrNotFitted      = errors.New("model is not fitted")
	ErrShape          = errors.New("input has the wrong shape")
)

// checkFit validates the training data's shape.
func checkFit(X [][]float64, y []float64) (int, error) {
	if len(X) == 0 {
		return 0, fmt.Errorf("%w: no rows", ErrShape)
	}
	if len(X) != len(y) {
		return 0, fmt.Errorf("%w: %d rows but %d targets", ErrShape, len(X), len(y))
	}
	p := len(X[0])
	for i, r := range X {
		if len(r) != p {
			return 0, fmt.Errorf("%w: row %d has %d features, row 0 has %d", ErrShape, i, len(r), p)
		}
	}
	return p, nil
}

// checkPredict validates rows and quantile levels against p features.
func checkPredict(X [][]float64, qs []float64, p int) error {
	if len(qs) == 0 {
		return fmt.Errorf("%w: no quantiles asked for", ErrShape)
	}
	for _, q := range qs {
		if !(q > 0 && q < 1) {
			return fmt.Errorf("%w: quantile %g is outside (0, 1)", ErrShape, q)
		}
	}
	for i, r := range X {
		if len(r) != p {
			return fmt.Errorf("%w: row %d has %d features, want %d", ErrShape, i, len(r), p)
		}
	}
	return nil
}

// interpQuantiles reads quantiles qs off a piecewise-linear quantile
// function known at levels (sorted) with values vals (non-decreasing),
// holding the end values beyond the known levels.
func interpQuantiles(levels, vals, qs []float64, dst []float64) []float64 {
	for _, q := range qs {
		i := sort.SearchFloat64s(levels, q)
		switch {
		case i == 0:
			dst = append(dst, vals[0])
		case i == len(levels):
			dst = append(dst, vals[len(vals)-1])
		default:
			f := (q - levels[i-1]) / (levels[i] - levels[i-1])
			dst = append(dst, vals[i-1]*(1-f)+vals[i]*f)
		}
	}
	return dst
}

// matrix allocates n rows of k columns in one backing array.
func matrix(n, k int) [][]float64 {
	backing := make([]float64, n*k)
	out := make([][]float64, n)
	for i := range out {
		out[i] = backing[i*k : (i+1)*k : (i+1)*k]
	}
	return out
}

// Spearman is the rank correlation of a and b (ties get their mean rank);
// 0 when either is constant.
func Spearman(a, b []float64) float64 {
	ra, rb := ranks(a), ranks(b)
	n := float64(len(a))
	var ma, mb float64
	for i := range ra {
		ma += ra[i] / n
		mb += rb[i] / n
	}
	var sab, saa, sbb float64
	for i := range ra {
		da, db := ra[i]-ma, rb[i]-mb
		sab += da * db
		saa += da * da
		sbb += db * db
	}
	if saa == 0 || sbb == 0 {
		return 0
	}
	return sab / math.Sqrt(saa*sbb)
}

func ranks(v []float64) []float64 {
	idx := make([]int, len(v))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(x, y int) int { return cmp.Compare(v[x], v[y]) })
	r := make([]float64, len(v))
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && v[idx[j+1]] == v[idx[i]] {
			j++
		}
		mean := float64(i+j)/2 + 1
		for k := i; k <= j; k++ {
			r[idx[k]] = mean
		}
		i = j + 1
	}
	return r
}
