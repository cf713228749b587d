package placement

import (
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/cluster/clustertest"
	"github.com/prescient-sched/prescient/executor"
)

// TestKeptTypicalIsTheReadOne: jobs arrive over many half-lives (so the
// keeper moves its base) and some leave; the keeper's class weights, scaled
// to now, are those a cycle reads from the jobs queued or running (Check),
// and a job it forgot is found. (Classes of equal weight may come out of
// the two in either order, so the test compares weights, not the
// distributions; TestKeptTypicalPlacesAlike compares one.)
func TestKeptTypicalIsTheReadOne(t *testing.T) {
	p, err := NewPlacer(PrescientName, PlacerArgs{HalfLife: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	rapid.Check(t, func(rt *rapid.T) {
		k := p.NewKeeper()
		var in executor.PlanInput
		now := clustertest.Epoch
		for i := range rapid.IntRange(1, 60).Draw(rt, "steps") {
			now = now.Add(time.Duration(rapid.IntRange(0, 5*3600).Draw(rt, "gap_s")) * time.Second)
			if len(in.Queue) > 0 && rapid.Bool().Draw(rt, "leave") {
				at := rapid.IntRange(0, len(in.Queue)-1).Draw(rt, "who")
				k.Leave(in.Queue[at])
				in.Queue = append(in.Queue[:at], in.Queue[at+1:]...)
				continue
			}
			j := cluster.NewJob(cluster.JobID(fmt.Sprint("j", i)), cluster.JobSpec{
				GPUs: rapid.SampledFrom([]int{1, 2, 8}).Draw(rt, "gpus"), GPUMilli: rapid.SampledFrom([]int{250, 1000}).Draw(rt, "milli"),
				GPUModels: rapid.SampledFrom([][]string{nil, {"V100"}, {"A100", "V100"}}).Draw(rt, "models"),
			}, now)
			v := &executor.JobView{Job: &j}
			k.Arrive(v)
			in.Queue = append(in.Queue, v)
		}
		in.Now = now.Add(time.Duration(rapid.IntRange(0, 3600).Draw(rt, "after_s")) * time.Second)
		if err := k.Check(&in); err != nil {
			rt.Fatal(err)
		}
		if len(in.Queue) > 0 {
			k.Leave(in.Queue[0])
			if k.Check(&in) == nil {
				rt.Fatal("Check missed a job the keeper forgot")
			}
		}
	})
}

// TestKeptTypicalPlacesAlike: a replay's cycle with the keeper has the
// typical distribution that reading the jobs gives.
func TestKeptTypicalPlacesAlike(t *testing.T) {
	p, err := NewPlacer(PrescientName, PlacerArgs{})
	if err != nil {
		t.Fatal(err)
	}
	k := p.NewKeeper()
	in := executor.PlanInput{Now: clustertest.Epoch.Add(30 * 24 * time.Hour)}
	for i, s := range []struct {
		gpus, milli int
		ago         time.Duration
	}{{1, 250, 29 * 24 * time.Hour}, {8, 1000, 20 * 24 * time.Hour}, {1, 1000, time.Hour}, {2, 1000, 0}, {1, 250, 2 * time.Hour}} {
		j := cluster.NewJob(cluster.JobID(fmt.Sprint("j", i)), cluster.JobSpec{GPUs: s.gpus, GPUMilli: s.milli}, in.Now.Add(-s.ago))
		v := &executor.JobView{Job: &j}
		k.Arrive(v)
		in.Queue = append(in.Queue, v)
	}
	read := p.ForCycle(&in).(*cyclePlacer)
	read.read()
	in.Kept = k
	kept := p.ForCycle(&in).(*cyclePlacer)
	kept.read()
	if kept.kept == nil || kept.typical == nil || read.typical == nil {
		t.Fatalf("kept %v (keeper %v), read %v", kept.typical, kept.kept, read.typical)
	}
	g, w := kept.typical, read.typical
	if fmt.Sprint(g.Classes) != fmt.Sprint(w.Classes) || len(g.Freq) != len(w.Freq) {
		t.Fatalf("kept %v %v, read %v %v", g.Classes, g.Freq, w.Classes, w.Freq)
	}
	for i := range g.Freq {
		if d := g.Freq[i] - w.Freq[i]; d > 1e-12 || d < -1e-12 {
			t.Errorf("class %v: kept %g, read %g", g.Classes[i], g.Freq[i], w.Freq[i])
		}
	}
}

// TestKeeperOnlyForItsPlacer: placements that weigh no fragmentation keep
// nothing, and a cycle ignores a keeper another placer made (its
// half-life may differ).
func TestKeeperOnlyForItsPlacer(t *testing.T) {
	if k := mustPlacer(t, BestFitName, PlacerArgs{}).NewKeeper(); k != nil {
		t.Errorf("best-fit keeps %T", k)
	}
	mine, other := mustPlacer(t, PrescientName, PlacerArgs{}), mustPlacer(t, PrescientName, PlacerArgs{HalfLife: time.Hour})
	if cp := mine.ForCycle(&executor.PlanInput{Kept: other.NewKeeper()}).(*cyclePlacer); cp.kept != nil {
		t.Error("a cycle took another placer's keeper")
	}
	if cp := mine.ForCycle(&executor.PlanInput{Kept: mine.NewKeeper()}).(*cyclePlacer); cp.kept == nil {
		t.Error("a cycle ignored its placer's keeper")
	}
}
