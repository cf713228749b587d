package predictor_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/datasets"
	"github.com/prescient-sched/prescient/datasets/datasetstest"
	"github.com/prescient-sched/prescient/models"
	"github.com/prescient-sched/prescient/predictor"
	"github.com/prescient-sched/prescient/training"
)

// publish trains the given learners on jobs into reg.
func publish(t testing.TB, reg training.Registry, target models.Target, jobs []cluster.Job, learners ...string) training.Report {
	t.Helper()
	rep, err := training.TrainAndPublish(context.Background(), training.Config{Target: target, Learners: learners, Seed: 1}, jobs, reg)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func queued(n int, at time.Time) []cluster.Job {
	jobs := make([]cluster.Job, n)
	tenants := []string{"11cb48", "e13805", "6214e9", "unknown-tenant"}
	for i := range jobs {
		jobs[i] = cluster.NewJob(cluster.JobID("q"+string(rune('a'+i%26))), cluster.JobSpec{
			Tenant: tenants[i%len(tenants)], Tier: cluster.DefaultTier, GPUs: 1 << (i % 4), GPUMilli: cluster.MilliGPU}, at)
	}
	return jobs
}

func TestPredictor(t *testing.T) {
	all := datasetstest.Philly(t)[:3000]
	jobs := all[:2000]
	reg := training.Registry{Dir: t.TempDir()}
	// The rolling median alone, so that a later version of it never loses
	// the gate: the MLP, where it wins, wins by much on these jobs.
	publish(t, reg, models.TargetDuration, jobs, models.RollingMedianName)
	p, err := predictor.New(reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	at := jobs[len(jobs)-1].SubmitTime.Add(time.Hour)

	t.Run("forecasts carry P50 ≤ P90, the version and the top features", func(t *testing.T) {
		fc, err := p.Forecast(context.Background(), queued(8, at))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fc {
			if f.DurationP50S == nil || *f.DurationP50S <= 0 || *f.DurationP90S < *f.DurationP50S {
				t.Fatalf("%s: duration %v..%v", f.JobID, f.DurationP50S, f.DurationP90S)
			}
			if f.MemoryP50Bytes != nil {
				t.Fatalf("%s: memory forecast without a memory model", f.JobID)
			}
			if f.ModelVersion != "duration:1" || len(f.TopFeatures) == 0 {
				t.Fatalf("%s: version %q, drivers %v", f.JobID, f.ModelVersion, f.TopFeatures)
			}
		}
	})
	// Later versions see newer jobs; the rolling median never loses the gate
	// to the serving version.
	t.Run("a newly published version is picked up without a restart", func(t *testing.T) {
		if rep := publish(t, reg, models.TargetDuration, all[:2500], models.RollingMedianName); !rep.Published {
			t.Fatalf("not published: %s", rep.Gate)
		}
		changed, err := p.Reload()
		if err != nil || !changed || p.Versions() != "duration:2" {
			t.Fatalf("reload: changed %v, err %v, serving %q", changed, err, p.Versions())
		}
	})
	t.Run("a corrupt new version is refused and the previous one keeps serving", func(t *testing.T) {
		if rep := publish(t, reg, models.TargetDuration, all, models.RollingMedianName); !rep.Published {
			t.Fatalf("not published: %s", rep.Gate)
		}
		if err := os.WriteFile(reg.ArtifactPath(models.TargetDuration, 3), []byte("garbage"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := p.Reload()
		if !errors.Is(err, models.ErrCorruptArtifact) {
			t.Fatalf("err = %v, want ErrCorruptArtifact", err)
		}
		if p.Versions() != "duration:2" {
			t.Fatalf("serving %q, want duration:2", p.Versions())
		}
		if _, err := p.Forecast(context.Background(), queued(2, at)); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a start with a corrupt current version serves the newest version that loads", func(t *testing.T) {
		p2, err := predictor.New(reg, nil)
		if err != nil {
			t.Fatalf("New with a corrupt current version: %v; want the newest valid version served", err)
		}
		if p2.Versions() != "duration:2" {
			t.Fatalf("serving %q, want duration:2", p2.Versions())
		}
		if refused, serving, ok := p2.Fallback(models.TargetDuration); !ok || refused != 3 || serving != 2 {
			t.Fatalf("Fallback = %d, %d, %v; want 3, 2, true", refused, serving, ok)
		}
		if changed, err := p2.Reload(); changed || err != nil {
			t.Fatalf("a second reload: changed %v, err %v; want the refused version left alone", changed, err)
		}
	})
	t.Run("an observed outcome changes the next forecast of comparable jobs", func(t *testing.T) {
		q := queued(1, at)
		before, _ := p.Forecast(context.Background(), q)
		for i := range 200 {
			j := cluster.NewJob(cluster.JobID("done"+string(rune(i))), q[0].Spec, at.Add(-48*time.Hour))
			j.State, j.Outcome.RunTime = cluster.StateSucceeded, 40*time.Hour
			p.Observe(j)
		}
		after, _ := p.Forecast(context.Background(), q)
		if *after[0].DurationP50S <= *before[0].DurationP50S {
			t.Fatalf("P50 %v → %v after 200 long runs", *before[0].DurationP50S, *after[0].DurationP50S)
		}
	})
	t.Run("an empty registry is an error", func(t *testing.T) {
		if _, err := predictor.New(training.Registry{Dir: t.TempDir()}, nil); !errors.Is(err, training.ErrNoModel) {
			t.Fatalf("err = %v", err)
		}
	})
}

// A learned model is served through a Blend: for a tenant whose every
// outcome is what the rolling median says, its forecast becomes the
// rolling median once those outcomes are observed.
func TestALearnedModelIsServedThroughTheBlend(t *testing.T) {
	jobs := datasetstest.Philly(t)[:2000]
	reg := training.Registry{Dir: t.TempDir()}
	publish(t, reg, models.TargetDuration, jobs, models.MLPName)
	p, err := predictor.New(reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	at := jobs[len(jobs)-1].SubmitTime.Add(time.Hour)
	spec := cluster.JobSpec{Tenant: "steady", Tier: cluster.DefaultTier, GPUs: 8, GPUMilli: cluster.MilliGPU}
	q := []cluster.Job{cluster.NewJob("q", spec, at)}
	for i := range 100 {
		j := cluster.NewJob(cluster.JobID(fmt.Sprint("done", i)), spec, at.Add(-48*time.Hour))
		j.State, j.Outcome.RunTime = cluster.StateSucceeded, 1000*time.Second
		p.Observe(j)
	}
	fc, err := p.Forecast(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	if got := *fc[0].DurationP50S; math.Abs(got-1000) > 1 {
		t.Fatalf("P50 %.1f s after 100 runs of 1000 s each, want the rolling median's 1000 s", got)
	}
}

func TestForecastsMemoryWithAMemoryModel(t *testing.T) {
	cfg := datasets.DefaultGenerateConfig()
	cfg.Jobs = 2000
	jobs, err := datasets.Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	reg := training.Registry{Dir: t.TempDir()}
	publish(t, reg, models.TargetDuration, jobs, models.RollingMedianName)
	publish(t, reg, models.TargetMemory, jobs, models.RollingMedianName)
	p, err := predictor.New(reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	fc, err := p.Forecast(context.Background(), jobs[:5])
	if err != nil {
		t.Fatal(err)
	}
	if fc[0].MemoryP50Bytes == nil || *fc[0].MemoryP90Bytes < *fc[0].MemoryP50Bytes || fc[0].ModelVersion != "duration:1,memory:1" {
		t.Fatalf("forecast %+v", fc[0])
	}
}

// BenchmarkForecast10k forecasts 10,000 queued jobs with the model the
// registry serves after training on the whole Philly table.
func BenchmarkForecast10k(b *testing.B) {
	philly := datasetstest.Philly(b)
	for _, learner := range []string{models.EnsembleName, models.ForestName, models.MLPName, models.RollingMedianName} {
		reg := training.Registry{Dir: b.TempDir()}
		publish(b, reg, models.TargetDuration, philly, learner)
		p, err := predictor.New(reg, nil)
		if err != nil {
			b.Fatal(err)
		}
		jobs := queued(10000, philly[len(philly)-1].SubmitTime.Add(time.Hour))
		b.Run(learner, func(b *testing.B) {
			for b.Loop() {
				if _, err := p.Forecast(context.Background(), jobs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkObserve measures what each finished job costs the serving
// ensemble (trained on the whole Philly table): its outcome joins the
// history and the Blend hears how the model and the median did on it,
// which takes one forecast of its row.
func BenchmarkObserve(b *testing.B) {
	philly := datasetstest.Philly(b)
	reg := training.Registry{Dir: b.TempDir()}
	publish(b, reg, models.TargetDuration, philly, models.EnsembleName)
	p, err := predictor.New(reg, nil)
	if err != nil {
		b.Fatal(err)
	}
	done := philly[len(philly)-1000:]
	i := 0
	for b.Loop() {
		p.Observe(done[i%len(done)])
		i++
	}
}
