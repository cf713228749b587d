package placement

import (
	"strings"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/cluster/clustertest"
	"github.com/prescient-sched/prescient/executor"
)

// capacityOf builds the planner's capacity index over a fleet with the
// running jobs' allocations applied.
func capacityOf(t *testing.T, f *cluster.Fleet, running ...*executor.RunningJob) *executor.Capacity {
	t.Helper()
	snap := cluster.NewSnapshot(f, clustertest.Epoch)
	for _, r := range running {
		if err := snap.Allocate(r.Job.ID, r.Allocations); err != nil {
			t.Fatal(err)
		}
	}
	return executor.NewCapacity(snap)
}

func running(j cluster.Job, memP90 int64, allocs ...cluster.Allocation) *executor.RunningJob {
	job := j
	r := &executor.RunningJob{Allocations: allocs}
	r.Job, r.Forecast = &job, executor.Forecast{Job: j.ID, DurationP90: time.Hour, MemoryP90Bytes: memP90}
	return r
}

func at(node string, gpu, milli int) cluster.Allocation {
	return cluster.Allocation{GPU: cluster.GPURef{Node: node, Index: gpu}, Milli: milli}
}

func mustPlacer(t *testing.T, name string, a PlacerArgs) *Placer {
	t.Helper()
	p, err := NewPlacer(name, a)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPlacerTopology(t *testing.T) {
	// n1: 8 GPUs as two NVLink domains of 4, with GPUs 0 and 4 taken;
	// n2: 8 GPUs on one NVSwitch, all free.
	fleet := clustertest.Fleet(
		clustertest.Node("n1").GPUs(8, "A100-SXM4-80GB").NVLink("a", 0, 1, 2, 3).NVLink("b", 4, 5, 6, 7).Leaf("l1").Obj(),
		clustertest.Node("n2").GPUs(8, "A100-SXM4-80GB").NVLink("s", 0, 1, 2, 3, 4, 5, 6, 7).Leaf("l1").Obj(),
		clustertest.Node("n3").GPUs(8, "A100-SXM4-80GB").Leaf("l1").Obj(),
	)
	busy := running(clustertest.Job("busy").GPUs(2).Obj(), 0, at("n1", 0, 1000), at("n1", 4, 1000))
	c := capacityOf(t, fleet, busy)
	p := mustPlacer(t, PrescientName, PlacerArgs{}).ForCycle(&executor.PlanInput{Now: clustertest.Epoch, Running: []*executor.RunningJob{busy}})

	allocs, ok, why := p.Place(ptr(clustertest.Job("j3").GPUs(3).Obj()), c)
	if !ok || allocs[0].GPU.Node != "n1" || !strings.Contains(why, "one NVLink domain") {
		t.Fatalf("3 GPUs: %v %v %q; want one NVLink domain of n1", allocs, ok, why)
	}
	domain := fleet.Nodes[0].GPUs[allocs[0].GPU.Index].NVLinkDomain
	for _, a := range allocs {
		if fleet.Nodes[0].GPUs[a.GPU.Index].NVLinkDomain != domain {
			t.Fatalf("3 GPUs split over NVLink domains: %v", allocs)
		}
	}
	allocs, ok, why = p.Place(ptr(clustertest.Job("j4").GPUs(4).Obj()), c)
	if !ok || allocs[0].GPU.Node != "n2" || !strings.Contains(why, "one NVLink domain") {
		t.Fatalf("4 GPUs: %v %v %q; want n2's NVSwitch, as no domain of n1 has 4 free", allocs, ok, why)
	}
	n3only := capacityOf(t, clustertest.Fleet(fleet.Nodes[2]))
	allocs, ok, why = p.Place(ptr(clustertest.Job("j5").GPUs(5).Obj()), n3only)
	if !ok || len(allocs) != 5 || !strings.Contains(why, "over PCIe") {
		t.Fatalf("5 GPUs on a PCIe node: %v %v %q; want one node over PCIe", allocs, ok, why)
	}
}

func TestPlacerGangStaysInOneLeaf(t *testing.T) {
	fleet := clustertest.Fleet(
		clustertest.Node("a1").GPUs(8, "V100").Leaf("leaf-a").Obj(),
		clustertest.Node("b1").GPUs(8, "V100").Leaf("leaf-b").Obj(),
		clustertest.Node("b2").GPUs(8, "V100").Leaf("leaf-b").Obj(),
		clustertest.Node("a2").GPUs(8, "V100").Leaf("leaf-a").Obj(),
	)
	busy := running(clustertest.Job("busy").GPUs(4).Obj(), 0, at("a2", 0, 1000), at("a2", 1, 1000), at("a2", 2, 1000), at("a2", 3, 1000))
	c := capacityOf(t, fleet, busy)
	p := mustPlacer(t, PrescientName, PlacerArgs{}).ForCycle(&executor.PlanInput{Running: []*executor.RunningJob{busy}})

	gang := clustertest.Job("g").GPUs(16).Gang(2).Obj()
	allocs, ok, why := p.Place(&gang, c)
	if !ok || len(allocs) != 16 {
		t.Fatalf("gang of 2×8: %v %v %q", allocs, ok, why)
	}
	for _, a := range allocs {
		if a.GPU.Node != "b1" && a.GPU.Node != "b2" {
			t.Fatalf("gang straddles leaves though leaf-b has room: %v (%s)", allocs, why)
		}
	}
	// 2×4 fits both leaves; leaf-a has fewer GPUs free, so it is packed.
	gang = clustertest.Job("g2").GPUs(8).Gang(2).Obj()
	allocs, ok, why = p.Place(&gang, c)
	if !ok || !strings.Contains(why, `leaf "leaf-a"`) {
		t.Fatalf("gang of 2×4: %v %v %q; want leaf-a, the fuller leaf with room", allocs, ok, why)
	}
	// 3×8 fits no leaf: it spans leaves and says so.
	gang = clustertest.Job("g3").GPUs(24).Gang(3).Obj()
	allocs, ok, why = p.Place(&gang, c)
	if !ok || len(allocs) != 24 || !strings.Contains(why, "across leaves") {
		t.Fatalf("gang of 3×8: %v %v %q; want it across leaves", len(allocs), ok, why)
	}
	if err := c.Clone().Allocate(allocs); err != nil {
		t.Fatalf("gang allocation does not fit: %v", err)
	}
}

func TestPlacerSharingRules(t *testing.T) {
	const gib = int64(1) << 30
	fleet := clustertest.Fleet(clustertest.Node("n1").GPUs(2, "A100-SXM4-40GB").Obj())
	other := running(clustertest.Job("other").Share(500).Tenant("blue").Obj(), 10*gib, at("n1", 0, 500))
	tests := []struct {
		name    string
		args    PlacerArgs
		mig     bool
		share   int
		memP90  int64
		wantGPU int
	}{
		{"another tenant's GPU is not shared without MIG", PlacerArgs{}, false, 500, 5 * gib, 1},
		{"the fleet may allow sharing across tenants", PlacerArgs{AllowCrossTenantSharing: true}, false, 500, 5 * gib, 0},
		{"MIG isolates tenants in hardware: a 3g instance beside the other's", PlacerArgs{}, true, 400, 5 * gib, 0},
		{"a 4g instance may not go beside a 4-slice instance", PlacerArgs{}, true, 500, 5 * gib, 1},
		{"forecast footprints that exceed the GPU's memory are not shared", PlacerArgs{AllowCrossTenantSharing: true}, false, 500, 35 * gib, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := *fleet
			f.Nodes = []cluster.Node{fleet.Nodes[0]}
			f.Nodes[0].GPUs = append([]cluster.GPU(nil), fleet.Nodes[0].GPUs...)
			for g := range f.Nodes[0].GPUs {
				f.Nodes[0].GPUs[g].MIGEnabled = tt.mig
			}
			c := capacityOf(t, &f, other)
			mine := clustertest.Job("mine").Share(tt.share).Tenant("red").Obj()
			q := &executor.JobView{Job: &mine, Forecast: executor.Forecast{Job: mine.ID, MemoryP90Bytes: tt.memP90}}
			p := mustPlacer(t, PrescientName, tt.args).ForCycle(&executor.PlanInput{Queue: []*executor.JobView{q}, Running: []*executor.RunningJob{other}})
			allocs, ok, why := p.Place(&mine, c)
			if !ok || allocs[0].GPU.Index != tt.wantGPU {
				t.Fatalf("placed %v %v (%s); want GPU %d", allocs, ok, why, tt.wantGPU)
			}
			if tt.mig && (!strings.Contains(why, "MIG instance") || allocs[0].Milli%125 != 0) {
				t.Fatalf("a MIG placement of %d milli-GPUs (%s): want a whole instance, named", allocs[0].Milli, why)
			}
		})
	}
}

