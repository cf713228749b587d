package predictor_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/datasets"
	"github.com/prescient-sched/prescient/internal/testenv"
	"github.com/prescient-sched/prescient/models/idle"
	"github.com/prescient-sched/prescient/predictor"
	"github.com/prescient-sched/prescient/training"
)

// heliosDays reads the first days of some Helios virtual clusters.
func heliosDays(t *testing.T, days int, vcs ...string) []datasets.Series {
	t.Helper()
	var out []datasets.Series
	for _, vc := range vcs {
		got, err := datasets.ReadSeries("helios:" + testenv.Dataset(t, "helios", "earth_vc_sequence", vc+"_cluster_sequence_vc.csv.gz"))
		if err != nil {
			t.Fatal(err)
		}
		s, n := got[0], days*1440
		out = append(out, datasets.Series{ID: s.ID, Times: s.Times[:n], Values: s.Values[:n], Capacity: s.Capacity[:n], Demand: s.Demand[:n]})
	}
	return out
}

func TestIdleWindowsServesAndReloads(t *testing.T) {
	reg := training.Registry{Dir: t.TempDir()}
	p, err := predictor.NewIdle(reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2020, 5, 3, 12, 0, 0, 0, time.UTC)
	in := idle.DefaultInput(now)
	in.GPUs = []idle.GPUState{{Ref: cluster.GPURef{Node: "vc6YE", Index: 0}},
		{Ref: cluster.GPURef{Node: "vc6YE", Index: 1}, Job: "j", RemainingP50: 30 * time.Minute, RemainingP90: time.Hour}}

	// 1. Without a model: the executor's knowledge only.
	f, err := p.IdleWindows(context.Background(), in)
	if err != nil || p.Version() != 0 || f.Pools[0].P10 != nil || len(f.GPUs[0].Windows) != 1 {
		t.Fatalf("version %d, forecast %+v, %v", p.Version(), f, err)
	}

	// 2. A published model is picked up and blends the pool's telemetry in.
	cfg := training.DefaultIdleConfig()
	cfg.Model.MLP.Epochs = 3
	if _, err := training.TrainIdle(context.Background(), cfg, heliosDays(t, 2, "vc6YE", "vc8Sj", "vc3sl", "vcTJs"), reg); err != nil {
		t.Fatal(err)
	}
	if changed, err := p.Reload(); !changed || err != nil || p.Version() != 1 {
		t.Fatalf("reload: %v, %v, version %d", changed, err, p.Version())
	}
	s := heliosDays(t, 2, "vc6YE")[0]
	h, err := idle.NewPool(s.ID, s.Times[:2160], s.Values[:2160], s.Capacity[:2160], s.Demand[:2160], time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	in.Pools = []idle.PoolState{{ID: "vc6YE", History: h}}
	f, err = p.IdleWindows(context.Background(), in)
	if err != nil || len(f.Pools[0].P10) != len(f.LeadsS) {
		t.Fatalf("forecast %+v, %v", f.Pools, err)
	}

	// 3. A damaged new version is refused; version 1 keeps serving.
	if err := os.WriteFile(reg.ArtifactPath(idle.Target, 2), []byte("PRESCIENT-IDLE\nnonsense"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(reg.Dir+"/idle/CURRENT", []byte("2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Reload(); err == nil || p.Version() != 1 {
		t.Fatalf("damaged version: %v, serving %d", err, p.Version())
	}
}
