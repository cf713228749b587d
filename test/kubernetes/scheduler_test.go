package kubernetes

import (
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubebackend "github.com/prescient-sched/prescient/backend/kubernetes"
	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/service"
)

// bound waits until the pod is bound and returns its node.
func (c *testCluster) bound(name string) string {
	c.t.Helper()
	var node string
	eventually(c.t, "pod "+name+" bound", func() bool {
		node = c.pod(name).Spec.NodeName
		return node != ""
	})
	return node
}

// waitRunning waits until the job runs and returns its status.
func (c *testCluster) waitRunning(p *prescient, id cluster.JobID) service.JobStatus {
	c.t.Helper()
	var st service.JobStatus
	eventually(c.t, "job "+string(id)+" running", func() bool {
		var err error
		st, err = p.plane.Job(c.ctx, id)
		return err == nil && st.State == cluster.StateRunning && len(st.Placement) > 0
	})
	return st
}

func TestPodsAreBoundToTheNodesThePlannerChose(t *testing.T) {
	c := newTestCluster(t)
	c.addNode("a", 8, "r1")
	c.addNode("b", 4, "r1")
	p := c.startPrescient(tempDB(t), service.ModeAutopilot)
	c.createPod("big", podOpts{gpus: 8})
	c.createPod("small", podOpts{gpus: 4})
	for _, name := range []string{"big", "small"} {
		node := c.bound(name)
		st := c.waitRunning(p, c.jobOf(p, "k8s_pod", name).ID)
		nodes := placementNodes(st.Placement)
		gpus := c.pod(name).Spec.Containers[0].Resources.Limits[kubebackend.ResourceGPU]
		if len(nodes) != 1 || int64(nodes[node]) != gpus.Value() {
			t.Errorf("pod %s bound to %s; the planner placed it on %v", name, node, st.Placement)
		}
		if a := c.pod(name).Annotations; a[kubebackend.AnnotationJob] != string(st.ID) || a[kubebackend.AnnotationAttempt] != "1" {
			t.Errorf("pod %s annotations %v: want its job and attempt 1", name, a)
		}
	}
	if c.pod("big").Spec.NodeName != "a" {
		t.Errorf("the 8-GPU pod is on %s, only a has 8 GPUs", c.pod("big").Spec.NodeName)
	}
}

func TestAGangIsBoundTogetherOrNotAtAll(t *testing.T) {
	c := newTestCluster(t)
	for _, n := range []string{"a", "b", "c"} {
		c.addNode(n, 4, "r1")
	}
	p := c.startPrescient(tempDB(t), service.ModeAutopilot)
	c.createPod("g-0", podOpts{gpus: 4, gang: "g", gangSize: 3})
	c.createPod("g-1", podOpts{gpus: 4, gang: "g", gangSize: 3})
	// Two of three members: nothing is bound while the third is missing.
	time.Sleep(2 * time.Second)
	for _, n := range []string{"g-0", "g-1"} {
		if node := c.pod(n).Spec.NodeName; node != "" {
			t.Fatalf("%s bound to %s with the gang incomplete", n, node)
		}
	}
	c.createPod("g-2", podOpts{gpus: 4, gang: "g", gangSize: 3})
	st := c.waitRunning(p, c.jobOf(p, "k8s_gang", "g").ID)
	want := placementNodes(st.Placement)
	got := map[string]int{}
	for _, n := range []string{"g-0", "g-1", "g-2"} {
		got[c.bound(n)] += 4
	}
	if len(got) != len(want) {
		t.Fatalf("gang bound to %v, planned %v", got, want)
	}
	for node, gpus := range want {
		if got[node] != gpus {
			t.Errorf("node %s: %d GPUs of the gang bound, %d planned", node, got[node], gpus)
		}
	}
	if st.GPUs != 12 {
		t.Errorf("the gang's job has %d GPUs, want 12", st.GPUs)
	}
}

