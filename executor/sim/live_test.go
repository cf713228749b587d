package sim_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/cluster/clustertest"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/executor/policies"
	"github.com/prescient-sched/prescient/executor/sim"
)

func TestAReplayFromALiveStateKeepsRunningJobsWhereTheyAre(t *testing.T) {
	start := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	fleet := clustertest.Fleet(clustertest.Node("n0").GPUs(1, "A100").Obj())
	// r1 runs on the only GPU: 1h of work, 40m done. q1 (1h) was submitted
	// before the start and waits; q2 (30m) arrives 10m after the start.
	r1 := cluster.NewJob("r1", cluster.JobSpec{Tenant: "a", GPUs: 1, GPUMilli: cluster.MilliGPU}, start.Add(-2*time.Hour))
	r1.Outcome.RunTime = time.Hour
	q1 := cluster.NewJob("q1", cluster.JobSpec{Tenant: "a", GPUs: 1, GPUMilli: cluster.MilliGPU}, start.Add(-time.Hour))
	q1.Outcome.RunTime = time.Hour
	q2 := cluster.NewJob("q2", cluster.JobSpec{Tenant: "a", GPUs: 1, GPUMilli: cluster.MilliGPU}, start.Add(10*time.Minute))
	q2.Outcome.RunTime = 30 * time.Minute
	running := []sim.Placed{{Job: r1, Started: start.Add(-40 * time.Minute), Progress: 40 * time.Minute,
		Allocations: []cluster.Allocation{{Job: "r1", GPU: cluster.GPURef{Node: "n0"}, Milli: cluster.MilliGPU}},
		Forecast:    executor.Forecast{Job: "r1", DurationP50: time.Hour, DurationP90: time.Hour}}}
	r := replay(t, "fifo", fleet, []cluster.Job{q1, q2}, func(c *sim.Config) {
		c.Start, c.Running, c.Outcomes, c.Check = start, running, true, true
	})
	want := map[cluster.JobID][2]time.Duration{ // start, end after the replay's start
		"r1": {-40 * time.Minute, 20 * time.Minute},
		"q1": {20 * time.Minute, 80 * time.Minute},
		"q2": {80 * time.Minute, 110 * time.Minute},
	}
	if len(r.Outcomes) != 3 {
		t.Fatalf("outcomes %+v, want 3", r.Outcomes)
	}
	for _, o := range r.Outcomes {
		w := want[o.Job]
		if !o.Start.Equal(start.Add(w[0])) || !o.End.Equal(start.Add(w[1])) {
			t.Errorf("%s: %s → %s, want %s → %s", o.Job, o.Start.Sub(start), o.End.Sub(start), w[0], w[1])
		}
	}

	// Until cuts the replay: q2 does not start.
	r = replay(t, "fifo", fleet, []cluster.Job{q1, q2}, func(c *sim.Config) {
		c.Start, c.Running, c.Outcomes, c.Until = start, running, true, start.Add(time.Hour)
	})
	for _, o := range r.Outcomes {
		if o.Job == "q2" && (!o.Start.IsZero() || !o.End.IsZero()) {
			t.Errorf("q2 %+v, want neither start nor end before Until", o)
		}
		if o.Job == "q1" && (!o.Start.Equal(start.Add(20*time.Minute)) || !o.End.IsZero()) {
			t.Errorf("q1 %+v, want started at +20m and not finished by Until", o)
		}
	}
}

func TestRunningJobsNeedAStartAndFreeGPUs(t *testing.T) {
	fleet := clustertest.Fleet(clustertest.Node("n0").GPUs(1, "A100").Obj())
	start := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	j := cluster.NewJob("r1", cluster.JobSpec{Tenant: "a", GPUs: 1, GPUMilli: cluster.MilliGPU}, start)
	j.Outcome.RunTime = time.Hour
	p := sim.Placed{Job: j, Started: start, Allocations: []cluster.Allocation{{GPU: cluster.GPURef{Node: "n0"}, Milli: cluster.MilliGPU}}}
	pol, err := policies.New("fifo", policies.Options{})
	if err != nil {
		t.Fatal(err)
	}
	planner, err := executor.New(pol)
	if err != nil {
		t.Fatal(err)
	}
	oracle, err := executor.NewOracle(nil, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	cfg := sim.Config{Fleet: fleet, Planner: planner, Forecaster: oracle, Running: []sim.Placed{p}}
	if _, err := sim.Run(context.Background(), cfg); err == nil {
		t.Error("running jobs without a start: no error")
	}
	p2 := p
	p2.Job.ID = "r2"
	cfg.Start, cfg.Running = start, []sim.Placed{p, p2}
	if _, err := sim.Run(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "r2") {
		t.Errorf("two running jobs on one GPU: %v, want an error naming r2", err)
	}
	p.Started = start.Add(time.Minute)
	cfg.Running = []sim.Placed{p}
	if _, err := sim.Run(context.Background(), cfg); err == nil {
		t.Error("a running job started after the replay's start: no error")
	}
}
