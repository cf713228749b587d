package slurm_test

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/slurm"
)

// refusingClient records its Update calls and refuses any that names job
// "9".
type refusingClient struct {
	fakeClient
	calls [][]string
}

func (c *refusingClient) Update(ctx context.Context, ids []string, u slurm.Update) error {
	c.calls = append(c.calls, ids)
	if slices.Contains(ids, "9") {
		return os.ErrPermission
	}
	return c.fakeClient.Update(ctx, ids, u)
}

// Limits set alike go in one call; when it fails, each job is tried
// alone and only the one refused stays as it was, with its error
// recorded; it is tried again after a wait that doubles with each
// failure.
func TestChangesOfOneValueGoInOneCall(t *testing.T) {
	now := time.Now().UTC()
	var jobs []slurm.Job
	for _, id := range []string{"7", "8", "9", "10"} {
		jobs = append(jobs, slurm.Job{ID: id, User: "u", Partition: "gpu", State: "PENDING", Reason: "Resources",
			GPUs: 1, TimeLimit: 2 * time.Hour, Submit: now, AdminComment: slurm.Mark(2 * time.Hour)}) // marked: lowers batch
	}
	refusing := &refusingClient{fakeClient: fakeClient{jobs: jobs,
		nodes: []slurm.Node{{Name: "n1", GPUs: 4, CPUs: 16, States: []string{"ALLOCATED"}, Partitions: []string{"gpu"}}}}}
	dir := t.TempDir()
	clock := now
	r := &slurm.Runner{Client: refusing, Estimator: &fixedEstimator{}, Dir: dir, Now: func() time.Time { return clock },
		Config: slurm.Config{Autopilot: true, Partitions: []string{"gpu"}, Floor: time.Minute}}
	defer r.Close()
	if err := r.Cycle(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"7", "8", "9", "10"}, {"7"}, {"8"}, {"9"}, {"10"}}
	if !slices.EqualFunc(refusing.calls, want, slices.Equal) {
		t.Errorf("calls %v, want %v", refusing.calls, want)
	}
	for _, j := range refusing.jobs {
		if lowered := j.TimeLimit == 5*time.Minute; lowered == (j.ID == "9") {
			t.Errorf("job %s: limit %s", j.ID, j.TimeLimit)
		}
	}
	if st := r.State(); len(st.Lowered) != 3 {
		t.Errorf("state: %v", st.Lowered)
	}
	events, _ := os.ReadFile(dir + "/events.jsonl")
	if strings.Count(string(events), `"error"`) != 1 || !strings.Contains(string(events), `"job":"9"`) {
		t.Errorf("events: %s", events)
	}
	// The refused job is tried alone again, less often after each
	// failure: one, two, four minutes later.
	for _, c := range []struct {
		at    time.Duration
		tried bool
	}{{30 * time.Second, false}, {time.Minute, true}, {2 * time.Minute, false}, {3 * time.Minute, true},
		{6 * time.Minute, false}, {7 * time.Minute, true}} {
		clock = now.Add(c.at)
		calls := len(refusing.calls)
		if err := r.Cycle(context.Background()); err != nil {
			t.Fatal(err)
		}
		got := refusing.calls[calls:]
		if want := [][]string{{"9"}}; c.tried && !slices.EqualFunc(got, want, slices.Equal) || !c.tried && len(got) > 0 {
			t.Errorf("cycle at +%s: calls %v, want job 9 tried: %v", c.at, got, c.tried)
		}
	}
	if events, _ := os.ReadFile(dir + "/events.jsonl"); strings.Count(string(events), `"error"`) != 4 {
		t.Errorf("events: %s; want the four failures", events)
	}
}

// refuseRestores refuses, while on, every change that gives a job a limit
// of two hours back.
type refuseRestores struct {
	fakeClient
	on       bool
	restores int
}

func (c *refuseRestores) Update(ctx context.Context, ids []string, u slurm.Update) error {
	if u.TimeLimit != nil && *u.TimeLimit == 2*time.Hour {
		c.restores++
		if c.on {
			return os.ErrPermission
		}
	}
	return c.fakeClient.Update(ctx, ids, u)
}

// A restore that failed is tried again at the next cycle however often it
// failed: a lowered limit not given back in time kills the job.
func TestRestoresAreNotHeldBack(t *testing.T) {
	now := time.Now().UTC()
	c := &refuseRestores{fakeClient: fakeClient{jobs: []slurm.Job{{ID: "9", User: "u", Partition: "gpu", State: "PENDING",
		Reason: "Resources", GPUs: 1, TimeLimit: 2 * time.Hour, Submit: now}},
		nodes: []slurm.Node{{Name: "n1", GPUs: 4, CPUs: 16, States: []string{"ALLOCATED"}, Partitions: []string{"gpu"}}}}}
	clock := now
	r := &slurm.Runner{Client: c, Estimator: &fixedEstimator{}, Dir: t.TempDir(), Now: func() time.Time { return clock },
		Config: slurm.Config{Autopilot: true, Partitions: []string{"gpu"}, Floor: time.Minute}}
	defer r.Close()
	if err := r.Cycle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := r.State(); len(st.Lowered) != 1 {
		t.Fatalf("not lowered: %v", st.Lowered)
	}
	r.Config.Autopilot, c.on = false, true // autopilot off: restore, refused four times
	for i := range 4 {
		clock = clock.Add(time.Second)
		if err := r.Cycle(context.Background()); err != nil {
			t.Fatal(err)
		}
		if c.restores != i+1 {
			t.Fatalf("cycle %d: %d restores tried, want %d", i+1, c.restores, i+1)
		}
	}
	c.on = false
	clock = clock.Add(time.Second)
	if err := r.Cycle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := r.State(); len(st.Lowered) != 0 || c.jobs[0].TimeLimit != 2*time.Hour {
		t.Errorf("after the restore went through: lowered %v, limit %s", st.Lowered, c.jobs[0].TimeLimit)
	}
}
