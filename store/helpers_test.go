package store

import (
	"context"
	"database/sql"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
)

// t0 is the submit time test jobs start from.
var t0 = time.Date(2026, 3, 1, 9, 0, 0, 123456789, time.UTC)

// jobBuilder builds test jobs: testJob("j1").Tenant("a").GPUs(8).Obj().
type jobBuilder struct{ j cluster.Job }

// testJob returns a builder of a queued one-GPU standard job submitted at t0.
func testJob(id string) *jobBuilder {
	spec := cluster.JobSpec{Name: "train-" + id, Tenant: "tenant-a", User: "alice", Tier: cluster.TierStandard,
		GPUs: 1, GPUMilli: cluster.MilliGPU}
	return &jobBuilder{j: cluster.NewJob(cluster.JobID(id), spec, t0)}
}

func (b *jobBuilder) Tenant(t string) *jobBuilder          { b.j.Spec.Tenant = t; return b }
func (b *jobBuilder) Tier(t cluster.Tier) *jobBuilder      { b.j.Spec.Tier = t; return b }
func (b *jobBuilder) Submitted(t time.Time) *jobBuilder    { b.j.SubmitTime = t; return b }
func (b *jobBuilder) GPUs(n int) *jobBuilder               { b.j.Spec.GPUs = n; return b }
func (b *jobBuilder) Deadline(t time.Time) *jobBuilder     { b.j.Spec.Deadline = t; return b }
func (b *jobBuilder) State(s cluster.JobState) *jobBuilder { b.j.State = s; return b }
func (b *jobBuilder) Obj() cluster.Job                     { return b.j }

// fullJob is a job with every field set, to check round trips.
func fullJob(id string) cluster.Job {
	j := testJob(id).Tier(cluster.TierProduction).GPUs(8).Deadline(t0.Add(36*time.Hour + 7)).Obj()
	j.Spec.User = "bob"
	j.Spec.GPUModels = []string{"H100", "A100-80GB"}
	j.Spec.CPUMilli, j.Spec.MemoryBytes = 64000, 512<<30
	j.Spec.GangSize, j.Spec.Checkpointable, j.Spec.CheckpointCost = 2, true, 90*time.Second+1
	j.Spec.Labels = map[string]string{cluster.LabelFramework: "pytorch", cluster.LabelModel: "llama-70b"}
	j.Spec.Data = &cluster.DataSource{Name: "pile", Bytes: 800 << 30, Nodes: []string{"n1"}, Racks: []string{"rack-a"}}
	j.Outcome = cluster.Outcome{RunTime: 5*time.Minute + 3, PeakGPUMemoryBytes: 70 << 30, EnergyJ: 1.25e7 / 3, ExitCode: 0}
	return j
}

// clock is a settable test clock, safe for concurrent use.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// openTest opens a store in a new temporary directory and closes it at the
// end of the test.
func openTest(t testing.TB, opts ...Option) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "prescient.db")
	s, err := Open(context.Background(), path, opts...)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s, path
}

// reopen closes s and opens the store at path again, as a restarted
// process does; the new store is closed at the end of the test.
func reopen(t testing.TB, s *Store, path string) *Store {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// mustSubmit submits jobs and fails the test on an error.
func mustSubmit(t testing.TB, s *Store, jobs ...cluster.Job) {
	t.Helper()
	for _, j := range jobs {
		if err := s.SubmitJob(context.Background(), j); err != nil {
			t.Fatalf("SubmitJob(%s): %v", j.ID, err)
		}
	}
}

// sameJob reports whether two jobs are equal, with times compared by
// time.Equal and empty slices and maps equal to nil ones.
func sameJob(a, b cluster.Job) bool {
	return reflect.DeepEqual(normalJob(a), normalJob(b))
}

func normalJob(j cluster.Job) cluster.Job {
	utc := func(t *time.Time) {
		if !t.IsZero() {
			*t = t.UTC()
		}
	}
	utc(&j.SubmitTime)
	utc(&j.StartTime)
	utc(&j.EndTime)
	utc(&j.Spec.Deadline)
	if j.LastCheckpoint != nil {
		cp := *j.LastCheckpoint
		utc(&cp.Time)
		j.LastCheckpoint = &cp
	}
	if len(j.Spec.GPUModels) == 0 {
		j.Spec.GPUModels = nil
	}
	if len(j.Spec.Labels) == 0 {
		j.Spec.Labels = nil
	}
	return j
}

// count runs a COUNT query against the store's database.
func count(t testing.TB, s *Store, query string, args ...any) int {
	t.Helper()
	var n int
	if err := s.r.QueryRowContext(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// ids returns the IDs of jobs.
func ids(jobs []cluster.Job) []cluster.JobID {
	out := make([]cluster.JobID, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	return out
}

// seedJobs stores n jobs made by mk, each with its submitted event, as
// SubmitJob would but in one transaction, which is much faster.
func seedJobs(t testing.TB, s *Store, n int, mk func(i int) cluster.Job) {
	t.Helper()
	ctx := context.Background()
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		for i := range n {
			j := mk(i)
			row, err := encodeJob(j)
			if err != nil {
				return err
			}
			if err := insertJob(ctx, tx, &row); err != nil {
				return err
			}
			ev := Event{JobID: j.ID, Time: j.SubmitTime, Type: EventSubmitted, To: cluster.StateQueued}
			if err := insertEvent(ctx, tx, &ev); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("seed %d jobs: %v", n, err)
	}
}

// openFile opens a store in a new file and returns it with the file's
// path (for reopen).
func openFile(t testing.TB) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "prescient.db")
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	return s, path
}
