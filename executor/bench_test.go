package executor_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/cluster/clustertest"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/executor/policies"
)

// bigInput is the planning benchmark's situation: 1,250 nodes of 8 GPUs
// (10,000 GPUs), 1,200 of them filled by running jobs of 1-8 GPUs, and
// 5,000 queued jobs of 1-32 GPUs from 10 tenants, 10% with deadlines.
func bigInput(tb testing.TB) executor.PlanInput { return scaledInput(tb, 1) }

// scaledInput is bigInput times k: k×1,250 nodes, k×1,200 of them full,
// k×5,000 queued jobs.
func scaledInput(tb testing.TB, k int) executor.PlanInput {
	rng := rand.New(rand.NewPCG(1, 2))
	now := clustertest.Epoch
	nodes := make([]cluster.Node, k*1250)
	for i := range nodes {
		nodes[i] = clustertest.Node(fmt.Sprintf("n%04d", i)).GPUs(8, "A100-SXM4-80GB").Obj()
	}
	snap := cluster.NewSnapshot(clustertest.Fleet(nodes...), now)
	in := executor.PlanInput{Now: now, Cluster: snap, UsageGPU: map[string]time.Duration{}}
	sizes := []int{1, 1, 2, 4, 8}
	for i := 0; i < k*1200; i++ {
		for g := 0; g < 8; {
			n := min(sizes[rng.IntN(len(sizes))], 8-g)
			id := cluster.JobID(fmt.Sprintf("r%d-%d", i, g))
			var allocs []cluster.Allocation
			for k := 0; k < n; k++ {
				allocs = append(allocs, cluster.Allocation{GPU: cluster.GPURef{Node: nodes[i].Name, Index: g + k}, Milli: cluster.MilliGPU})
			}
			if err := snap.Allocate(id, allocs); err != nil {
				tb.Fatal(err)
			}
			job := clustertest.Job(string(id)).GPUs(n).Tenant(fmt.Sprintf("t%d", rng.IntN(10))).Tier(cluster.Tier(rng.IntN(4))).Checkpointable(time.Minute).Obj()
			job.State = cluster.StateRunning
			d := time.Duration(rng.ExpFloat64() * float64(6*time.Hour))
			ran := time.Duration(rng.Float64() * float64(d))
			in.Running = append(in.Running, &executor.RunningJob{
				JobView:     executor.JobView{Job: &job, Forecast: executor.Forecast{Job: id, DurationP50: d, DurationP90: 2 * d}, Progress: ran, AttainedGPU: ran * time.Duration(n)},
				Allocations: snap.Allocations(id), Started: now.Add(-ran), WorkSinceCheckpoint: ran * time.Duration(n),
			})
			g += n
		}
	}
	qsizes := []int{1, 1, 1, 2, 4, 8, 16, 32}
	for i := 0; i < k*5000; i++ {
		w := clustertest.Job(fmt.Sprintf("q%d", i)).GPUs(qsizes[rng.IntN(len(qsizes))]).Tenant(fmt.Sprintf("t%d", rng.IntN(10))).
			Tier(cluster.Tier(rng.IntN(4))).Submitted(now.Add(-time.Duration(rng.IntN(86400)) * time.Second))
		d := time.Duration(rng.ExpFloat64() * float64(4*time.Hour))
		if rng.IntN(10) == 0 {
			w.Deadline(now.Add(d * 3))
		}
		job := w.Obj()
		in.Queue = append(in.Queue, &executor.JobView{Job: &job, QueuedSince: job.SubmitTime,
			Forecast: executor.Forecast{Job: job.ID, DurationP50: d, DurationP90: 2 * d}})
	}
	for t := 0; t < 10; t++ {
		in.UsageGPU[fmt.Sprintf("t%d", t)] = time.Duration(rng.IntN(1000)) * time.Hour
	}
	in.Free = executor.NewCapacity(snap)
	return in
}

// BenchmarkPlan is one planning cycle at 10,000 GPUs and 5,000 queued jobs,
// per policy, and of the prescient policy at ten times that: 100,000 GPUs
// and 50,000 queued, and with the tenants' quotas in two lending cohorts.
// Goals for prescient: under 10 ms and under 100 ms.
func BenchmarkPlan(b *testing.B) {
	in := bigInput(b)
	for _, name := range policies.Names() {
		b.Run(name, func(b *testing.B) { benchPlan(b, name, in) })
	}
	b.Run("prescient-100k-gpus", func(b *testing.B) { benchPlan(b, "prescient", scaledInput(b, 10)) })
	b.Run("prescient-quotas", func(b *testing.B) { benchPlan(b, "prescient", withQuotas(bigInput(b))) })
}

// withQuotas gives the ten tenants of in a nominal quota of 1,000 GPUs
// each, in two cohorts of five that lend each other what they leave idle.
func withQuotas(in executor.PlanInput) executor.PlanInput {
	for t := range 10 {
		in.Cluster.Tenants = append(in.Cluster.Tenants, cluster.Tenant{Name: fmt.Sprintf("t%d", t), Weight: 1,
			Cohort: fmt.Sprintf("c%d", t%2), Quota: []cluster.Quota{{GPUs: 1000}}})
	}
	return in
}

func benchPlan(b *testing.B, policy string, in executor.PlanInput) {
	p := mustPolicy(b, policy)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Plan(b.Context(), in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNewCapacity is the cost of indexing a 10,000-GPU snapshot
// without the simulator's incremental index.
func BenchmarkNewCapacity(b *testing.B) {
	in := bigInput(b)
	for b.Loop() {
		executor.NewCapacity(in.Cluster)
	}
}
