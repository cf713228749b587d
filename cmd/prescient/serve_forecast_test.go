package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/cluster/clustertest"
	"github.com/prescient-sched/prescient/datasets/datasetstest"
	"github.com/prescient-sched/prescient/models"
	"github.com/prescient-sched/prescient/training"
)

// twoDurationVersions publishes duration versions 1 and 2 into a new
// registry; CURRENT names 2.
func twoDurationVersions(t *testing.T) training.Registry {
	t.Helper()
	all := datasetstest.Philly(t)[:3000]
	reg := training.Registry{Dir: t.TempDir()}
	for i, jobs := range [][]cluster.Job{all[:2000], all[:2500]} {
		rep, err := training.TrainAndPublish(context.Background(),
			training.Config{Target: models.TargetDuration, Learners: []string{models.RollingMedianName}, Seed: 1}, jobs, reg)
		if err != nil || !rep.Published {
			t.Fatalf("publish version %d: %v (%s)", i+1, err, rep.Gate)
		}
	}
	return reg
}

func setCurrent(t *testing.T, reg training.Registry, v string) {
	t.Helper()
	path := filepath.Join(reg.Dir, string(models.TargetDuration), "CURRENT")
	if err := os.WriteFile(path+".tmp", []byte(v+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

func forecastSource(t *testing.T, f *liveForecaster) string {
	t.Helper()
	j := clustertest.Job("j1").Obj()
	fc, err := f.Forecast(t.Context(), []*cluster.Job{&j})
	if err != nil {
		t.Fatal(err)
	}
	return fc[0].Source
}

// CURRENT switched on disk, by hand or by another process, serves within
// the poll interval: the forecasts and /v1/models agree.
func TestAVersionMadeCurrentOnDiskServesWithinThePollInterval(t *testing.T) {
	reg := twoDurationVersions(t)
	setCurrent(t, reg, "1")
	f := newLiveForecaster(reg, slog.New(slog.DiscardHandler))
	f.poll = 20 * time.Millisecond
	if src := forecastSource(t, f); src != "model duration:1" {
		t.Fatalf("source %q, want model duration:1", src)
	}
	setCurrent(t, reg, "2")
	deadline := time.Now().Add(5 * time.Second)
	for forecastSource(t, f) != "model duration:2" {
		if time.Now().After(deadline) {
			t.Fatalf("forecasts still from %q 5 s after CURRENT named version 2", forecastSource(t, f))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A current version that does not load gives way to the newest one that
// does, not to the built-in defaults.
func TestACorruptCurrentVersionServesTheNewestValidOne(t *testing.T) {
	reg := twoDurationVersions(t)
	if err := os.WriteFile(reg.ArtifactPath(models.TargetDuration, 2), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	f := newLiveForecaster(reg, slog.New(slog.DiscardHandler))
	if src := forecastSource(t, f); src != "model duration:1" {
		t.Fatalf("source %q with version 2 corrupt, want model duration:1", src)
	}
}

// What serves is what /v1/models marks serving, and a rollback to a
// version that does not load keeps the one serving rather than bring back
// a newer one.
func TestTheServingVersionIsMarkedAndARollbackToACorruptOneKeepsIt(t *testing.T) {
	reg := twoDurationVersions(t)
	f := newLiveForecaster(reg, slog.New(slog.DiscardHandler))
	f.poll = 20 * time.Millisecond
	if got := f.ServingModels()["duration"]; got != 2 {
		t.Fatalf("serving duration %d, want 2", got)
	}
	if err := os.WriteFile(reg.ArtifactPath(models.TargetDuration, 1), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	setCurrent(t, reg, "1")
	time.Sleep(50 * time.Millisecond)
	if src := forecastSource(t, f); src != "model duration:2" {
		t.Fatalf("source %q after a rollback to a corrupt version 1, want model duration:2 still", src)
	}
	if got := f.ServingModels()["duration"]; got != 2 {
		t.Errorf("serving duration %d, want 2", got)
	}
}
