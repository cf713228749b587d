package predictor_test

import (
	"os"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/datasets"
	"github.com/prescient-sched/prescient/models"
	"github.com/prescient-sched/prescient/predictor"
	"github.com/prescient-sched/prescient/training"
)

// upgradeRegistry is a copy of the registry the version before the
// architecture change (commit 8b61c04) wrote with `train`: duration on a
// 200-job synthetic trace (seed 3) with every learner, memory on it with
// the two baselines, the peak refinement (--series genai-memory, the MLP)
// and the idle model (--series genai).
func upgradeRegistry(t *testing.T) training.Registry {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("testdata/upgrade-8b61c04/registry")); err != nil {
		t.Fatal(err)
	}
	return training.Registry{Dir: dir}
}

// Every artifact kind an earlier version published (models.Artifact for
// duration and memory with every model in it, models.PeakArtifact,
// idle.Artifact) still loads and serves forecasts.
func TestARegistryTheVersionBeforeWroteStillServes(t *testing.T) {
	reg := upgradeRegistry(t)
	for _, target := range []models.Target{models.TargetDuration, models.TargetMemory} {
		art, err := reg.LoadCurrent(target)
		if err != nil {
			t.Fatalf("%s: %v", target, err)
		}
		for name := range art.Models {
			if _, err := art.Model(name); err != nil {
				t.Errorf("%s model %s: %v", target, name, err)
			}
		}
		if target == models.TargetDuration && len(art.Models) < 6 {
			t.Errorf("duration artifact has %d models, want every learner and baseline", len(art.Models))
		}
	}
	v, err := reg.Current(models.TargetPeak)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.LoadPeak(v); err != nil {
		t.Fatalf("peak: %v", err)
	}
	if _, err := reg.LoadCurrentIdle(); err != nil {
		t.Fatalf("idle: %v", err)
	}

	p, err := predictor.New(reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	job := cluster.NewJob("j1", cluster.JobSpec{Tenant: "team-a", Tier: cluster.TierStandard, GPUs: 2, GPUMilli: cluster.MilliGPU},
		time.Date(2024, 1, 2, 10, 0, 0, 0, time.UTC))
	fc, err := p.Forecast(t.Context(), []cluster.Job{job})
	if err != nil {
		t.Fatal(err)
	}
	if fc[0].DurationP50S == nil || fc[0].MemoryP90Bytes == nil {
		t.Errorf("forecast %+v: want a duration and a memory", fc[0])
	}
	start := time.Date(2024, 1, 2, 10, 0, 0, 0, time.UTC)
	s := datasets.Series{ID: "j1"}
	for i := range 40 {
		s.Times = append(s.Times, start.Add(time.Duration(i)*30*time.Second))
		s.Values = append(s.Values, float64(10<<30+i<<24))
	}
	if pf, err := p.RefinePeak(t.Context(), s); err != nil || pf.P90Bytes < pf.PeakSoFarBytes {
		t.Errorf("peak refinement %+v (%v)", pf, err)
	}
	idle, err := predictor.NewIdle(reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m, v := idle.Current(); m == nil || v != 1 {
		t.Errorf("idle model %v version %d, want version 1", m, v)
	}
}
