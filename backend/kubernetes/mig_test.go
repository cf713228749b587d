package kubernetes

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/executor/plugins/firstfit"
)

// migNodeOf is an A100 node whose GPUs NVIDIA's MIG manager partitioned,
// offered by the device plugin's mixed strategy: whole GPUs left as
// nvidia.com/gpu, instances as nvidia.com/mig-PROFILE.
func migNodeOf(name string, whole int, instances map[string]int64) *corev1.Node {
	n := gpuNode(name, whole, map[string]string{LabelGPUProduct: "NVIDIA-A100-SXM4-80GB", LabelGPUCount: "8",
		LabelGPUMemory: "81920", "nvidia.com/mig.strategy": "mixed"})
	for prof, c := range instances {
		n.Status.Allocatable[corev1.ResourceName(ResourceMIGPrefix+prof)] = *resource.NewQuantity(c, resource.DecimalSI)
	}
	return n
}

// migPod is a pod of Prescient's scheduler asking n instances of a profile.
func migPod(ns, name, profile string, n int64) *corev1.Pod {
	p := gpuPod(ns, name, 0, nil)
	p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{
		corev1.ResourceName(ResourceMIGPrefix + profile): *resource.NewQuantity(n, resource.DecimalSI)}
	p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"),
		corev1.ResourceMemory: resource.MustParse("32Gi")}
	return p
}

func TestMIGInstancesAreNodesOfTheirProfile(t *testing.T) {
	n := migNodeOf("a", 2, map[string]int64{"3g.40gb": 4, "1g.10gb": 7})
	n.Labels["nvidia.com/mig-1g.10gb.memory"] = "9728"
	e := newFakeEnv(t, n)
	e.watch()
	nodes := e.backend.Nodes()
	var names []string
	for _, n := range nodes {
		names = append(names, n.Name)
	}
	if !slices.Equal(names, []string{"a", "a:mig-1g.10gb", "a:mig-3g.40gb"}) {
		t.Fatalf("nodes %v; want a and one node per MIG profile", names)
	}
	if len(nodes[0].GPUs) != 2 {
		t.Errorf("node a: %d whole GPUs; want the 2 of nvidia.com/gpu, not the 8 of the count label", len(nodes[0].GPUs))
	}
	small, large := nodes[1], nodes[2]
	if len(small.GPUs) != 7 || small.GPUs[6].Model != "MIG-1g.10gb" || small.GPUs[0].MemoryBytes != 9728<<20 {
		t.Errorf("1g.10gb instances: %+v; want 7 GPUs of model MIG-1g.10gb with the label's 9728 MiB", small.GPUs)
	}
	if len(large.GPUs) != 4 || large.GPUs[0].MemoryBytes != 40<<30 || large.CPUMilli != 0 {
		t.Errorf("3g.40gb instances: %+v; want 4 GPUs of the name's 40 GiB and no host CPU of their own", large)
	}

	// The node changes its partition: the old profile's node goes.
	n = migNodeOf("a", 2, map[string]int64{"7g.80gb": 1})
	if _, err := e.client.CoreV1().Nodes().Update(e.ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the repartitioned node seen", func() bool {
		names = names[:0]
		for _, n := range e.backend.Nodes() {
			names = append(names, n.Name)
		}
		return slices.Equal(names, []string{"a", "a:mig-7g.80gb"})
	})
}

