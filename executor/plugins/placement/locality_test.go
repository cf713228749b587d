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

// A job over several nodes puts its tasks on the nodes with a warm copy,
// then in the warm rack, and picks the leaf where most of them land warm;
// without locality, the same job packs as before.
func TestPrescientPlacesTasksOnWarmNodes(t *testing.T) {
	mk := func(name, rack, leaf string) cluster.Node {
		n := clustertest.Node(name).GPUs(8, "V100").Obj()
		n.Topology = cluster.Topology{Rack: rack, Leaf: leaf}
		return n
	}
	fleet := clustertest.Fleet(mk("a1", "r1", "l1"), mk("a2", "r1", "l1"), mk("a3", "r1", "l1"),
		mk("b1", "r2", "l2"), mk("b2", "r3", "l2"), mk("b3", "r3", "l2"))
	snap := cluster.NewSnapshot(fleet, clustertest.Epoch)
	place := func(args placement.PlacerArgs, data *cluster.DataSource) []string {
		p, err := placement.NewPlacer(placement.PrescientName, args)
		if err != nil {
			t.Fatal(err)
		}
		job := clustertest.Job("j").GPUs(16).Submitted(clustertest.Epoch).Obj()
		job.Spec.Data = data
		in := &executor.PlanInput{Now: clustertest.Epoch, Cluster: snap, Queue: []*executor.JobView{{Job: &job}}}
		allocs, ok, why := p.ForCycle(in).Place(&job, executor.NewCapacity(snap))
		if !ok {
			t.Fatalf("not placed: %s", why)
		}
		var nodes []string
		for _, a := range allocs {
			if len(nodes) == 0 || nodes[len(nodes)-1] != a.GPU.Node {
				nodes = append(nodes, a.GPU.Node)
			}
		}
		return nodes
	}
	cold := place(placement.PlacerArgs{}, nil)
	if len(cold) != 2 || cold[0][0] != 'a' {
		t.Fatalf("without data the 16 GPUs go to %v; the scenario needs two nodes of leaf l1", cold)
	}
	warm := &cluster.DataSource{Name: "d", Bytes: 1 << 40, Nodes: []string{"b3"}, Racks: []string{"r3"}}
	if got := place(placement.PlacerArgs{}, warm); len(got) != 2 || got[0] != "b2" || got[1] != "b3" {
		t.Errorf("warm on b3 and rack r3: tasks on %v, want b2 and b3 (leaf l2)", got)
	}
	if got := place(placement.PlacerArgs{LocalityLevels: -1}, warm); len(got) != 2 || got[0] != cold[0] || got[1] != cold[1] {
		t.Errorf("locality off: tasks on %v, want %v as without data", got, cold)
	}
}
