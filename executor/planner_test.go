package executor_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/cluster/clustertest"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/executor/executortest"
	"github.com/prescient-sched/prescient/executor/policies"
)

var epoch = clustertest.Epoch

func node(name string, gpus int) cluster.Node { return clustertest.Node(name).GPUs(gpus, "V100").Obj() }

func ids(s ...string) []cluster.JobID {
	var out []cluster.JobID
	for _, x := range s {
		out = append(out, cluster.JobID(x))
	}
	return out
}

func TestPlanScenarios(t *testing.T) {
	tests := []struct {
		name          string
		build         func(s *executortest.Scenario)
		wantPlaced    []cluster.JobID
		wantPreempted []cluster.JobID
	}{
		{
			name: "fifo places in submit order and passes over a job that does not fit",
			build: func(s *executortest.Scenario) {
				s.Nodes(node("n1", 8))
				s.Queued(clustertest.Job("big").GPUs(16).Submitted(epoch.Add(-3 * time.Minute)).Obj())
				s.Queued(clustertest.Job("b").GPUs(4).Submitted(epoch.Add(-time.Minute)).Obj())
				s.Queued(clustertest.Job("a").GPUs(4).Submitted(epoch.Add(-2 * time.Minute)).Obj())
				s.Queued(clustertest.Job("c").GPUs(1).Obj())
			},
			wantPlaced: ids("a", "b"),
		},
		{
			name: "sjf-oracle starts the shortest jobs first",
			build: func(s *executortest.Scenario) {
				s.Nodes(node("n1", 4))
				s.Queued(clustertest.Job("long").GPUs(2).Obj()).Forecast(5*time.Hour, 5*time.Hour)
				s.Queued(clustertest.Job("short").GPUs(2).Obj()).Forecast(time.Minute, time.Minute)
				s.Queued(clustertest.Job("mid").GPUs(2).Obj()).Forecast(time.Hour, time.Hour)
			},
			wantPlaced: ids("short", "mid"),
		},
		{
			name: "gang job waits rather than splitting across nodes with room for part of it",
			build: func(s *executortest.Scenario) {
				s.Nodes(node("n1", 8), node("n2", 8))
				s.Running(clustertest.Job("r").GPUs(4).Obj()).On("n1", 0, 1, 2, 3)
				s.Queued(clustertest.Job("gang").GPUs(16).Gang(2).Obj())
			},
		},
		{
			name: "gang job starts all of its tasks at once on whole nodes",
			build: func(s *executortest.Scenario) {
				s.Nodes(node("n1", 8), node("n2", 8), node("n3", 8))
				s.Running(clustertest.Job("r").GPUs(4).Obj()).On("n1", 0, 1, 2, 3)
				s.Queued(clustertest.Job("gang").GPUs(16).Gang(2).Obj())
			},
			wantPlaced: ids("gang"),
		},
		{
			name: "srtf-oracle preempts the job with the most remaining time",
			build: func(s *executortest.Scenario) {
				s.Nodes(node("n1", 4))
				s.Running(clustertest.Job("long").GPUs(2).Obj()).On("n1", 0, 1).For(time.Hour).Forecast(10*time.Hour, 10*time.Hour)
				s.Running(clustertest.Job("mid").GPUs(2).Obj()).On("n1", 2, 3).For(time.Hour).Forecast(3*time.Hour, 3*time.Hour)
				s.Queued(clustertest.Job("short").GPUs(2).Obj()).Forecast(10*time.Minute, 10*time.Minute)
			},
			wantPreempted: ids("long"),
		},
		{
			name: "prescient preempts the lower-tier victim that loses the least work since its checkpoint",
			build: func(s *executortest.Scenario) {
				s.Nodes(node("n1", 8))
				s.Running(clustertest.Job("fresh-ckpt").GPUs(4).Tier(cluster.TierBatch).Checkpointable(time.Minute).Obj()).
					On("n1", 0, 1, 2, 3).For(5 * time.Hour).Checkpointed(5 * time.Minute)
				s.Running(clustertest.Job("old-ckpt").GPUs(4).Tier(cluster.TierBatch).Checkpointable(time.Minute).Obj()).
					On("n1", 4, 5, 6, 7).For(5 * time.Hour).Checkpointed(3 * time.Hour)
				s.Queued(clustertest.Job("prod").GPUs(4).Tier(cluster.TierProduction).Obj())
			},
			wantPreempted: ids("fresh-ckpt"),
		},
		{
			name: "prescient takes the lowest tier before less lost work",
			build: func(s *executortest.Scenario) {
				s.Nodes(node("n1", 8))
				s.Running(clustertest.Job("batch").GPUs(4).Tier(cluster.TierBatch).Obj()).On("n1", 0, 1, 2, 3).For(time.Hour).Checkpointed(time.Minute)
				s.Running(clustertest.Job("opp").GPUs(4).Tier(cluster.TierOpportunistic).Obj()).On("n1", 4, 5, 6, 7).For(time.Hour).Checkpointed(time.Hour)
				s.Queued(clustertest.Job("prod").GPUs(4).Tier(cluster.TierProduction).Obj())
			},
			wantPreempted: ids("opp"),
		},
		{
			name: "prescient does not preempt a job of the same tier for a job without a deadline that is not much shorter",
			build: func(s *executortest.Scenario) {
				s.Nodes(node("n1", 4))
				s.Running(clustertest.Job("r").GPUs(4).Checkpointable(time.Minute).Obj()).On("n1", 0, 1, 2, 3).For(time.Hour).Forecast(2*time.Hour, 2*time.Hour)
				s.Queued(clustertest.Job("q").GPUs(4).Obj()).Forecast(40*time.Minute, 40*time.Minute)
			},
		},
		{
			name: "prescient preempts a same-tier job whose predicted remaining time is far longer, least lost work first",
			build: func(s *executortest.Scenario) {
				s.Nodes(node("n1", 8))
				s.Running(clustertest.Job("long-old-ckpt").GPUs(4).Checkpointable(time.Minute).Obj()).On("n1", 0, 1, 2, 3).
					For(time.Hour).Checkpointed(time.Hour).Forecast(10*time.Hour, 12*time.Hour)
				s.Running(clustertest.Job("long-new-ckpt").GPUs(4).Checkpointable(time.Minute).Obj()).On("n1", 4, 5, 6, 7).
					For(time.Hour).Checkpointed(time.Minute).Forecast(10*time.Hour, 12*time.Hour)
				s.Queued(clustertest.Job("short").GPUs(4).Obj()).Forecast(10*time.Minute, 20*time.Minute)
			},
			wantPreempted: ids("long-new-ckpt"),
		},
		{
			name: "prescient spares a longer job that started less than 10 minutes ago",
			build: func(s *executortest.Scenario) {
				s.Nodes(node("n1", 4))
				s.Running(clustertest.Job("long").GPUs(4).Checkpointable(time.Minute).Obj()).On("n1", 0, 1, 2, 3).
					For(5*time.Minute).Forecast(10*time.Hour, 12*time.Hour)
				s.Queued(clustertest.Job("short").GPUs(4).Obj()).Forecast(10*time.Minute, 20*time.Minute)
			},
		},
		{
			name: "prescient starts a job that waited a day before shorter ones",
			build: func(s *executortest.Scenario) {
				s.Nodes(node("n1", 4))
				s.Queued(clustertest.Job("long").GPUs(4).Submitted(epoch.Add(-25*time.Hour)).Obj()).Forecast(20*time.Hour, 30*time.Hour)
				s.Queued(clustertest.Job("short").GPUs(4).Obj()).Forecast(time.Minute, time.Minute)
			},
			wantPlaced: ids("long"),
		},
		{
			name: "tiresias starts a job of the first queue before one of the second",
			build: func(s *executortest.Scenario) {
				s.Nodes(node("n1", 2))
				s.Queued(clustertest.Job("old").GPUs(2).Submitted(epoch.Add(-2 * time.Hour)).Obj()).Attained(4 * time.Hour).
					LastRan(20 * time.Minute).Since(epoch.Add(-time.Hour))
				s.Queued(clustertest.Job("fresh").GPUs(2).Obj())
			},
			wantPlaced: ids("fresh"),
		},
		{
			name: "tiresias promotes a job that waited PromoteKnob times its last run to the first queue",
			build: func(s *executortest.Scenario) {
				s.Nodes(node("n1", 2))
				s.Queued(clustertest.Job("old").GPUs(2).Submitted(epoch.Add(-4 * time.Hour)).Obj()).Attained(4 * time.Hour).
					LastRan(20 * time.Minute).Since(epoch.Add(-160 * time.Minute))
				s.Queued(clustertest.Job("fresh").GPUs(2).Obj())
			},
			wantPlaced: ids("old"),
		},
		{
			name: "prescient preempts a same-tier job without deadline for an urgent deadline job",
			build: func(s *executortest.Scenario) {
				s.Nodes(node("n1", 4))
				s.Running(clustertest.Job("r").GPUs(4).Checkpointable(time.Minute).Obj()).On("n1", 0, 1, 2, 3).For(time.Hour).Forecast(5*time.Hour, 5*time.Hour)
				s.Queued(clustertest.Job("dl").GPUs(4).Deadline(epoch.Add(70*time.Minute)).Obj()).Forecast(time.Hour, time.Hour)
			},
			wantPreempted: ids("r"),
		},
		{
			name: "easy-backfill starts a short job before the reservation but not a long one",
			build: func(s *executortest.Scenario) {
				s.Nodes(node("n1", 8))
				s.Running(clustertest.Job("r").GPUs(6).Obj()).On("n1", 0, 1, 2, 3, 4, 5).Forecast(2*time.Hour, 2*time.Hour).For(time.Hour)
				s.Queued(clustertest.Job("head").GPUs(8).Submitted(epoch.Add(-3 * time.Minute)).Obj())
				s.Queued(clustertest.Job("long").GPUs(2).Submitted(epoch.Add(-2*time.Minute)).Obj()).Forecast(time.Hour, 5*time.Hour)
				s.Queued(clustertest.Job("short").GPUs(2).Submitted(epoch.Add(-time.Minute)).Obj()).Forecast(10*time.Minute, 30*time.Minute)
			},
			wantPlaced: ids("short"),
		},
		{
			name: "easy-backfill lets a long job start on GPUs that the reservation does not need",
			build: func(s *executortest.Scenario) {
				s.Nodes(node("n1", 4), node("n2", 4))
				s.Running(clustertest.Job("r1").GPUs(4).Obj()).On("n1", 0, 1, 2, 3).Forecast(2*time.Hour, 2*time.Hour).For(time.Hour)
				s.Running(clustertest.Job("r2").GPUs(2).Obj()).On("n2", 0, 1).Forecast(9*time.Hour, 9*time.Hour).For(time.Hour)
				s.Queued(clustertest.Job("head").GPUs(4).Submitted(epoch.Add(-2 * time.Minute)).Obj())
				s.Queued(clustertest.Job("long").GPUs(2).Submitted(epoch.Add(-time.Minute)).Obj()).Forecast(5*time.Hour, 5*time.Hour)
			},
			wantPlaced: ids("long"),
		},
		{
			name: "prescient reserves for an urgent deadline job and backfills only jobs whose P90 ends before",
			build: func(s *executortest.Scenario) {
				s.Nodes(node("n1", 8))
				s.Running(clustertest.Job("r").GPUs(6).Tier(cluster.TierProduction).Obj()).On("n1", 0, 1, 2, 3, 4, 5).Forecast(2*time.Hour, 2*time.Hour).For(time.Hour)
				s.Queued(clustertest.Job("dl").GPUs(8).Deadline(epoch.Add(time.Hour+20*time.Minute)).Obj()).Forecast(time.Hour, time.Hour)
				s.Queued(clustertest.Job("long").GPUs(2).Obj()).Forecast(20*time.Minute, 5*time.Hour)
				s.Queued(clustertest.Job("short").GPUs(2).Obj()).Forecast(30*time.Minute, 50*time.Minute)
			},
			wantPlaced: ids("short"),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			policy := strings.Fields(tc.name)[0]
			if policy == "gang" {
				policy = "fifo"
			}
			s := executortest.NewScenario(t, policy)
			tc.build(s)
			plan := s.Plan()
			if got := executortest.Placed(plan); !slices.Equal(got, tc.wantPlaced) {
				t.Errorf("placed %v, want %v; waiting: %+v", got, tc.wantPlaced, plan.Waiting)
			}
			if got := executortest.Preempted(plan); !slices.Equal(got, tc.wantPreempted) {
				t.Errorf("preempted %v, want %v", got, tc.wantPreempted)
			}
			for _, pl := range plan.Placements {
				if pl.Reason == "" {
					t.Errorf("placement of %s has no reason", pl.Job)
				}
			}
		})
	}
}

