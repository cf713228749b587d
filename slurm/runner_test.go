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
			GPUs: 1, TimeLimit: 2 * time.Hour, Submit: now})
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
