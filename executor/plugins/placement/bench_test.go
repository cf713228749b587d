package placement_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/cluster/clustertest"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/executor/plugins/firstfit"
	"github.com/prescient-sched/prescient/executor/plugins/placement"
	"github.com/prescient-sched/prescient/executor/policies"
)

// fractionalInput is the placement benchmark's situation: 1,250 nodes of 8
// A100s (10,000 GPUs) as two NVLink domains of 4, 25 nodes to a leaf; 1,000
// nodes busy with running jobs of shares (by tenant, with forecast memory)
// and 1-8 whole GPUs; 5,000 queued jobs from 10 tenants, 40% of them
// shares of one GPU, the rest 1-8 GPUs and gangs of 2×8 and 4×8.
func fractionalInput(tb testing.TB) executor.PlanInput {
	rng := rand.New(rand.NewPCG(3, 4))
	now := clustertest.Epoch
	nodes := make([]cluster.Node, 1250)
	for i := range nodes {
		nodes[i] = clustertest.Node(fmt.Sprintf("n%04d", i)).GPUs(8, "A100-SXM4-80GB").
			NVLink("a", 0, 1, 2, 3).NVLink("b", 4, 5, 6, 7).Leaf(fmt.Sprintf("leaf%02d", i/25)).Obj()
	}
	snap := cluster.NewSnapshot(clustertest.Fleet(nodes...), now)
	in := executor.PlanInput{Now: now, Cluster: snap, UsageGPU: map[string]time.Duration{}}
	run := func(id cluster.JobID, job cluster.Job, allocs []cluster.Allocation, mem int64) {
		if err := snap.Allocate(id, allocs); err != nil {
			tb.Fatal(err)
		}
		job.State = cluster.StateRunning
		d := time.Duration(rng.ExpFloat64() * float64(6*time.Hour))
		in.Running = append(in.Running, &executor.RunningJob{
			JobView:     executor.JobView{Job: &job, Forecast: executor.Forecast{Job: id, DurationP50: d, DurationP90: 2 * d, MemoryP90Bytes: mem}},
			Allocations: snap.Allocations(id), Started: now.Add(-d / 2),
		})
	}
	for i := 0; i < 1000; i++ {
		for g := 0; g < 8; {
			tenant := fmt.Sprintf("t%d", rng.IntN(10))
			if rng.IntN(3) == 0 { // a GPU shared by jobs of one tenant
				for used, k := 0, 0; used < 800; k++ {
					m := min(100*(1+rng.IntN(4)), 1000-used)
					id := cluster.JobID(fmt.Sprintf("s%d-%d-%d", i, g, k))
					job := clustertest.Job(string(id)).Share(m).Tenant(tenant).Obj()
					run(id, job, []cluster.Allocation{{GPU: cluster.GPURef{Node: nodes[i].Name, Index: g}, Milli: m}}, int64(m)*50<<20)
					used += m
				}
				g++
				continue
			}
			n := min([]int{1, 2, 4, 8}[rng.IntN(4)], 8-g)
			id := cluster.JobID(fmt.Sprintf("r%d-%d", i, g))
			var allocs []cluster.Allocation
			for k := 0; k < n; k++ {
				allocs = append(allocs, cluster.Allocation{GPU: cluster.GPURef{Node: nodes[i].Name, Index: g + k}, Milli: cluster.MilliGPU})
			}
			run(id, clustertest.Job(string(id)).GPUs(n).Tenant(tenant).Obj(), allocs, 0)
			g += n
		}
	}
	for i := 0; i < 5000; i++ {
		w := clustertest.Job(fmt.Sprintf("q%d", i)).Tenant(fmt.Sprintf("t%d", rng.IntN(10))).
			Submitted(now.Add(-time.Duration(rng.IntN(86400)) * time.Second))
		var mem int64
		switch k := rng.IntN(10); {
		case k < 4:
			m := 100 * (1 + rng.IntN(9))
			w.Share(m)
			mem = int64(m) * 60 << 20
		case k < 8:
			w.GPUs([]int{1, 2, 4, 8}[rng.IntN(4)])
		case k < 9:
			w.GPUs(16).Gang(2)
		default:
			w.GPUs(32).Gang(4)
		}
		job := w.Obj()
		d := time.Duration(rng.ExpFloat64() * float64(4*time.Hour))
		in.Queue = append(in.Queue, &executor.JobView{Job: &job, QueuedSince: job.SubmitTime,
			Forecast: executor.Forecast{Job: job.ID, DurationP50: d, DurationP90: 2 * d, MemoryP90Bytes: mem}})
	}
	in.Free = executor.NewCapacity(snap)
	return in
}

// BenchmarkPlanFractionalTopology is one planning cycle of the prescient
// policy at 10,000 GPUs with fractional jobs and topology, per placement.
// The goal is under 50 ms.
func BenchmarkPlanFractionalTopology(b *testing.B) {
	in := fractionalInput(b)
	for _, policy := range []string{"fifo", "prescient"} {
		for _, name := range []string{"first-fit", placement.PrescientName, placement.BestFitName} {
			benchPlan(b, in, policy, name)
		}
	}
}

func benchPlan(b *testing.B, in executor.PlanInput, policy, name string) {
	b.Run(policy+"/"+name, func(b *testing.B) {
		pol, err := policies.New(policy, policies.Options{Checkpoint: "none"})
		if err != nil {
			b.Fatal(err)
		}
		if name == "first-fit" {
			pol.Placer = firstfit.New() // the prescient policy has its own placement
		} else {
			pl, err := placement.NewPlacer(name, placement.PlacerArgs{})
			if err != nil {
				b.Fatal(err)
			}
			pol.Placer = pl
		}
		p, err := executor.New(pol)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		placed := 0
		for b.Loop() {
			plan, err := p.Plan(b.Context(), in)
			if err != nil {
				b.Fatal(err)
			}
			placed = len(plan.Placements)
		}
		b.ReportMetric(float64(placed), "placements")
	})
}
