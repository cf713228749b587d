package kubernetes

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// BenchmarkNodes is the NodeSource's answer for a 1,000-node fleet of 8
// GPUs each (8,000 GPUs), 100 of them partitioned into 7 MIG instances
// each, with a bound pod on every GPU and instance, read at every plan.
func BenchmarkNodes(b *testing.B) {
	bk, err := New(Config{Client: newFakeEnv(&testing.T{}).client})
	if err != nil {
		b.Fatal(err)
	}
	bk.SetService(newFakeService())
	for i := range 1000 {
		name := fmt.Sprintf("node-%04d", i)
		if i%10 == 0 {
			bk.nodeChanged(migNodeOf(name, 0, map[string]int64{"1g.10gb": 56}))
		} else {
			bk.nodeChanged(gpuNode(name, 8, map[string]string{LabelRack: fmt.Sprintf("r%02d", i/32)}))
		}
		for g := range 8 {
			p := gpuPod("ml", fmt.Sprintf("p-%04d-%d", i, g), 1, nil)
			if i%10 == 0 {
				p = migPod("ml", p.Name, "1g.10gb", 7)
			}
			p.Spec.NodeName = name
			bk.podChanged(context.Background(), p)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if n := bk.Nodes(); len(n) != 1100 {
			b.Fatalf("%d nodes", len(n))
		}
	}
}

// BenchmarkNodeFromKube converts one node object, as the informer does on
// every node update (status heartbeats included).
func BenchmarkNodeFromKube(b *testing.B) {
	n := gpuNode("node-0001", 8, map[string]string{LabelRack: "r1", LabelLeaf: "l1", LabelNVLinkDomain: "nv"})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := nodeFromKube(n); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGangStartPlan is the spec of a 128-member gang (8 GPUs each,
// 1,024 GPUs) and which node each member binds to.
func BenchmarkGangStartPlan(b *testing.B) {
	const size = 128
	members := make([]*corev1.Pod, size)
	for i := range members {
		members[i] = gpuPod("ml", fmt.Sprintf("g-%03d", i), 8, gang("g", size))
	}
	pj, err := jobOfPod(members[0], noJobs)
	if err != nil {
		b.Fatal(err)
	}
	nodes := make([]string, size)
	per := make([]int, size)
	for i := range nodes {
		nodes[i], per[i] = fmt.Sprintf("node-%03d", i), 8
	}
	a := assignment(pj.ID, 1, size*8, nodes, per)
	b.ReportAllocs()
	for b.Loop() {
		spec, err := specOf(pj, members, nil)
		if err != nil || spec.GPUs != size*8 {
			b.Fatal(spec.GPUs, err)
		}
		a.Job.Spec = spec
		if out, err := podNodes(a, size, size); err != nil || len(out) != size {
			b.Fatal(err)
		}
	}
}
