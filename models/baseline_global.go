package models

import (
	"bytes"
	"context"
	"encoding/gob"
	"fmt"
	"slices"
)

// GlobalMedianName names the global-median baseline.
const GlobalMedianName = "global_median"

func init() {
	register(Learner{Name: GlobalMedianName, Baseline: true,
		Doc: "the quantiles of every training target, whatever the job",
		New: func(Options) Model { return &GlobalMedian{} }})
}

// GlobalMedian predicts the same quantiles for every job: those of the
// targets it was fitted on. Its P50 is the global median.
type GlobalMedian struct {
	Sorted []float64 // the training targets, sorted
}

var _ Model = (*GlobalMedian)(nil)

// Name implements Model.
func (*GlobalMedian) Name() string { return GlobalMedianName }

// Fit keeps the sorted targets.
func (m *GlobalMedian) Fit(_ context.Context, X [][]float64, y []float64) error {
	if _, err := checkFit(X, y); err != nil {
		return err
	}
	m.Sorted = slices.Sorted(slices.Values(y))
	return nil
}

// PredictQuantiles implements Regressor.
func (m *GlobalMedian) PredictQuantiles(X [][]float64, qs []float64) ([][]float64, error) {
	if len(m.Sorted) == 0 {
		return nil, ErrNotFitted
	}
	if err := checkPredict(X, qs, rowLen(X)); err != nil {
		return nil, err
	}
	row := make([]float64, len(qs))
	for k, q := range qs {
		row[k] = QuantileSorted(m.Sorted, q)
	}
	out := matrix(len(X), len(qs))
	for i := range out {
		copy(out[i], row)
	}
	return out, nil
}

// rowLen is the width of X's first row; the global median reads no column.
func rowLen(X [][]float64) int {
	if len(X) == 0 {
		return 0
	}
	return len(X[0])
}

// MarshalBinary implements Model.
func (m *GlobalMedian) MarshalBinary() ([]byte, error) { return gobEncode((*globalMedianWire)(m)) }

// UnmarshalBinary implements Model.
func (m *GlobalMedian) UnmarshalBinary(data []byte) error {
	if err := gobDecode(data, (*globalMedianWire)(m)); err != nil {
		return err
	}
	if len(m.Sorted) == 0 || !slices.IsSorted(m.Sorted) {
		return fmt.Errorf("%s: no sorted targets", GlobalMedianName)
	}
	return nil
}

func gobEncode(v any) ([]byte, error) {
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func gobDecode(data []byte, v any) error {
	if err := gob.NewDecoder(bytes.NewReader(data)).Decode(v); err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	return nil
}

// globalMedianWire is GlobalMedian without its methods, so that gob does not call MarshalBinary on it again.
type globalMedianWire GlobalMedian
