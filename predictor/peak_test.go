package predictor_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/datasets"
	"github.com/prescient-sched/prescient/models"
	"github.com/prescient-sched/prescient/predictor"
	"github.com/prescient-sched/prescient/training"
)

// memorySeries are n synthetic GPU-memory series of running containers,
// sampled every minute for 5 hours: a footprint that grows from a third
// of its plateau to the plateau over the first hour or two, with noise.
func memorySeries(n int) []datasets.Series {
	rng := rand.New(rand.NewPCG(7, 7))
	start := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	out := make([]datasets.Series, n)
	for i := range out {
		plateau := float64(4+rng.IntN(70)) * (1 << 30)
		rampMin := 30 + rng.Float64()*90
		s := datasets.Series{ID: fmt.Sprintf("c%03d", i)}
		for m := range 300 {
			v := plateau * (1.0/3 + 2.0/3*math.Min(float64(m)/rampMin, 1)) * (1 + 0.03*rng.NormFloat64())
			s.Times = append(s.Times, start.Add(time.Duration(m)*time.Minute))
			s.Values = append(s.Values, math.Max(v, 0))
		}
		out[i] = s
	}
	return out
}

func TestRefinePeakServesThePublishedPeakModel(t *testing.T) {
	ctx := context.Background()
	reg := training.Registry{Dir: t.TempDir()}
	cfg := training.DefaultPeakConfig()
	cfg.Learners = []string{models.ForestName}
	series := memorySeries(120)
	rep, err := training.TrainPeak(ctx, cfg, series, reg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.ModelVersion != 1 || rep.Selected != models.ForestName || rep.Published == nil || !*rep.Published {
		t.Fatalf("TrainPeak report %+v; want forest published as version 1", rep)
	}
	t.Logf("forest on synthetic series: %v", rep.Models[models.ForestName])
	p, err := predictor.New(reg, nil) // a registry with only a peak model serves it
	if err != nil {
		t.Fatal(err)
	}
	// 15 minutes of a fresh series still climbing: the refined P90 is above
	// the peak so far (it keeps growing for at least another 15 minutes).
	fresh := memorySeries(121)[120]
	fresh.Times, fresh.Values = fresh.Times[:16], fresh.Values[:16]

	t.Run("a running job's refined peak: P50 ≤ P90, above the peak so far while it climbs", func(t *testing.T) {
		fc, err := p.RefinePeak(ctx, fresh)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%+v", fc)
		if fc.ModelVersion != "peak:1" || fc.HorizonS != 7200 || fc.P50Bytes <= 0 || fc.P90Bytes < fc.P50Bytes || fc.P90Bytes <= fc.PeakSoFarBytes {
			t.Fatalf("forecast %+v", fc)
		}
	})
	t.Run("less than the watching window is too little", func(t *testing.T) {
		short := datasets.Series{ID: "short", Times: fresh.Times[:4], Values: fresh.Values[:4]}
		if _, err := p.RefinePeak(ctx, short); !errors.Is(err, models.ErrTooLittleSeen) {
			t.Fatalf("err = %v, want ErrTooLittleSeen", err)
		}
	})
	t.Run("a corrupt new version is refused and the previous one keeps serving", func(t *testing.T) {
		if _, err := training.TrainPeak(ctx, cfg, series, reg); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(reg.ArtifactPath(models.TargetPeak, 2), []byte("PRESCIENT-PEAK\ngarbage"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Reload(); !errors.Is(err, models.ErrCorruptArtifact) {
			t.Fatalf("reload: %v, want ErrCorruptArtifact", err)
		}
		if fc, err := p.RefinePeak(ctx, fresh); err != nil || fc.ModelVersion != "peak:1" {
			t.Fatalf("after the refused version: %+v, %v; want peak:1 serving", fc, err)
		}
		if v, err := reg.Rollback(models.TargetPeak, 1); err != nil || v != 1 {
			t.Fatalf("rollback to 1: %d, %v", v, err)
		}
	})
	t.Run("without a peak model the answer says so", func(t *testing.T) {
		other := training.Registry{Dir: t.TempDir()}
		publish(t, other, models.TargetDuration, datasetsJobs(t), models.RollingMedianName)
		q, err := predictor.New(other, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := q.RefinePeak(ctx, fresh); !errors.Is(err, predictor.ErrNoPeakModel) {
			t.Fatalf("err = %v, want ErrNoPeakModel", err)
		}
	})
}

func datasetsJobs(t *testing.T) []cluster.Job {
	cfg := datasets.DefaultGenerateConfig()
	cfg.Jobs = 500
	jobs, err := datasets.Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return jobs
}

// One refinement of 1,000 running jobs, 2 hours of 1-minute samples each,
// with the forest the control plane would serve.
func BenchmarkRefinePeak1kJobs(b *testing.B) {
	ctx := context.Background()
	reg := training.Registry{Dir: b.TempDir()}
	cfg := training.DefaultPeakConfig()
	cfg.Learners = []string{models.ForestName}
	if _, err := training.TrainPeak(ctx, cfg, memorySeries(120), reg); err != nil {
		b.Fatal(err)
	}
	p, err := predictor.New(reg, nil)
	if err != nil {
		b.Fatal(err)
	}
	running := memorySeries(1000)
	for i := range running {
		running[i].Times, running[i].Values = running[i].Times[:120], running[i].Values[:120]
	}
	for b.Loop() {
		for _, s := range running {
			if _, err := p.RefinePeak(ctx, s); err != nil {
				b.Fatal(err)
			}
		}
	}
}
