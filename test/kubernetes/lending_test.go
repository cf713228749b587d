package kubernetes

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubebackend "github.com/prescient-sched/prescient/backend/kubernetes"
	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/collector"
	"github.com/prescient-sched/prescient/collector/nvml"
	"github.com/prescient-sched/prescient/control"
	"github.com/prescient-sched/prescient/control/lending"
	"github.com/prescient-sched/prescient/executor/lend"
	"github.com/prescient-sched/prescient/service"
)

// An inference pool on Kubernetes: the inference servers are pods of the
// default scheduler, and the nodes' GPUs carry no UUIDs. The pool's
// telemetry, read from the store by the nodes its samples name, lends the
// idle node; once its server is gone a training pod is bound there.
func TestAnIdleInferenceNodeIsLentOnKubernetes(t *testing.T) {
	c := newTestCluster(t)
	c.addNode("train", 8, "r1")
	for _, n := range []string{"inf-0", "inf-1"} {
		c.addNode(n, 8, "r1")
		node, err := c.admin.CoreV1().Nodes().Get(c.ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		node.Labels[cluster.PoolLabel] = "inference"
		if _, err := c.admin.CoreV1().Nodes().Update(c.ctx, node, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The servers hold 6 of inf-0's GPUs, busy, and 2 of inf-1's, idle.
	for n, gpus := range map[string]int{"inf-0": 6, "inf-1": 2} {
		server := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "serve-" + n, Namespace: "ml"},
			Spec: corev1.PodSpec{NodeName: n, Containers: []corev1.Container{{Name: "serve", Image: "example/serve:1",
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{kubebackend.ResourceGPU: *resource.NewQuantity(int64(gpus), resource.DecimalSI)}}}}}}
		if _, err := c.admin.CoreV1().Pods("ml").Create(c.ctx, server, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The collectors' last hour: every GPU of the two nodes, by UUID and
	// node name, inf-0's first 6 at 60% utilization, the rest at 0.
	now := time.Now().UTC()
	var samples []collector.Sample
	for at := now.Add(-time.Hour); at.Before(now); at = at.Add(time.Minute) {
		for n, busy := range map[string]int{"inf-0": 6, "inf-1": 0} {
			for g := range 8 {
				util := 0.0
				if g < busy {
					util = 60
				}
				samples = append(samples, collector.Sample{Time: at, Node: n,
					DeviceInfo:   nvml.DeviceInfo{UUID: fmt.Sprintf("GPU-%s-%d", n, g), Index: g, Model: "NVIDIA H100 80GB HBM3"},
					DeviceSample: nvml.DeviceSample{UtilGPUPct: util, PowerW: 100, MemTotalBytes: 80 << 30}})
			}
		}
	}
	p := c.startPrescientWith(tempDB(t), service.ModeAutopilot, func(cfg *control.Config) {
		telemetry := collector.NewEmbeddedSink(cfg.Store)
		if err := telemetry.Write(c.ctx, samples); err != nil {
			t.Fatal(err)
		}
		cfg.Telemetry = telemetry
		cfg.Lending = &lending.Config{Pools: []string{"inference"}, Recent: lend.DefaultRecent, Handover: time.Second}
	})
	c.createPod("hold", podOpts{gpus: 8}) // takes the training node
	if node := c.bound("hold"); node != "train" {
		t.Fatalf("pod hold bound to %s, want train: the inference nodes take no training unless lent", node)
	}
	loan := func(node string) string {
		if l := c.fleetNode(p, node).Loan; l != nil {
			return l.State
		}
		return ""
	}
	eventually(t, "inf-1 lent", func() bool { return loan("inf-1") == "lent" })
	if st := loan("inf-0"); st != "serving" {
		t.Errorf("inf-0: %q, want serving: 6 of its GPUs are busy", st)
	}
	// The service moves off the lent node (here: its pod is deleted, as
	// the kubelet would confirm), and a training pod of 8 GPUs is bound
	// there.
	c.createPod("more", podOpts{gpus: 8, checkpointable: true})
	zero := int64(0)
	if err := c.admin.CoreV1().Pods("ml").Delete(c.ctx, "serve-inf-1", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	if node := c.bound("more"); node != "inf-1" {
		t.Errorf("pod more bound to %s, want inf-1, lent", node)
	}
}
