package store

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
)

// Eight goroutines each submit and start their own jobs and checkpoint one
// shared job. No call may fail (no SQLITE_BUSY), and no update may be lost:
// the shared job's checkpoint count is the sum of all goroutines'.
func TestConcurrentWritersNeitherFailNorLoseUpdates(t *testing.T) {
	const workers, ops = 8, 100
	ctx := context.Background()
	c := &clock{now: t0.Add(time.Hour)}
	s, _ := openTest(t, WithClock(c.Now))
	mustSubmit(t, s, testJob("shared").Obj())
	if _, err := s.UpdateJob(ctx, "shared", to(c, cluster.StateRunning, EventStarted)); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() { errs <- runWorker(ctx, s, w, ops) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	shared, err := s.GetJob(ctx, "shared")
	if err != nil {
		t.Fatal(err)
	}
	// Each worker's ops are split into thirds: submit, start, checkpoint shared.
	if want := int64(workers * (ops / 3)); shared.LastCheckpoint == nil || shared.LastCheckpoint.Step != want {
		t.Errorf("shared job's checkpoint = %+v, want step %d", shared.LastCheckpoint, want)
	}
	if n, want := count(t, s, "SELECT COUNT(*) FROM jobs WHERE state = 'running'"), 1+workers*(ops/3); n != want {
		t.Errorf("%d running jobs, want %d", n, want)
	}
}

// runWorker does ops operations: a third submitting jobs, a third starting
// them, a third counting up the shared job's checkpoint step, interleaved
// with reads.
func runWorker(ctx context.Context, s *Store, w, ops int) error {
	bump := func(j *cluster.Job) (EventType, string, error) {
		step := int64(1)
		if j.LastCheckpoint != nil {
			step = j.LastCheckpoint.Step + 1
		}
		return EventCheckpointed, "", j.Checkpointed(cluster.Checkpoint{Time: t0.Add(time.Hour), Step: step})
	}
	start := func(j *cluster.Job) (EventType, string, error) {
		return EventStarted, "", j.Transition(cluster.StateRunning, t0.Add(time.Hour))
	}
	for i := range ops / 3 {
		id := cluster.JobID(fmt.Sprintf("w%d-%03d", w, i))
		if err := s.SubmitJob(ctx, testJob(string(id)).Obj()); err != nil {
			return err
		}
		if _, err := s.UpdateJob(ctx, id, start); err != nil {
			return err
		}
		if _, err := s.UpdateJob(ctx, "shared", bump); err != nil {
			return err
		}
		if _, err := s.ListJobs(ctx, JobFilter{Tenant: "tenant-a", Limit: 20}); err != nil {
			return err
		}
	}
	return nil
}