func TestGangTasksLandOnSeparateWholeNodes(t *testing.T) {
	s := executortest.NewScenario(t, "fifo").Nodes(node("n1", 8), node("n2", 8))
	s.Queued(clustertest.Job("gang").GPUs(16).Gang(2).Obj())
	plan := s.Plan()
	if len(plan.Placements) != 1 {
		t.Fatalf("placements %v", executortest.Placed(plan))
	}
	if nodes := executortest.Nodes(plan.Placements[0]); len(nodes) != 2 || len(plan.Placements[0].Allocations) != 16 {
		t.Errorf("gang on nodes %v with %d GPUs, want 2 nodes and 16 GPUs", nodes, len(plan.Placements[0].Allocations))
	}
}

func TestDeadlineFeasibilityIsReportedAtSubmission(t *testing.T) {
	s := executortest.NewScenario(t, "prescient").Nodes(node("n1", 1))
	s.Running(clustertest.Job("r").Obj()).On("n1", 0)
	s.Queued(clustertest.Job("ok").Deadline(epoch.Add(3*time.Hour)).Obj()).Forecast(time.Hour, 2*time.Hour)
	s.Queued(clustertest.Job("late").Deadline(epoch.Add(time.Hour)).Obj()).Forecast(time.Hour, 2*time.Hour)
	plan := s.Plan()
	got := map[cluster.JobID]bool{}
	for _, d := range plan.Deadlines {
		got[d.Job] = d.Feasible
	}
	if !got["ok"] || got["late"] || len(got) != 2 {
		t.Errorf("feasibility %v, want ok feasible and late not", got)
	}
}