func TestPlacerRefusesWhenNoGPUMayBeShared(t *testing.T) {
	fleet := clustertest.Fleet(clustertest.Node("n1").GPUs(1, "A100-SXM4-40GB").Obj())
	other := running(clustertest.Job("other").Share(500).Tenant("blue").Obj(), 0, at("n1", 0, 500))
	c := capacityOf(t, fleet, other)
	mine := clustertest.Job("mine").Share(300).Tenant("red").Obj()
	p := mustPlacer(t, BestFitName, PlacerArgs{}).ForCycle(&executor.PlanInput{Running: []*executor.RunningJob{other}})
	if _, ok, why := p.Place(&mine, c); ok || !strings.Contains(why, "tenant isolation") {
		t.Fatalf("placed %v (%s); want a refusal that names tenant isolation", ok, why)
	}
}

func ptr(j cluster.Job) *cluster.Job { return &j }

func TestPrescientPlacesWhereTheNodeStaysOnAnyway(t *testing.T) {
	fleet := clustertest.Fleet(
		clustertest.Node("short").GPUs(4, "V100").Obj(),
		clustertest.Node("long").GPUs(4, "V100").Obj(),
	)
	short := running(clustertest.Job("s").GPUs(1).Obj(), 0, at("short", 0, 1000))
	long := running(clustertest.Job("l").GPUs(1).Obj(), 0, at("long", 0, 1000))
	short.Forecast.DurationP90, long.Forecast.DurationP90 = time.Hour, 6*time.Hour
	job := clustertest.Job("new").GPUs(1).Obj()
	q := &executor.JobView{Job: &job, Forecast: executor.Forecast{Job: job.ID, DurationP90: 3 * time.Hour}}
	in := &executor.PlanInput{Now: clustertest.Epoch, Queue: []*executor.JobView{q}, Running: []*executor.RunningJob{short, long}}
	for range 2 { // both bucket orders: the running jobs listed either way
		c := capacityOf(t, fleet, short, long)
		allocs, ok, why := mustPlacer(t, PrescientName, PlacerArgs{}).ForCycle(in).Place(&job, c)
		if !ok || allocs[0].GPU.Node != "long" {
			t.Fatalf("a 3-hour job went to %v (%s); want the node that is on for 6 hours anyway", allocs, why)
		}
		in.Running[0], in.Running[1] = in.Running[1], in.Running[0]
	}
}

