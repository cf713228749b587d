package store

import (
	"context"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
)

func TestParkedNodesOutliveTheStore(t *testing.T) {
	ctx := context.Background()
	s, path := openFile(t)
	t0 := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	node := func(name string) cluster.Node {
		n := cluster.Node{Name: name, CPUMilli: 64000, MemoryBytes: 1 << 40, State: cluster.NodeReady,
			Topology: cluster.Topology{Rack: "r1"}, Labels: map[string]string{"zone": "a"}}
		for i := range 2 {
			g := cluster.NewGPU(i, "A100-SXM4-80GB")
			g.UUID = name + "-gpu" + string(rune('0'+i))
			n.GPUs = append(n.GPUs, g)
		}
		return n
	}
	for _, p := range []ParkedNode{
		{State: "parked", Since: t0, Node: node("n1")},
		{State: "parked", Since: t0, Node: node("n0"), WakeAfter: t0.Add(10 * time.Minute)},
		{State: "parked", Since: t0, Node: node("n2")},
		{State: "waking", Since: t0.Add(time.Hour), Node: node("n1")},
	} {
		if err := s.PutParked(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PutParked(ctx, ParkedNode{State: "asleep", Since: t0, Node: node("n3")}); err == nil {
		t.Error("a node in state asleep was stored")
	}
	if err := s.DeleteParked(ctx, "n2"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteParked(ctx, "never-parked"); err != nil {
		t.Fatalf("waking a node that is not parked: %v", err)
	}
	s = reopen(t, s, path)
	got, err := s.ParkedNodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []ParkedNode{{State: "parked", Since: t0, Node: node("n0"), WakeAfter: t0.Add(10 * time.Minute)}, {State: "waking", Since: t0.Add(time.Hour), Node: node("n1")}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parked nodes\n%+v\nwant\n%+v", got, want)
	}
}

func TestTheLatestBootsOutliveTheStore(t *testing.T) {
	ctx := context.Background()
	s, path := openFile(t)
	t0 := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	var want []NodeBoot
	for i := range KeptBoots + 10 {
		b := NodeBoot{Node: "n" + strconv.Itoa(i%3), Awake: t0.Add(time.Duration(i) * time.Minute), Boot: time.Duration(60+i) * time.Second}
		if err := s.AddBoot(ctx, b); err != nil {
			t.Fatal(err)
		}
		if i >= 10 {
			want = append(want, b)
		}
	}
	if err := s.AddBoot(ctx, NodeBoot{Node: "n0", Awake: t0, Boot: 0}); err == nil {
		t.Error("a boot of no time was stored")
	}
	s = reopen(t, s, path)
	got, err := s.Boots(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("boots kept: %d, want %d\n%+v\nwant\n%+v", len(got), len(want), got, want)
	}
}
