package kubernetes

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FuzzNodeFromKube: any labels give a node or an error, never a panic,
// and never more GPUs than the bound.
func FuzzNodeFromKube(f *testing.F) {
	f.Add("8", "81559", "NVIDIA-H100-80GB-HBM3", "nv0")
	f.Add("-3", "x", "", "")
	f.Add("99999999999", "0", "A100", "d")
	f.Fuzz(func(t *testing.T, count, mem, product, domain string) {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{
			LabelGPUCount: count, LabelGPUMemory: mem, LabelGPUProduct: product, LabelNVLinkDomain: domain}}}
		node, err := nodeFromKube(n)
		if err == nil && len(node.GPUs) > maxGPUsPerNode {
			t.Fatalf("%d GPUs from count %q", len(node.GPUs), count)
		}
	})
}

// FuzzSpecOf: any gang, tier, tenant and checkpointable values give a spec
// or an error, never a panic.
func FuzzSpecOf(f *testing.F) {
	f.Add("g", "2", "production", "t", "true", int64(4))
	f.Add("", "", "", "", "", int64(0))
	f.Add("g", "0", "gold", "", "maybe", int64(-1))
	f.Add("g", "5000", "batch", "x", "false", int64(1<<40))
	f.Fuzz(func(t *testing.T, gang, size, tier, tenant, ckpt string, gpus int64) {
		labels := map[string]string{LabelTier: tier, LabelTenant: tenant}
		if gang != "" {
			labels[LabelGang], labels[LabelGangSize] = gang, size
		}
		p := gpuPod("ns", "p", 0, labels)
		p.Annotations = map[string]string{AnnotationCheckpointable: ckpt}
		if gpus >= 0 {
			p = gpuPod("ns", "p", int(gpus%(1<<20)), labels)
			p.Annotations = map[string]string{AnnotationCheckpointable: ckpt}
		}
		pj, err := jobOfPod(p, noJobs)
		if err != nil {
			return
		}
		spec, err := specOf(pj, []*corev1.Pod{p}, nil)
		if err == nil && (spec.GPUs < 0 || (pj.Gang && pj.Size > 1 && spec.GangSize != pj.Size)) {
			t.Fatalf("spec %+v from %+v", spec, pj)
		}
	})
}

// FuzzMIGNodes: any MIG resource name, count and memory label give nodes
// or an error, never a panic, and never more instances than the bound.
func FuzzMIGNodes(f *testing.F) {
	f.Add("1g.10gb", int64(7), "9728")
	f.Add("3g.40gb+me", int64(2), "")
	f.Add("", int64(-1), "x")
	f.Add("1c.3g.20gb", int64(1<<40), "0")
	f.Fuzz(func(t *testing.T, profile string, count int64, mem string) {
		n := migNodeOf("n", 1, map[string]int64{profile: count})
		n.Labels[ResourceMIGPrefix+profile+".memory"] = mem
		nodes, err := nodesFromKube(n)
		if err != nil {
			return
		}
		for _, m := range nodes {
			if len(m.GPUs) > maxGPUsPerNode || parentNode(m.Name) != "n" {
				t.Fatalf("node %s with %d GPUs from profile %q, count %d", m.Name, len(m.GPUs), profile, count)
			}
		}
	})
}