// TestEnergyTermCountsTheCyclesPlacements: how long a placement keeps a
// busy node on is measured against the P90 ends of the jobs running there
// and of the jobs the cycle placed there before, whether the cycle read
// the running jobs' ends before that placement or not.
func TestEnergyTermCountsTheCyclesPlacements(t *testing.T) {
	fleet := clustertest.Fleet(clustertest.Node("n1").GPUs(8, "V100").Obj())
	busy := running(clustertest.Job("busy").GPUs(1).Obj(), 0, at("n1", 0, 1000)) // P90 end: now + 1h
	c := capacityOf(t, fleet, busy)
	view := func(id string, p90 time.Duration) *executor.JobView {
		j := clustertest.Job(id).GPUs(1).Obj()
		return &executor.JobView{Job: &j, Forecast: executor.Forecast{Job: j.ID, DurationP90: p90}}
	}
	long, short := view("long", 5*time.Hour), view("short", 3*time.Hour)
	in := &executor.PlanInput{Now: clustertest.Epoch, Queue: []*executor.JobView{long, short}, Running: []*executor.RunningJob{busy}}
	p := mustPlacer(t, PrescientName, PlacerArgs{})
	for _, readFirst := range []bool{false, true} {
		cp := p.ForCycle(in).(*cyclePlacer)
		cp.read()
		if readFirst {
			if got := cp.extraOn(short.Job, c, 0); got != 2*time.Hour {
				t.Fatalf("before any placement: short keeps n1 on %v longer, want 2h", got)
			}
		}
		cp.placed(long.Job, []cluster.Allocation{at("n1", 1, 1000)}, c)
		if got := cp.extraOn(short.Job, c, 0); got != 0 {
			t.Errorf("read first %v: after long went to n1, short keeps it on %v longer, want 0", readFirst, got)
		}
	}
}
