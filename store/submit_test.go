package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
)

// TestConcurrentSubmissionsAreEachStoredWhole submits from many goroutines
// at once, so that they share transactions: each job is stored with its
// event, its run and its forecast; a duplicate ID among them is refused
// with ErrExists without taking the others of its group with it, and the
// first submission of that ID stands.
func TestConcurrentSubmissionsAreEachStoredWhole(t *testing.T) {
	ctx := context.Background()
	s, path := openTest(t)
	const n = 200
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			id := fmt.Sprintf("j%03d", i)
			if i%50 == 49 {
				id = fmt.Sprintf("j%03d", i-1) // the same ID as the one before
			}
			job := fullJob(id)
			job.Spec.Labels = map[string]string{"i": fmt.Sprint(i)}
			errs[i] = s.Submit(ctx, Submission{Job: job, Run: RunSpec{Command: []string{"train", fmt.Sprint(i)}},
				Forecast: &JobForecast{Job: job.ID, DurationP50: time.Duration(i+1) * time.Minute, DurationP90: time.Hour, Source: "test"}})
		})
	}
	wg.Wait()
	// Reopen: what a submission was told is what is on disk.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range n {
		id := cluster.JobID(fmt.Sprintf("j%03d", i))
		dup := i%50 == 49
		if dup {
			id = cluster.JobID(fmt.Sprintf("j%03d", i-1))
		}
		pair := i%50 >= 48 // one of the two submissions of a duplicated ID
		switch {
		case pair && errs[i] != nil && !errors.Is(errs[i], ErrExists):
			t.Errorf("submission %d of %s: %v, want nil or ErrExists", i, id, errs[i])
		case !pair && errs[i] != nil:
			t.Errorf("submission %d of %s: %v", i, id, errs[i])
		}
		if pair && !dup && (errs[i] == nil) == (errs[i+1] == nil) {
			t.Errorf("both submissions of %s answered %v and %v, want one stored and one ErrExists", id, errs[i], errs[i+1])
		}
		if errs[i] != nil {
			continue
		}
		job, err := s.GetJob(ctx, id)
		if err != nil {
			t.Fatalf("%s answered nil but: %v", id, err)
		}
		if job.Spec.Labels["i"] != fmt.Sprint(i) {
			t.Errorf("%s holds the spec of submission %s, want %d (the one that was answered nil)", id, job.Spec.Labels["i"], i)
		}
		evs, err := s.Events(ctx, id)
		if err != nil || len(evs) != 1 || evs[0].Type != EventSubmitted {
			t.Errorf("events of %s: %+v, %v; want one submitted event", id, evs, err)
		}
		run, err := s.GetRun(ctx, id)
		if err != nil || len(run.Command) != 2 || run.Command[1] != fmt.Sprint(i) {
			t.Errorf("run of %s: %+v, %v; want train %d", id, run, err, i)
		}
		fs, err := s.Forecasts(ctx, []cluster.JobID{id})
		if err != nil || fs[id].DurationP50 != time.Duration(i+1)*time.Minute {
			t.Errorf("forecast of %s: %+v, %v; want a P50 of %d minutes", id, fs[id], err, i+1)
		}
	}
}

// TestASubmissionRefusedBeforeItsGroup checks what is refused before a
// transaction: a job not queued, env without a command, a forecast of
// another job. Nothing of it is stored.
func TestASubmissionRefusedBeforeItsGroup(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	running := fullJob("run")
	if err := running.Transition(cluster.StateRunning, t0); err != nil {
		t.Fatal(err)
	}
	for name, sub := range map[string]Submission{
		"running":  {Job: running},
		"env only": {Job: fullJob("env"), Run: RunSpec{Env: map[string]string{"A": "1"}}},
		"forecast": {Job: fullJob("fc"), Forecast: &JobForecast{Job: "other"}},
	} {
		if err := s.Submit(ctx, sub); err == nil {
			t.Errorf("%s: stored, want an error", name)
		}
		if _, err := s.GetJob(ctx, sub.Job.ID); !errors.Is(err, ErrNotFound) {
			t.Errorf("%s: GetJob = %v, want ErrNotFound", name, err)
		}
	}
}
