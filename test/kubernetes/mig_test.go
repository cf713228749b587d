package kubernetes

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubebackend "github.com/prescient-sched/prescient/backend/kubernetes"
	"github.com/prescient-sched/prescient/service"
)

// addMIGNode creates a Ready A100 node whose GPUs are all partitioned into
// MIG instances, as the device plugin's mixed strategy reports them.
func (c *testCluster) addMIGNode(name string, instances map[string]int64) {
	c.t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		kubebackend.LabelGPUProduct: "NVIDIA-A100-SXM4-80GB", kubebackend.LabelGPUCount: "1",
		"nvidia.com/mig.strategy": "mixed"}}}
	n, err := c.admin.CoreV1().Nodes().Create(c.ctx, n, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("32"), corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods: resource.MustParse("110")}
	for prof, k := range instances {
		res[corev1.ResourceName(kubebackend.ResourceMIGPrefix+prof)] = *resource.NewQuantity(k, resource.DecimalSI)
	}
	n.Status = corev1.NodeStatus{Capacity: res, Allocatable: res,
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}}
	n, err = c.admin.CoreV1().Nodes().UpdateStatus(c.ctx, n, metav1.UpdateOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	c.liftNotReady(n)
}

// createMIGPod creates a pod of Prescient's scheduler in namespace ml that
// asks one MIG instance of the profile.
func (c *testCluster) createMIGPod(name, profile string) {
	c.t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ml", Labels: map[string]string{kubebackend.LabelTenant: "ml"}},
		Spec: corev1.PodSpec{SchedulerName: kubebackend.SchedulerName, Containers: []corev1.Container{{Name: "notebook", Image: "example/notebook:1",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
				corev1.ResourceName(kubebackend.ResourceMIGPrefix + profile): resource.MustParse("1")}}}}}}
	if _, err := c.admin.CoreV1().Pods("ml").Create(c.ctx, p, metav1.CreateOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

func TestMIGPodsAreBoundToNodesWithInstancesOfTheirProfile(t *testing.T) {
	c := newTestCluster(t)
	c.addNode("a", 8, "r1")
	c.addMIGNode("m", map[string]int64{"1g.10gb": 2, "3g.40gb": 1})
	p := c.startPrescient(tempDB(t), service.ModeAutopilot)
	c.createPod("train", podOpts{gpus: 8})
	c.createMIGPod("nb-0", "1g.10gb")
	c.createMIGPod("nb-1", "1g.10gb")
	if node := c.bound("train"); node != "a" {
		t.Errorf("the whole-GPU pod bound to %s; only a has whole GPUs", node)
	}
	for _, name := range []string{"nb-0", "nb-1"} {
		if node := c.bound(name); node != "m" {
			t.Errorf("pod %s bound to %s; only m has 1g.10gb instances", name, node)
		}
		st := c.waitRunning(p, c.jobOf(p, "k8s_pod", name).ID)
		if nodes := placementNodes(st.Placement); nodes["m:mig-1g.10gb"] != 1 {
			t.Errorf("pod %s placed on %v; want one instance of m:mig-1g.10gb", name, st.Placement)
		}
	}
	// Both 1g.10gb instances are taken: the third waits though the node
	// has a 3g.40gb instance free.
	c.createMIGPod("nb-2", "1g.10gb")
	time.Sleep(2 * time.Second)
	if node := c.pod("nb-2").Spec.NodeName; node != "" {
		t.Fatalf("nb-2 bound to %s with no 1g.10gb instance free", node)
	}
	zero := int64(0)
	if err := c.admin.CoreV1().Pods("ml").Delete(c.ctx, "nb-0", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	if node := c.bound("nb-2"); node != "m" {
		t.Errorf("nb-2 bound to %s once an instance was given back; want m", node)
	}
}
