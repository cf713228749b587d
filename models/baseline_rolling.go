package models

import (
	"context"
	"fmt"
	"math"
)

// RollingMedianName names the rolling-median baseline.
const RollingMedianName = "rolling_median"

func init() {
	register(Learner{Name: RollingMedianName, Baseline: true,
		Doc: "quantiles of the last outcomes of comparable jobs: same tenant (virtual cluster) and GPU count, else same tenant, else all",
		New: func(o Options) Model { return &RollingMedian{features: o.Features} }})
}

// RollingMedian predicts from the "comparable jobs" features: the P10,
// P50 and P90 of the latest outcomes of jobs of the same tenant and GPU
// count (falling back to the tenant, then to all jobs), known at submit
// time. It needs no learning beyond finding its columns; its P50 is the
// rolling median of comparable past jobs.
type RollingMedian struct {
	Cols     [3]int // the comparable_q10, _q50, _q90 columns
	P        int    // row width
	features []string
}

var _ Model = (*RollingMedian)(nil)

// Name implements Model.
func (*RollingMedian) Name() string { return RollingMedianName }

// Fit finds the columns; the targets are not used.
func (m *RollingMedian) Fit(_ context.Context, X [][]float64, y []float64) error {
	p, err := checkFit(X, y)
	if err != nil {
		return err
	}
	o := Options{Features: m.features}
	for k, name := range []string{FeatureComparableQ10, FeatureComparableQ50, FeatureComparableQ90} {
		if m.Cols[k], err = o.column(name); err != nil {
			return fmt.Errorf("%s: %w", RollingMedianName, err)
		}
	}
	m.P = p
	return nil
}

var rollingLevels = []float64{0.1, 0.5, 0.9}

// PredictQuantiles interpolates between the group's P10, P50 and P90.
func (m *RollingMedian) PredictQuantiles(X [][]float64, qs []float64) ([][]float64, error) {
	if m.P == 0 {
		return nil, ErrNotFitted
	}
	if err := checkPredict(X, qs, m.P); err != nil {
		return nil, err
	}
	out := matrix(len(X), len(qs))
	for i, r := range X {
		rollingQuantiles(r, m.Cols, qs, out[i][:0])
	}
	return out, nil
}

// rollingQuantiles appends the rolling median's quantiles qs for row x,
// whose comparable_q10, _q50 and _q90 are in columns cols: interpolated
// between the three, each kept at least the one below.
func rollingQuantiles(x []float64, cols [3]int, qs, dst []float64) []float64 {
	var vals [3]float64
	for k, c := range cols {
		vals[k] = x[c]
	}
	vals[1] = math.Max(vals[1], vals[0])
	vals[2] = math.Max(vals[2], vals[1])
	return interpQuantiles(rollingLevels, vals[:], qs, dst)
}

// MarshalBinary implements Model.
func (m *RollingMedian) MarshalBinary() ([]byte, error) { return gobEncode((*rollingMedianWire)(m)) }

// UnmarshalBinary implements Model.
func (m *RollingMedian) UnmarshalBinary(data []byte) error {
	if err := gobDecode(data, (*rollingMedianWire)(m)); err != nil {
		return err
	}
	for _, c := range m.Cols {
		if c < 0 || c >= m.P {
			return fmt.Errorf("%s: column %d outside a row of %d", RollingMedianName, c, m.P)
		}
	}
	return nil
}

// rollingMedianWire is RollingMedian without its methods, so that gob does not call MarshalBinary on it again.
type rollingMedianWire RollingMedian
