package models_test

import (
	"context"
	"testing"

	"github.com/prescient-sched/prescient/models"
)

func TestGBTRefusesADamagedTree(t *testing.T) {
	fc, Xfit, yfit, _, _ := synthetic(t, models.TargetDuration, 800)
	c := models.DefaultGBTConfig()
	c.Trees = 3
	g := models.NewGBT(c, models.Options{Features: fc.FeatureNames()})
	if err := g.Fit(context.Background(), Xfit, yfit); err != nil {
		t.Fatal(err)
	}
	if g.Nodes[0][0].Feature < 0 {
		t.Fatal("the first tree did not split")
	}
	g.Nodes[0][0].Left = 0 // a cycle
	data, err := g.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if err := models.NewGBT(c, models.Options{}).UnmarshalBinary(data); err == nil {
		t.Fatal("a tree whose root points at itself was accepted")
	}
}

// On later Philly jobs the boosted trees' P90 covers about nine in ten,
// as its spread comes from the latest rows it was given. The rows are the
// absolute pipeline's (FeatureConfig.Relative false): on the relative
// one, in Philly's first week, gbt's P50 is off by more than e² for 40%
// of these jobs (mae_log 1.85 against the forest's 0.48), an open fault
// the ensemble's median outvotes; its spread then covers 0.97.
func TestGBTQuantilesHoldOnLaterJobs(t *testing.T) {
	fc, Xfit, yfit, Xtest, ytest := phillyRows(t, 8000, false)
	g := models.NewGBT(models.DefaultGBTConfig(), models.Options{Features: fc.FeatureNames(), Seed: 1})
	if err := g.Fit(context.Background(), Xfit, yfit); err != nil {
		t.Fatal(err)
	}
	q, err := g.PredictQuantiles(Xtest, []float64{0.5, 0.9})
	if err != nil {
		t.Fatal(err)
	}
	covered := 0
	for i := range q {
		if ytest[i] <= q[i][1] {
			covered++
		}
	}
	cov := float64(covered) / float64(len(q))
	if cov < 0.8 || cov > 0.97 {
		t.Errorf("P90 coverage %.3f on the later jobs, want 0.80-0.97", cov)
	}
	t.Logf("P90 coverage %.3f, mae_log %.3f", cov, maeLog(t, g, Xtest, ytest))
}
