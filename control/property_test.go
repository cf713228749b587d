package control

import (
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/store"
)

// TestNoJobIsLostOrStartedTwice drives a Plane through random sequences of
// submissions, plan cycles, backend events (current and stale), node
// reconciliations, cancellations and restarts, and checks after every
// step: every submitted job is stored; a job holds a placement exactly
// while it is running or checkpointing; no GPU is given beyond its
// capacity; and the backend was asked to start only attempts the store
// recorded, each attempt of a job on one set of GPUs.
func TestNoJobIsLostOrStartedTwice(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		e := newEnv(t, fleetOf(2, 4), func(c *Config) {
			c.Policy = rapid.SampledFrom([]string{"prescient", "fifo", "tiresias"}).Draw(rt, "policy")
		})
		var submitted []cluster.JobID
		steps := rapid.IntRange(5, 40).Draw(rt, "steps")
		for i := range steps {
			switch op := rapid.IntRange(0, 8).Draw(rt, fmt.Sprintf("op%d", i)); op {
			case 0, 1:
				id := cluster.JobID(fmt.Sprintf("j%d", len(submitted)))
				s := spec(rapid.SampledFrom([]int{1, 2, 4, 8}).Draw(rt, "gpus"), time.Duration(rapid.IntRange(1, 600).Draw(rt, "p50_min"))*time.Minute)
				s.Tier = cluster.Tier(rapid.IntRange(0, 3).Draw(rt, "tier"))
				s.Checkpointable = rapid.Bool().Draw(rt, "checkpointable")
				e.submit(string(id), s)
				submitted = append(submitted, id)
			case 2:
				e.plane.cycle(e.ctx)
			case 3:
				e.clock.Advance(time.Duration(rapid.IntRange(1, 120).Draw(rt, "advance_min")) * time.Minute)
			case 4, 5:
				if len(submitted) == 0 {
					continue
				}
				id := rapid.SampledFrom(submitted).Draw(rt, "job")
				j := e.job(string(id))
				attempt := j.Attempts
				if rapid.Bool().Draw(rt, "stale") {
					attempt = rapid.IntRange(0, j.Attempts+1).Draw(rt, "attempt")
				}
				ev := executor.JobEvent{Job: id, Attempt: attempt, Node: "n0"}
				switch rapid.IntRange(0, 4).Draw(rt, "event") {
				case 0:
					ev.Type = executor.JobStarted
				case 1:
					ev.Type, ev.ExitCode = executor.JobExited, rapid.IntRange(0, 2).Draw(rt, "code")
				case 2:
					ev.Type, ev.Stopped, ev.ExitCode = executor.JobExited, true, -1
				case 3:
					ev.Type = executor.JobLost
				case 4:
					ev.Type = executor.JobCheckpointed
					ev.Checkpoint = &cluster.Checkpoint{Time: e.clock.Now(), Step: int64(i + 1), Path: "/ckpt"}
				}
				e.event(ev)
			case 6:
				node := rapid.SampledFrom([]string{"n0", "n1"}).Draw(rt, "node")
				ps, err := e.store.Placements(e.ctx)
				if err != nil {
					rt.Fatal(err)
				}
				var running []executor.RunningAttempt
				for _, p := range ps {
					if onNode(p.Allocations, node) && rapid.Bool().Draw(rt, "listed") {
						running = append(running, executor.RunningAttempt{Job: p.Job, Attempt: p.Attempt})
					}
				}
				e.event(executor.JobEvent{Type: executor.NodeSynced, Node: node, Running: running})
			case 7:
				if len(submitted) > 0 {
					_, _ = e.plane.Cancel(e.ctx, rapid.SampledFrom(submitted).Draw(rt, "cancel"))
				}
			case 8:
				e.restart()
			}
			checkInvariants(rt, e, submitted)
		}
	})
}

func checkInvariants(rt *rapid.T, e *env, submitted []cluster.JobID) {
	jobs, err := e.store.ListJobs(e.ctx, store.JobFilter{})
	if err != nil {
		rt.Fatal(err)
	}
	if len(jobs) != len(submitted) {
		rt.Fatalf("%d jobs stored, %d submitted", len(jobs), len(submitted))
	}
	ps, err := e.store.Placements(e.ctx)
	if err != nil {
		rt.Fatal(err)
	}
	placed := map[cluster.JobID]store.Placement{}
	used := map[cluster.GPURef]int{}
	for _, p := range ps {
		placed[p.Job] = p
		for _, a := range p.Allocations {
			if used[a.GPU] += a.Milli; used[a.GPU] > cluster.MilliGPU {
				rt.Fatalf("%s given %d milli-GPUs", a.GPU, used[a.GPU])
			}
		}
	}
	attempts := map[cluster.JobID]int{}
	for _, j := range jobs {
		attempts[j.ID] = j.Attempts
		p, has := placed[j.ID]
		if j.State.Active() != has {
			rt.Fatalf("job %s is %s with placement %v", j.ID, j.State, has)
		}
		if has && p.Attempt != j.Attempts {
			rt.Fatalf("job %s: placement of attempt %d, job at attempt %d", j.ID, p.Attempt, j.Attempts)
		}
	}
	gpus := map[executor.RunningAttempt]string{}
	for _, c := range e.backend.of("start") {
		if c.attempt < 1 || c.attempt > attempts[c.job] {
			rt.Fatalf("backend asked to start %s attempt %d; the store recorded %d attempts", c.job, c.attempt, attempts[c.job])
		}
		key := executor.RunningAttempt{Job: c.job, Attempt: c.attempt}
		where := fmt.Sprint(gpuNames(c.a.Allocations))
		if prev, ok := gpus[key]; ok && prev != where {
			rt.Fatalf("%s attempt %d started on %s and on %s", c.job, c.attempt, prev, where)
		}
		gpus[key] = where
	}
}
