package slurm_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/slurm"
)

// bigSnapshot is a 10,000-GPU cluster (1,250 nodes of 8 in two
// partitions), 5,000 running jobs and pending jobs of 1 to 8 GPUs.
func bigSnapshot(pendingJobs int) (slurm.Snapshot, map[string]slurm.Estimate) {
	rng := rand.New(rand.NewPCG(1, 1))
	snap := slurm.Snapshot{Now: t0}
	est := map[string]slurm.Estimate{}
	for i := range 1250 {
		p := []string{"gpu"}
		if i%5 == 0 {
			p = []string{"long"}
		}
		snap.Nodes = append(snap.Nodes, slurm.Node{Name: fmt.Sprintf("n%04d", i), GPUs: 8, CPUs: 64, States: []string{"MIXED"}, Partitions: p})
	}
	part := func(i int) string {
		if i%5 == 0 {
			return "long"
		}
		return "gpu"
	}
	for i := range 5000 {
		j := running(fmt.Sprintf("r%d", i), int64(1+rng.IntN(2)), 24*time.Hour, time.Duration(rng.IntN(20))*time.Hour)
		j.Partition = part(i)
		snap.Jobs = append(snap.Jobs, j)
		est[j.ID] = slurm.Estimate{RunP50: time.Duration(1+rng.IntN(30)) * time.Hour}
	}
	for i := range pendingJobs {
		j := pending(fmt.Sprintf("p%d", i), int64(1<<rng.IntN(4)), 24*time.Hour, int64(rng.IntN(1000)))
		j.Partition = part(i)
		snap.Jobs = append(snap.Jobs, j)
		run := time.Duration(1+rng.IntN(600)) * time.Minute
		est[j.ID] = slurm.Estimate{RunP50: run, Limit: 2 * run}
	}
	return snap, est
}

// BenchmarkAdvise10k predicts starts and ends for 10,000 pending jobs
// behind 5,000 running ones on 10,000 GPUs, and decides the changes.
func BenchmarkAdvise10k(b *testing.B) {
	snap, est := bigSnapshot(10000)
	cfg := slurm.Config{Comment: true, Autopilot: true, Partitions: []string{"gpu", "long"}, Floor: 10 * time.Minute}
	b.ResetTimer()
	for b.Loop() {
		adv := slurm.Advise(snap, est)
		var st slurm.State
		st.Observe(snap)
		if acts := slurm.Decide(cfg, snap, adv, &st); len(acts) < 10000 {
			b.Fatalf("%d actions", len(acts))
		}
	}
}
