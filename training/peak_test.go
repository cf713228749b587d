package training_test

import (
	"context"
	"testing"

	"github.com/prescient-sched/prescient/datasets"
	"github.com/prescient-sched/prescient/internal/testenv"
	"github.com/prescient-sched/prescient/models"
	"github.com/prescient-sched/prescient/training"
)

func TestRefinedPeakCoversMoreThanPeakSoFarOnUnseenGenaiContainers(t *testing.T) {
	series, err := datasets.ReadSeries("genai-memory:" + testenv.Dataset(t, "alibaba-genai", "pod_gpu_memory_used_bytes_anon.csv.gz"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := training.DefaultPeakConfig()
	cfg.Learners = []string{models.GlobalMedianName, models.MLPName}
	rep, err := training.EvaluatePeak(context.Background(), cfg, series)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", rep)
	base := rep.Baselines["peak_so_far_x1_2"]
	if base["mean_reservation_vs_peak_x1_2"] != 1 {
		t.Fatalf("baseline reservation ratio %v, want 1", base["mean_reservation_vs_peak_x1_2"])
	}
	for name, m := range rep.Models {
		if m["p90_coverage"] <= base["p90_coverage"] || m["p90_coverage"] < 0.8 {
			t.Errorf("%s: P90 coverage %.3f on unseen containers; peak so far × 1.2 covers %.3f", name, m["p90_coverage"], base["p90_coverage"])
		}
	}
}