func TestStoppingJobsGPUsGoToTheJobThatPreemptedThem(t *testing.T) {
	s := executortest.NewScenario(t, "srtf-oracle").Nodes(node("n1", 4))
	s.Running(clustertest.Job("victim").GPUs(4).Obj()).On("n1", 0, 1, 2, 3).Forecast(10*time.Hour, 10*time.Hour).Stopping()
	s.Queued(clustertest.Job("short").GPUs(4).Obj()).Forecast(time.Minute, time.Minute)
	s.Queued(clustertest.Job("other").GPUs(4).Obj()).Forecast(2*time.Minute, 2*time.Minute)
	plan := s.Plan()
	if len(plan.Preemptions) != 0 || len(plan.Placements) != 0 {
		t.Errorf("plan preempts %v and places %v; want both to wait for the stopping job", executortest.Preempted(plan), executortest.Placed(plan))
	}
}

func TestTiresiasWakesWhenARunningJobIsDemoted(t *testing.T) {
	s := executortest.NewScenario(t, "tiresias").Nodes(node("n1", 4))
	s.Running(clustertest.Job("r").GPUs(2).Obj()).On("n1", 0, 1).For(10 * time.Minute)
	plan := s.Plan()
	// 1 GPU-hour threshold, 20 GPU-minutes attained, 2 GPUs: 20 minutes on.
	want := epoch.Add(20*time.Minute + time.Second)
	if !plan.NextReplan.Equal(want) {
		t.Errorf("next replan %s, want %s", plan.NextReplan, want)
	}
}

