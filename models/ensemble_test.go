package models

import (
	"context"
	"slices"
	"testing"
)

// fixedModel answers the same quantiles for every row.
type fixedModel struct{ q []float64 }

func (f fixedModel) Fit(context.Context, [][]float64, []float64) error { return nil }
func (f fixedModel) PredictQuantiles(X [][]float64, qs []float64) ([][]float64, error) {
	out := make([][]float64, len(X))
	for i := range out {
		out[i] = slices.Clone(f.q)
	}
	return out, nil
}
func (fixedModel) Name() string                      { return "fixed" }
func (fixedModel) MarshalBinary() ([]byte, error)    { return nil, nil }
func (fixedModel) UnmarshalBinary(data []byte) error { return nil }

// The ensemble answers the median of its members' quantiles, level by
// level: one member far off does not move it, and the quantiles stay
// ordered.
func TestEnsembleTakesTheMembersMedian(t *testing.T) {
	e := &Ensemble{members: []Model{
		fixedModel{[]float64{5, 6}},
		fixedModel{[]float64{7, 9}},
		fixedModel{[]float64{40, 41}}, // far off
	}}
	got, err := e.PredictQuantiles([][]float64{{0}, {1}}, []float64{0.5, 0.9})
	if err != nil {
		t.Fatal(err)
	}
	for i, row := range got {
		if !slices.Equal(row, []float64{7, 9}) {
			t.Errorf("row %d: %v, want the median [7 9]", i, row)
		}
	}
}

// binOf is the first bin whose edge is at or above v, as a binary search
// finds it.
func TestBinOfCountsTheEdgesBelow(t *testing.T) {
	for n := range 70 {
		edges := make([]float64, n)
		for i := range edges {
			edges[i] = float64(2 * i)
		}
		for v := -1.0; v <= float64(2*n); v += 0.5 {
			want, _ := slices.BinarySearch(edges, v)
			if got := binOf(edges, v); int(got) != want {
				t.Fatalf("%d edges, v %g: bin %d, want %d", n, v, got, want)
			}
		}
	}
}
