package placement_test

import (
	"testing"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/cluster/clustertest"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/executor/plugins/placement"
)

// Of two empty, identical nodes the prescient placement takes the one that
// holds a warm copy of the job's dataset, then one in a rack that holds
// it; with locality off, or for a job that names no data, the first node.
func TestPrescientPrefersWarmData(t *testing.T) {
	mk := func(name, rack string) cluster.Node {
		n := clustertest.Node(name).GPUs(8, "V100").Obj()
		n.Topology.Rack = rack
		return n
	}
	fleet := clustertest.Fleet(mk("a", "r1"), mk("b", "r2"), mk("c", "r3"))
	snap := cluster.NewSnapshot(fleet, clustertest.Epoch)
	share := false
	place := func(args placement.PlacerArgs, data *cluster.DataSource) string {
		p, err := placement.NewPlacer(placement.PrescientName, args)
		if err != nil {
			t.Fatal(err)
		}
		job := clustertest.Job("j").GPUs(2).Submitted(clustertest.Epoch).Obj()
		if share {
			job = clustertest.Job("j").Share(500).Submitted(clustertest.Epoch).Obj()
		}
		job.Spec.Data = data
		in := &executor.PlanInput{Now: clustertest.Epoch, Cluster: snap, Queue: []*executor.JobView{{Job: &job}}}
		allocs, ok, why := p.ForCycle(in).Place(&job, executor.NewCapacity(snap))
		if !ok {
			t.Fatalf("not placed: %s", why)
		}
		return allocs[0].GPU.Node
	}
	onNode := &cluster.DataSource{Name: "d", Bytes: 1 << 30, Nodes: []string{"c"}, Racks: []string{"r2"}}
	inRack := &cluster.DataSource{Name: "d", Bytes: 1 << 30, Racks: []string{"r2"}}
	first := place(placement.PlacerArgs{}, nil)
	if first == "c" || first == "b" {
		t.Fatalf("without data the job goes to %s; the scenario needs another node there", first)
	}
	if got := place(placement.PlacerArgs{}, onNode); got != "c" {
		t.Errorf("warm node: placed on %s, want c", got)
	}
	if got := place(placement.PlacerArgs{}, inRack); got != "b" {
		t.Errorf("warm rack: placed on %s, want b", got)
	}
	if got := place(placement.PlacerArgs{LocalityLevels: -1}, onNode); got != first {
		t.Errorf("locality off: placed on %s, want %s as without data", got, first)
	}
	// A share too goes to the warm one of three empty nodes.
	share = true
	if got := place(placement.PlacerArgs{}, onNode); got != "c" {
		t.Errorf("share, warm node: placed on %s, want c", got)
	}
}
