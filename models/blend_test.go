package models_test

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/models"
)

// A tenant whose outcomes the learned correction keeps missing is served
// the rolling median; one it gets right keeps the whole correction; a
// tenant with too few outcomes of its own gets what worked for all.
func TestBlendServesWhatHasErredLeast(t *testing.T) {
	names := models.DefaultFeatureConfig(models.TargetDuration).FeatureNames()
	b, err := models.NewBlend(names)
	if err != nil {
		t.Fatal(err)
	}
	row := make([]float64, len(names))
	row[slices.Index(names, models.FeatureComparableQ10)] = 3
	row[slices.Index(names, models.FeatureComparableQ50)] = 4
	row[slices.Index(names, models.FeatureComparableQ90)] = 6
	if got := b.Share("new"); got != 1 {
		t.Fatalf("share before any outcome = %v, want the whole correction", got)
	}
	for range 50 {
		b.Learn("drifted", row, 6, 4.1)  // the median was right, the correction 2 too long
		b.Learn("learned", row, 5, 5.05) // the correction was right
	}
	for range 20 {
		b.Learn("drifted", row, 6, 4.1)
	}
	if got := b.Share("drifted"); got != 0 {
		t.Errorf("drifted tenant's share = %v, want 0", got)
	}
	if got := b.Share("learned"); got != 1 {
		t.Errorf("well-learned tenant's share = %v, want 1", got)
	}
	if got, want := b.Share("new"), 0.0; got != want {
		t.Errorf("a tenant with no outcomes gets %v, want all tenants' best %v (most outcomes were the drifted one's)", got, want)
	}

	qs := []float64{0.1, 0.5, 0.9}
	q := []float64{5, 6, 9}
	b.Serve("drifted", row, qs, q)
	if !slices.Equal(q, []float64{3, 4, 6}) {
		t.Errorf("served %v to the drifted tenant, want the rolling median's quantiles [3 4 6]", q)
	}
	q = []float64{5, 6, 9}
	b.Serve("learned", row, qs, q)
	if !slices.Equal(q, []float64{5, 6, 9}) {
		t.Errorf("served %v to the well-learned tenant, want the model's own [5 6 9]", q)
	}
}

// Quantiles moved by more than the whole correction stay ordered.
func TestBlendKeepsQuantilesOrdered(t *testing.T) {
	names := models.DefaultFeatureConfig(models.TargetDuration).FeatureNames()
	b, _ := models.NewBlend(names)
	row := make([]float64, len(names))
	row[slices.Index(names, models.FeatureComparableQ10)] = 1
	row[slices.Index(names, models.FeatureComparableQ50)] = 4
	row[slices.Index(names, models.FeatureComparableQ90)] = 9
	for range 30 {
		b.Learn("a", row, 5, 5.5) // more than the whole correction would have been better
	}
	if got := b.Share("a"); got <= 1 {
		t.Fatalf("share %v, want above 1", got)
	}
	q := []float64{4.5, 5, 5.2}
	b.Serve("a", row, []float64{0.1, 0.5, 0.9}, q)
	if !slices.IsSorted(q) {
		t.Fatalf("served quantiles %v are not ordered", q)
	}
}

// correction is a learned model (it serves as the forest) that adds a
// fixed amount to comparable_q50.
type correction struct {
	col   int
	delta float64
}

func (correction) Fit(context.Context, [][]float64, []float64) error { return nil }
func (c correction) PredictQuantiles(X [][]float64, qs []float64) ([][]float64, error) {
	out := make([][]float64, len(X))
	for i, x := range X {
		for k := range qs {
			out[i] = append(out[i], x[c.col]+c.delta+float64(k))
		}
	}
	return out, nil
}
func (correction) Name() string                      { return models.ForestName }
func (correction) MarshalBinary() ([]byte, error)    { return nil, nil }
func (correction) UnmarshalBinary(data []byte) error { return nil }

// Replayed serving hears each outcome only once it has arrived, with the
// row the history had before it, and serves a learned model's forecasts
// as a Blend would: a correction that keeps missing fades.
func TestStreamServesAsTheOutcomesArrive(t *testing.T) {
	fc := models.DefaultFeatureConfig(models.TargetDuration)
	names := fc.FeatureNames()
	var jobs []cluster.Job
	for i := range 400 {
		jobs = append(jobs, finished(fmt.Sprint("j", i), "a", 1, t0.Add(time.Duration(i)*time.Minute), 5*time.Minute))
	}
	from := jobs[100].SubmitTime
	s := fc.Stream(jobs, jobs[100:], from)
	if len(s.Rows) != 300 || len(s.Heard) != 300 {
		t.Fatalf("%d rows, %d heard, want 300", len(s.Rows), len(s.Heard))
	}
	for i, o := range s.Observed {
		end := models.EndTime(o.Job)
		if end.Before(from) {
			t.Fatalf("observation %d ended at %s, before the stream's start", i, end)
		}
		if i > 0 && end.Before(models.EndTime(s.Observed[i-1].Job)) {
			t.Fatalf("observations out of end order at %d", i)
		}
	}
	for i := range s.Queries {
		heard := s.Observed[:s.Heard[i]]
		if n := len(heard); n > 0 && !models.EndTime(heard[n-1].Job).Before(s.Queries[i].SubmitTime) {
			t.Fatalf("query %d heard of a job that ended at %s, not before its submit at %s", i, models.EndTime(heard[n-1].Job), s.Queries[i].SubmitTime)
		}
	}
	if !slices.Equal(s.Rows[10], fc.Rows(jobs, jobs[110:111])[0]) {
		t.Fatal("the stream's rows differ from Rows")
	}

	m := correction{col: slices.Index(names, models.FeatureComparableQ50), delta: 2}
	raw, _ := m.PredictQuantiles(s.Rows, []float64{0.5, 0.9})
	served, err := s.Serve(m, []float64{0.5, 0.9})
	if err != nil {
		t.Fatal(err)
	}
	y := models.Log(300)
	if first := served[0][0]; first != raw[0][0] {
		t.Errorf("the first job, before any outcome arrived, was served %v, want the model's %v", first, raw[0][0])
	}
	last := len(served) - 1
	if math.Abs(served[last][0]-y) > 0.01 {
		t.Errorf("after %d outcomes the last job was served P50 %v, want the rolling median's %v (the model says %v)", s.Heard[last], served[last][0], y, raw[last][0])
	}
}
