package kubernetes

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/prescient-sched/prescient/cluster"
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

// BenchmarkConstraintsPerPlan is what the control plane asks the backend
// for every queued job at every plan (AllowedNodes, TaskLimits,
// NodePreferences) on a 10,000-GPU fleet: 1,250 nodes of 8 GPUs in 5
// zones, 5% of them with a PreferNoSchedule taint, a bound pod on every
// GPU (one in ten of them repelling its kind by host), and 1,000 queued
// pods: 850 plain, 50 with required anti-affinity by host, 50 with
// DoNotSchedule zone spread, 50 with preferred node affinity. What only
// nodes' labels and taints change is cached before it starts.
func BenchmarkConstraintsPerPlan(b *testing.B) {
	bk, err := New(Config{Client: newFakeEnv(&testing.T{}).client})
	if err != nil {
		b.Fatal(err)
	}
	bk.SetService(newFakeService())
	ctx := context.Background()
	const nodes, queued = 1250, 1000
	for i := range nodes {
		name := fmt.Sprintf("node-%04d", i)
		n := gpuNode(name, 8, map[string]string{corev1.LabelHostname: name, "topology.kubernetes.io/zone": fmt.Sprintf("z%d", i%5)})
		if i%20 == 0 {
			n.Spec.Taints = []corev1.Taint{{Key: "spot", Effect: corev1.TaintEffectPreferNoSchedule}}
		}
		bk.nodeChanged(n)
		for g := range 8 {
			p := gpuPod("ml", fmt.Sprintf("p-%04d-%d", i, g), 1, map[string]string{"app": fmt.Sprintf("a%d", g)})
			if g == 0 && i%10 == 0 {
				p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a0"}}, TopologyKey: corev1.LabelHostname}}}}
			}
			p.Spec.NodeName = name
			bk.podChanged(ctx, p)
		}
	}
	for q := range queued {
		p := gpuPod("ml", fmt.Sprintf("q-%04d", q), 1, map[string]string{"app": "q"})
		switch q % 20 {
		case 1:
			p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a3"}}, TopologyKey: corev1.LabelHostname}}}}
		case 2:
			p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone",
				WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "q"}}}}
		case 3:
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
				Weight: 10, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{
					Key: "topology.kubernetes.io/zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"z1"}}}}}}}}
		}
		bk.podChanged(ctx, p)
	}
	var ids []cluster.JobID
	bk.mu.Lock()
	for id, j := range bk.jobs {
		if len(j.pods) == 1 && sortedPods(j.pods)[0].Spec.NodeName == "" {
			ids = append(ids, id)
		}
	}
	bk.mu.Unlock()
	if len(ids) != queued {
		b.Fatalf("%d queued jobs, want %d", len(ids), queued)
	}
	for _, id := range ids { // what only a node's labels or taints change, cached
		bk.AllowedNodes(id)
		bk.NodePreferences(id)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		for _, id := range ids {
			bk.AllowedNodes(id)
			bk.TaskLimits(id)
			bk.NodePreferences(id)
		}
	}
}
