package kubernetes

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubebackend "github.com/prescient-sched/prescient/backend/kubernetes"
	"github.com/prescient-sched/prescient/control"
	"github.com/prescient-sched/prescient/control/parking"
	manifests "github.com/prescient-sched/prescient/deploy/kubernetes"
	"github.com/prescient-sched/prescient/service"
)

// Parking on Kubernetes, under the rights of rbac.yaml and parking.yaml:
// the empty node is cordoned and parked, the node where a pod of the
// default scheduler runs is not, and a pod that fits only on the parked
// node wakes it, which is uncordoned and takes the pod once it is up.
func TestAnEmptyNodeIsCordonedWhileParkedAndUncordonedWhenWoken(t *testing.T) {
	c := newTestCluster(t)
	objs, err := manifests.Objects("components/parking/parking.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		c.apply(o)
	}
	for _, n := range []string{"a", "b", "shared"} {
		c.addNode(n, 8, "r1")
	}
	notebook := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "notebook", Namespace: "ml"},
		Spec: corev1.PodSpec{NodeName: "shared", Containers: []corev1.Container{{Name: "nb", Image: "example/notebook:1",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{kubebackend.ResourceGPU: *resource.NewQuantity(2, resource.DecimalSI)}}}}}}
	if _, err := c.admin.CoreV1().Pods("ml").Create(c.ctx, notebook, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.createPod("hold", podOpts{gpus: 8}) // bound at the first cycle, before a node has been empty a second
	p := c.startPrescientWith(tempDB(t), service.ModeAutopilot, func(cfg *control.Config) {
		cfg.Parking = &parking.Config{IdleAfter: time.Second}
		cfg.Cordoner = cfg.Backend.(*kubebackend.Backend)
	})
	busy := c.bound("hold")
	empty := map[string]string{"a": "b", "b": "a"}[busy]
	if empty == "" {
		t.Fatalf("pod hold bound to %s, want a or b", busy)
	}
	state := func(node string) string { return c.fleetNode(p, node).State }
	node := func(name string) *corev1.Node {
		n, err := c.admin.CoreV1().Nodes().Get(c.ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	eventually(t, empty+" parked", func() bool { return state(empty) == "parked" })
	if n := node(empty); !n.Spec.Unschedulable || n.Annotations[kubebackend.AnnotationParked] == "" {
		t.Fatalf("parked node %s: unschedulable %v, annotations %v; want it cordoned and marked", empty, n.Spec.Unschedulable, n.Annotations)
	}
	time.Sleep(2 * time.Second) // shared has been empty of Prescient's pods for two seconds more
	if st := state("shared"); st != "ready" {
		t.Errorf("node shared, where the notebook runs: %s, want ready", st)
	}
	if n := node("shared"); n.Spec.Unschedulable {
		t.Error("node shared cordoned")
	}

	// A pod of 8 GPUs fits only on the parked node: it is woken (no
	// resume program: it is up, so awake at once), uncordoned, and the
	// pod is bound there.
	c.createPod("more", podOpts{gpus: 8})
	if got := c.bound("more"); got != empty {
		t.Errorf("pod more bound to %s, want %s, woken", got, empty)
	}
	if n := node(empty); n.Spec.Unschedulable || n.Annotations[kubebackend.AnnotationParked] != "" {
		t.Errorf("woken node %s: unschedulable %v, annotations %v; want the cordon and the mark off", empty, n.Spec.Unschedulable, n.Annotations)
	}
}
