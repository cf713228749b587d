package placement_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/cluster/clustertest"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/executor/plugins/placement"
	"github.com/prescient-sched/prescient/executor/policies"
	"github.com/prescient-sched/prescient/executor/sim"
)

// TestReplaysWithEveryPlacementKeepTheInvariants replays random workloads
// (shares of tenants, whole GPUs, gangs) on random fleets (NVLink domains,
// leaves, MIG) through the planner with each placement, the simulator
// checking after every step that no GPU is over-allocated or given twice
// and no job is lost; every job must finish.
func TestReplaysWithEveryPlacementKeepTheInvariants(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		nodes := rapid.IntRange(1, 4).Draw(rt, "nodes")
		mig := rapid.Bool().Draw(rt, "mig")
		var ns []cluster.Node
		for i := range nodes {
			n := clustertest.Node(fmt.Sprintf("n%d", i)).GPUs(8, "A100-SXM4-40GB").NVLink("a", 0, 1, 2, 3).NVLink("b", 4, 5, 6, 7).
				Leaf(fmt.Sprintf("leaf%d", i%2)).Obj()
			for g := range n.GPUs {
				n.GPUs[g].MIGEnabled = mig
			}
			ns = append(ns, n)
		}
		fleet := clustertest.Fleet(ns...)
		fleet.AllowCrossTenantSharing = rapid.Bool().Draw(rt, "cross_tenant")
		var jobs []cluster.Job
		at := clustertest.Epoch
		for i := range rapid.IntRange(1, 30).Draw(rt, "jobs") {
			at = at.Add(time.Duration(rapid.IntRange(0, 1800).Draw(rt, "gap_s")) * time.Second)
			w := clustertest.Job(fmt.Sprintf("j%02d", i)).Submitted(at).Tenant(rapid.SampledFrom([]string{"a", "b"}).Draw(rt, "tenant"))
			switch rapid.IntRange(0, 2).Draw(rt, "kind") {
			case 0:
				w.Share(100 * rapid.IntRange(1, 9).Draw(rt, "share"))
			case 1:
				w.GPUs(rapid.SampledFrom([]int{1, 2, 4, 8}).Draw(rt, "gpus"))
			default:
				if nodes >= 2 {
					w.GPUs(16).Gang(2)
				}
			}
			j := w.Obj()
			j.Outcome.RunTime = time.Duration(rapid.IntRange(60, 4*3600).Draw(rt, "run_s")) * time.Second
			jobs = append(jobs, j)
		}
		name := rapid.SampledFrom(placement.Names()).Draw(rt, "placement")
		pol, err := policies.New("fifo", policies.Options{Checkpoint: "none"})
		if err != nil {
			rt.Fatal(err)
		}
		if pol.Placer, err = placement.NewPlacer(name, placement.PlacerArgs{AllowCrossTenantSharing: fleet.AllowCrossTenantSharing}); err != nil {
			rt.Fatal(err)
		}
		planner, err := executor.New(pol)
		if err != nil {
			rt.Fatal(err)
		}
		truth := map[cluster.JobID]time.Duration{}
		for _, j := range jobs {
			truth[j.ID] = j.Outcome.RunTime
		}
		oracle, err := executor.NewOracle(truth, 0, 1)
		if err != nil {
			rt.Fatal(err)
		}
		park := rapid.SampledFrom([]time.Duration{0, 10 * time.Minute}).Draw(rt, "park")
		mtbf := rapid.SampledFrom([]time.Duration{0, 5 * time.Hour}).Draw(rt, "mtbf")
		r, err := sim.Run(context.Background(), sim.Config{Fleet: fleet, Jobs: jobs, Planner: planner, Forecaster: oracle,
			Order: pol.Order, Check: true, Seed: 1, ParkIdleAfter: park, NodeMTBF: mtbf, NodeRepair: 30 * time.Minute,
			CheckpointCost: time.Minute})
		if err != nil {
			rt.Fatalf("%s: %v", name, err)
		}
		if r.Finished != len(jobs) {
			rt.Fatalf("%s: %d of %d jobs finished", name, r.Finished, len(jobs))
		}
		span := r.MakespanS + (jobs[len(jobs)-1].SubmitTime.Sub(jobs[0].SubmitTime)).Seconds() // at least the replay's length
		if r.EnergyKWh <= 0 || r.ParkedNodeS < 0 || park == 0 && r.ParkedNodeS != 0 || r.ParkedNodeS > float64(nodes)*span+1 {
			rt.Fatalf("%s: energy %.3f kWh, parked %.0f s of at most %d×%.0f (park after %s)", name, r.EnergyKWh, r.ParkedNodeS, nodes, span, park)
		}
	})
}