func TestAMIGPodAsksForItsProfileAndIsBoundToTheRealNode(t *testing.T) {
	other := migPod("infra", "inference", "1g.10gb", 2)
	other.Spec.SchedulerName, other.Spec.NodeName, other.Status.Phase = "default-scheduler", "a", corev1.PodRunning
	e := newFakeEnv(t, migNodeOf("a", 0, map[string]int64{"1g.10gb": 7}), migPod("ml", "notebook", "1g.10gb", 1),
		gpuPod("ml", "train", 1, nil), other)
	e.watch()
	nb := cluster.JobID("k8s:ml:pod=notebook:uid-note")
	eventually(t, "the MIG pod submitted", func() bool { _, ok := e.svc.request(nb); return ok })
	req, _ := e.svc.request(nb)
	if req.Spec.GPUs != 1 || req.Spec.GPUMilli != cluster.MilliGPU || !slices.Equal(req.Spec.GPUModels, []string{"MIG-1g.10gb"}) {
		t.Fatalf("spec %+v; want one whole GPU of model MIG-1g.10gb", req.Spec)
	}

	// The planner's view: the other scheduler's pod holds 2 instances; the
	// MIG pod fits an instance, the whole-GPU pod none.
	nodes := e.backend.Nodes()
	if len(nodes) != 2 || len(nodes[1].GPUs) != 5 {
		t.Fatalf("nodes %+v; want a with no whole GPU and a:mig-1g.10gb with 5 of its 7 instances free", nodes)
	}
	snap := cluster.NewSnapshot(&cluster.Fleet{Nodes: nodes}, time.Now())
	capa := executor.NewCapacity(snap)
	place := func(spec cluster.JobSpec) ([]cluster.Allocation, bool) {
		allocs, ok, _ := firstfit.New().Place(&cluster.Job{ID: "x", Spec: spec}, capa)
		return allocs, ok
	}
	allocs, ok := place(req.Spec)
	if !ok || allocs[0].GPU.Node != "a:mig-1g.10gb" {
		t.Fatalf("MIG job placed %v, %v; want an instance of a:mig-1g.10gb", allocs, ok)
	}
	if _, ok := place(cluster.JobSpec{GPUs: 1, GPUMilli: cluster.MilliGPU}); ok {
		t.Errorf("a job naming no model placed on a MIG instance")
	}

	a := executor.Assignment{Job: cluster.Job{ID: nb, Spec: req.Spec}, Attempt: 1,
		Allocations: []cluster.Allocation{{Job: nb, GPU: allocs[0].GPU, Milli: cluster.MilliGPU}}}
	if err := e.backend.Start(e.ctx, a); err != nil {
		t.Fatal(err)
	}
	if ev := e.next(executor.JobStarted); ev.Node != "a:mig-1g.10gb" {
		t.Errorf("started on %q; want the planner's node a:mig-1g.10gb", ev.Node)
	}
	if p := e.pod("ml", "notebook"); p.Spec.NodeName != "a" {
		t.Fatalf("notebook bound to %q; want the Kubernetes node a", p.Spec.NodeName)
	}
	eventually(t, "the MIG pod's host CPU taken off node a", func() bool {
		return e.backend.Nodes()[0].CPUMilli == 64000-8000-8000 // the other scheduler's pod and the notebook
	})
	if err := e.backend.Start(e.ctx, a); err != nil {
		t.Fatalf("the same attempt again: %v", err)
	}
}

func TestARestartReportsMIGPodsOnTheirInstancesNode(t *testing.T) {
	p := migPod("ml", "notebook", "1g.10gb", 1)
	p.Spec.NodeName = "a"
	p.Annotations = map[string]string{AnnotationJob: "k8s:ml:pod=notebook:uid-note", AnnotationAttempt: "3"}
	e := newFakeEnv(t, migNodeOf("a", 1, map[string]int64{"1g.10gb": 7}), p)
	e.watch()
	synced := map[string][]executor.RunningAttempt{}
	for len(synced) < 2 {
		ev := e.next(executor.NodeSynced)
		synced[ev.Node] = ev.Running
	}
	if got := synced["a:mig-1g.10gb"]; len(got) != 1 || got[0].Attempt != 3 {
		t.Errorf("synced %v; want attempt 3 on a:mig-1g.10gb", synced)
	}
	if len(synced["a"]) != 0 {
		t.Errorf("node a reports %v; want nothing (the pod runs on an instance)", synced["a"])
	}
}

func TestPodsAskingTwoKindsOfGPUAreRefused(t *testing.T) {
	both := migPod("ml", "both", "1g.10gb", 1)
	both.Spec.Containers[0].Resources.Limits[ResourceGPU] = resource.MustParse("1")
	two := migPod("ml", "two", "1g.10gb", 1)
	two.Spec.InitContainers = []corev1.Container{{Name: "init", Resources: corev1.ResourceRequirements{
		Limits: corev1.ResourceList{ResourceMIGPrefix + "2g.20gb": resource.MustParse("1")}}}}
	bad := migPod("ml", "bad", "1G.10GB", 1)
	for _, p := range []*corev1.Pod{both, two, bad} {
		_, _, err := podDevices(p)
		if err == nil || !strings.Contains(err.Error(), "ml/"+p.Name) {
			t.Errorf("pod %s: error %v; want one naming the pod", p.Name, err)
		}
	}
	n := migNodeOf("a", 0, map[string]int64{"1G!": 1})
	if _, err := nodesFromKube(n); err == nil || !strings.Contains(err.Error(), "node a") {
		t.Errorf("node with a malformed profile: error %v; want one naming the node", err)
	}
}
