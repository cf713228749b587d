package training_test

import (
	"context"
	"slices"
	"testing"

	"github.com/prescient-sched/prescient/cluster"

	"github.com/prescient-sched/prescient/datasets"
	"github.com/prescient-sched/prescient/models"
	"github.com/prescient-sched/prescient/store"
	"github.com/prescient-sched/prescient/training"
)

func TestRetrainReadsFinishedJobsFromTheStoreAndPublishesBothTargets(t *testing.T) {
	ctx := context.Background()
	cfg := datasets.DefaultGenerateConfig()
	cfg.Jobs = 12000
	jobs, err := datasets.Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	st := &pagedStore{jobs: jobs}
	got, err := training.FinishedJobs(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	finished := 0
	for _, j := range jobs {
		if j.State.Terminal() {
			finished++
		}
	}
	if len(got) != finished {
		t.Fatalf("read %d finished jobs, want %d", len(got), finished)
	}
	reg := training.Registry{Dir: t.TempDir()}
	if err := training.Retrain(ctx, st, nil, reg, training.Config{Learners: quick, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	for _, target := range []models.Target{models.TargetDuration, models.TargetMemory} {
		if v, err := reg.Current(target); err != nil || v != 1 {
			t.Fatalf("%s: current %d, %v", target, v, err)
		}
	}
}

// pagedStore answers ListJobs as the job store does: jobs in the asked
// states, in submit order, a page after the After job.
type pagedStore struct{ jobs []cluster.Job }

func (p *pagedStore) ListJobs(_ context.Context, f store.JobFilter) ([]cluster.Job, error) {
	start := 0
	if f.After != "" {
		start = slices.IndexFunc(p.jobs, func(j cluster.Job) bool { return j.ID == f.After }) + 1
	}
	var page []cluster.Job
	for _, j := range p.jobs[start:] {
		if len(page) == f.Limit {
			break
		}
		if slices.Contains(f.States, j.State) {
			page = append(page, j)
		}
	}
	return page, nil
}