func TestPreemptionEvictsTheLowestTierAfterItsCheckpoint(t *testing.T) {
	c := newTestCluster(t)
	c.addNode("a", 4, "r1")
	c.addNode("b", 4, "r1")
	p := c.startPrescient(tempDB(t), service.ModeAutopilot)
	c.createPod("batch", podOpts{gpus: 4, tier: "batch", checkpointable: true})
	c.createPod("standard", podOpts{gpus: 4, tier: "standard", checkpointable: true})
	batchNode := c.bound("batch")
	c.bound("standard")
	c.waitRunning(p, c.jobOf(p, "k8s_pod", "batch").ID)
	c.waitRunning(p, c.jobOf(p, "k8s_pod", "standard").ID)

	c.createPod("urgent", podOpts{gpus: 4, tier: "production"})
	eventually(t, "the batch pod asked to checkpoint", func() bool {
		_, ok := c.pod("batch").Annotations[kubebackend.AnnotationCheckpointRequested]
		return ok
	})
	if _, ok := c.pod("standard").Annotations[kubebackend.AnnotationCheckpointRequested]; ok {
		t.Fatal("the standard-tier pod was asked to checkpoint too")
	}
	time.Sleep(time.Second)
	if c.pod("batch").DeletionTimestamp != nil {
		t.Fatal("the victim was evicted before its checkpoint landed")
	}
	// The workload acknowledges its checkpoint.
	v := c.pod("batch")
	v.Annotations[kubebackend.AnnotationCheckpointedAt] = time.Now().UTC().Format(time.RFC3339)
	v.Annotations[kubebackend.AnnotationCheckpointStep] = "1200"
	if _, err := c.admin.CoreV1().Pods("ml").Update(c.ctx, v, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the batch pod evicted", func() bool { return c.pod("batch").DeletionTimestamp != nil })
	if c.pod("standard").DeletionTimestamp != nil {
		t.Fatal("the standard-tier pod was evicted")
	}
	if node := c.pod("urgent").Spec.NodeName; node != "" {
		t.Fatalf("urgent bound to %s while the victim still holds the GPUs", node)
	}
	// The kubelet would end the container; without one, the test removes
	// the pod object.
	zero := int64(0)
	if err := c.admin.CoreV1().Pods("ml").Delete(c.ctx, "batch", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	if node := c.bound("urgent"); node != batchNode {
		t.Errorf("urgent bound to %s, the victim's GPUs were on %s", node, batchNode)
	}
}

func TestARestartResumesFromTheAPIServerWithoutBindingTwice(t *testing.T) {
	c := newTestCluster(t)
	c.addNode("a", 4, "r1")
	c.addNode("b", 4, "r1")
	db := tempDB(t)
	p := c.startPrescient(db, service.ModeAutopilot)
	c.createPod("first", podOpts{gpus: 4})
	first := c.bound("first")
	id := c.jobOf(p, "k8s_pod", "first").ID
	c.waitRunning(p, id)
	p.stop()

	// Meanwhile a pod arrives; the new leader must see that "first" holds
	// its node's GPUs.
	c.createPod("second", podOpts{gpus: 4})
	p = c.startPrescient(db, service.ModeAutopilot)
	second := c.bound("second")
	if second == first {
		t.Fatalf("second bound to %s, where first runs", second)
	}
	time.Sleep(time.Second)
	st, err := p.plane.Job(c.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != cluster.StateRunning || st.Attempts != 1 {
		t.Errorf("first after the restart: %s, %d attempts; want running, 1 attempt", st.State, st.Attempts)
	}
	if f := c.pod("first"); f.Spec.NodeName != first || f.DeletionTimestamp != nil || f.Annotations[kubebackend.AnnotationAttempt] != "1" {
		t.Errorf("first: node %s, deleting %v, attempt %s: want untouched on %s", f.Spec.NodeName, f.DeletionTimestamp != nil,
			f.Annotations[kubebackend.AnnotationAttempt], first)
	}
}

func TestTheAdvisorAnnotatesAndBindsNothing(t *testing.T) {
	c := newTestCluster(t)
	c.addNode("a", 8, "r1")
	c.startPrescient(tempDB(t), service.ModeAdvisor)
	c.createPod("solo", podOpts{gpus: 2})
	var note struct {
		Kind   string `json:"kind"`
		Reason string `json:"reason"`
	}
	eventually(t, "the recommendation annotation", func() bool {
		s := c.pod("solo").Annotations[kubebackend.AnnotationRecommendation]
		return s != "" && json.Unmarshal([]byte(s), &note) == nil
	})
	if note.Kind != "start" || note.Reason == "" {
		t.Errorf("recommendation %+v: want a start with a reason", note)
	}
	eventually(t, "the recommendation Event", func() bool {
		evs, err := c.admin.CoreV1().Events("ml").List(c.ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, e := range evs.Items {
			if e.InvolvedObject.Name == "solo" && e.Reason == "PrescientRecommendation" && e.Type == corev1.EventTypeNormal {
				return true
			}
		}
		return false
	})
	if node := c.pod("solo").Spec.NodeName; node != "" {
		t.Errorf("the advisor bound solo to %s", node)
	}
}

func TestOtherSchedulersPodsHoldTheirGPUs(t *testing.T) {
	c := newTestCluster(t)
	c.addNode("a", 8, "r1")
	c.addNode("b", 8, "r1")
	// An inference server of the default scheduler holds 6 of a's GPUs.
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "inference", Namespace: "ml"},
		Spec: corev1.PodSpec{NodeName: "a", Containers: []corev1.Container{{Name: "serve", Image: "example/serve:1",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{kubebackend.ResourceGPU: resource.MustParse("6")}}}}}}
	if _, err := c.admin.CoreV1().Pods("ml").Create(c.ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.startPrescient(tempDB(t), service.ModeAutopilot)
	c.createPod("one", podOpts{gpus: 4})
	c.createPod("two", podOpts{gpus: 4})
	for _, name := range []string{"one", "two"} {
		if node := c.bound(name); node != "b" {
			t.Errorf("pod %s bound to %s; a has 2 GPUs free, only b fits it", name, node)
		}
	}
	c.createPod("three", podOpts{gpus: 4})
	time.Sleep(2 * time.Second)
	if node := c.pod("three").Spec.NodeName; node != "" {
		t.Fatalf("pod three bound to %s while no node has 4 GPUs free", node)
	}
	// Without a kubelet a bound pod's graceful deletion never ends: it is
	// deleted at once, as the kubelet would confirm it.
	zero := int64(0)
	if err := c.admin.CoreV1().Pods("ml").Delete(c.ctx, "inference", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	if node := c.bound("three"); node != "a" {
		t.Errorf("pod three bound to %s once a's GPUs were given back; want a", node)
	}
}

// A replica that takes over with a store of its own (another volume, or a
// lost one) keeps what the API server says runs: it adopts the bound pods'
// jobs instead of evicting them, and plans around their GPUs.
func TestATakeoverWithAnotherStoreAdoptsWhatRuns(t *testing.T) {
	c := newTestCluster(t)
	c.addNode("a", 8, "r1")
	p := c.startPrescient(tempDB(t), service.ModeAutopilot)
	c.createPod("first", podOpts{gpus: 4})
	c.createPod("gang-0", podOpts{gpus: 2, gang: "g", gangSize: 2})
	c.createPod("gang-1", podOpts{gpus: 2, gang: "g", gangSize: 2})
	for _, n := range []string{"first", "gang-0", "gang-1"} {
		c.bound(n)
	}
	first := c.waitRunning(p, c.jobOf(p, "k8s_pod", "first").ID)
	gang := c.waitRunning(p, c.jobOf(p, "k8s_gang", "g").ID)
	p.stop()

	c.createPod("second", podOpts{gpus: 4})
	p = c.startPrescient(tempDB(t), service.ModeAutopilot)
	for _, want := range []service.JobStatus{first, gang} {
		eventually(t, "job "+string(want.ID)+" adopted", func() bool {
			st, err := p.plane.Job(c.ctx, want.ID)
			return err == nil && st.State == cluster.StateRunning && st.Attempts == want.Attempts
		})
	}
	time.Sleep(time.Second)
	for _, n := range []string{"first", "gang-0", "gang-1"} {
		if pod := c.pod(n); pod.DeletionTimestamp != nil || pod.Spec.NodeName != "a" {
			t.Errorf("pod %s: node %s, deleting %v; want untouched on a", n, pod.Spec.NodeName, pod.DeletionTimestamp != nil)
		}
	}
	if node := c.pod("second").Spec.NodeName; node != "" {
		t.Errorf("second bound to %s while the adopted jobs hold all of a's GPUs", node)
	}
}