func TestTiresiasWakesWhenAWaitingJobIsPromoted(t *testing.T) {
	s := executortest.NewScenario(t, "tiresias").Nodes(node("n1", 2))
	s.Running(clustertest.Job("r").GPUs(2).Obj()).On("n1", 0, 1).For(2 * time.Hour)
	s.Queued(clustertest.Job("old").GPUs(2).Obj()).Attained(4 * time.Hour).LastRan(20 * time.Minute).Since(epoch.Add(-time.Hour))
	plan := s.Plan()
	// Knob 8 × 20 minutes after it was queued again; the running job is in
	// the last queue already and wakes nothing.
	if want := epoch.Add(100 * time.Minute); !plan.NextReplan.Equal(want) {
		t.Errorf("next replan %s, want %s", plan.NextReplan, want)
	}
}

func TestYoungDalyIntervalIsCappedByTheLossBound(t *testing.T) {
	s := executortest.NewScenario(t, "prescient").Checkpoint(policies.PrescientCheckpoint).NodeMTBF(100 * time.Hour).Nodes(node("n1", 8))
	s.Queued(clustertest.Job("j").GPUs(8).Checkpointable(72 * time.Second).Obj())
	plan := s.Plan()
	// Young/Daly says 2h (below); prescient's default loses at most 20m.
	if len(plan.Placements) != 1 || plan.Placements[0].CheckpointEvery != 20*time.Minute {
		t.Fatalf("placements %+v, want one with a checkpoint every 20m", plan.Placements)
	}
}

func TestYoungDalyInterval(t *testing.T) {
	s := executortest.NewScenario(t, "prescient").Checkpoint("young-daly").NodeMTBF(100 * time.Hour).Nodes(node("n1", 8))
	s.Queued(clustertest.Job("j").GPUs(8).Checkpointable(72 * time.Second).Obj())
	plan := s.Plan()
	// sqrt(2 × 72 s × 100 h) = sqrt(2 × 72 × 360000) s = 7200 s.
	if len(plan.Placements) != 1 || plan.Placements[0].CheckpointEvery != 2*time.Hour {
		t.Fatalf("placements %+v, want one with a checkpoint every 2h", plan.Placements)
	}
}

func TestPlanDoesNotChangeItsInput(t *testing.T) {
	s := executortest.NewScenario(t, "prescient").Nodes(node("n1", 8))
	s.Queued(clustertest.Job("a").GPUs(4).Obj())
	in := s.Input()
	before := in.Free.FreeGPUs()
	pol := mustPolicy(t, "prescient")
	if _, err := pol.Plan(t.Context(), in); err != nil {
		t.Fatal(err)
	}
	if in.Free.FreeGPUs() != before || in.Cluster.AllocatedMilli() != 0 || in.Queue[0].Job.State != cluster.StateQueued {
		t.Error("Plan changed its input")
	}
}

func TestInvalidPolicyIsRejected(t *testing.T) {
	if _, err := executor.New(executor.Policy{Name: "x"}); err == nil {
		t.Error("a policy without an order was accepted")
	}
}
