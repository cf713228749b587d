package kubernetes

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/prescient-sched/prescient/cluster"
)

// A node Prescient cordoned to park it is as its readiness says: the
// plane keeps it out of the plan, and tells from its readiness whether it
// went down. Any other cordon drains the node.
func TestANodeCordonedToParkIsAsItsReadinessSays(t *testing.T) {
	parked := func(ready bool) *corev1.Node {
		n := gpuNode("p", 8, nil)
		n.Spec.Unschedulable = true
		n.Annotations = map[string]string{AnnotationParked: "2026-12-05T04:00:00Z"}
		if ready {
			n.Annotations[AnnotationParked] = "" // the mark is the key, whatever its value
		} else {
			n.Status.Conditions[0].Status = corev1.ConditionUnknown
		}
		return n
	}
	for _, tc := range []struct {
		name string
		node *corev1.Node
		want cluster.NodeState
	}{
		{"cordoned to park, up", parked(true), cluster.NodeReady},
		{"cordoned to park, down", parked(false), cluster.NodeDrained},
	} {
		n, err := nodeFromKube(tc.node)
		if err != nil || n.State != tc.want {
			t.Errorf("%s: state %s (%v), want %s", tc.name, n.State, err, tc.want)
		}
	}
}

func TestCordonAndUncordonTouchOnlyPrescientsMark(t *testing.T) {
	byHand := gpuNode("b", 8, nil)
	byHand.Spec.Unschedulable = true
	e := newFakeEnv(t, gpuNode("a", 8, nil), byHand)
	e.watch()
	ctx := context.Background()
	node := func(name string) *corev1.Node {
		n, err := e.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	if placed, err := e.backend.Cordon(ctx, "a"); err != nil || !placed {
		t.Fatalf("Cordon of an empty node: placed %v, %v", placed, err)
	}
	if a := node("a"); !a.Spec.Unschedulable || a.Annotations[AnnotationParked] == "" {
		t.Fatalf("node a after Cordon: unschedulable %v, annotations %v", a.Spec.Unschedulable, a.Annotations)
	}
	eventually(t, "the informer sees a's mark", func() bool { return slices.Equal(e.backend.Cordoned(), []string{"a"}) })
	if on, err := e.backend.Marked(ctx, "a"); err != nil || !on {
		t.Errorf("Marked(a): %v, %v; want true", on, err)
	}
	if on, err := e.backend.Marked(ctx, "gone"); err == nil {
		t.Errorf("Marked of a node that is not there: %v, want an error", on)
	}
	if n := e.backend.Nodes()[0]; n.Name != "a" || n.State != cluster.NodeReady {
		t.Errorf("node a cordoned to park and Ready: %s %s, want ready", n.Name, n.State)
	}
	if placed, err := e.backend.Cordon(ctx, "a"); err != nil || placed {
		t.Errorf("a second Cordon: placed %v, %v; want the mark found on", placed, err)
	}

	_, err := e.backend.Cordon(ctx, "b")
	if err == nil || !strings.Contains(err.Error(), "node b") || !strings.Contains(err.Error(), "not by Prescient") {
		t.Errorf("Cordon of a node cordoned by hand: %v, want an error naming it", err)
	}
	if err := e.backend.Uncordon(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if b := node("b"); !b.Spec.Unschedulable || b.Annotations[AnnotationParked] != "" {
		t.Errorf("node b, cordoned by hand, after Uncordon: unschedulable %v, annotations %v; want it left alone", b.Spec.Unschedulable, b.Annotations)
	}

	if err := e.backend.Uncordon(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if a := node("a"); a.Spec.Unschedulable || a.Annotations[AnnotationParked] != "" {
		t.Errorf("node a after Uncordon: unschedulable %v, annotations %v", a.Spec.Unschedulable, a.Annotations)
	}
	eventually(t, "the informer sees a unmarked", func() bool { return len(e.backend.Cordoned()) == 0 })
	if err := e.backend.Uncordon(ctx, "gone"); err != nil {
		t.Errorf("Uncordon of a node that is not there: %v, want nil", err)
	}
	if _, err := e.backend.Cordon(ctx, "gone"); err != nil {
		t.Errorf("Cordon of a node whose object is gone (a stopped cloud machine): %v, want nil: no pod goes there", err)
	}
	e.client.PrependReactor("get", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("connection refused")
	})
	if _, err := e.backend.Cordon(ctx, "a"); err == nil || !strings.Contains(err.Error(), "node a") {
		t.Errorf("Cordon with the API server unreachable: %v, want an error naming the node", err)
	}
}

// A pod another scheduler bound to the node after the plane found it
// empty (before the informer showed it) is found by Cordon, which takes
// its cordon off again, read afresh (the node lifecycle controller taints
// a cordoned node meanwhile), and refuses; a DaemonSet's pod is no such
// pod unless it holds GPUs.
func TestACordonFindsAPodThatLandedFirst(t *testing.T) {
	e := newFakeEnv(t, gpuNode("a", 8, nil), gpuNode("b", 8, nil), gpuNode("c", 8, nil))
	e.watch()
	ctx := context.Background()
	exporter, burnIn := ofDaemonSet(othersPod("exporter-b", "b", 0)), ofDaemonSet(othersPod("burn-in-c", "c", 1))
	for _, p := range []*corev1.Pod{othersPod("notebook", "a", 0), othersPod("done", "b", 0), exporter, burnIn} {
		if p.Name == "done" {
			p.Status.Phase = corev1.PodSucceeded
		}
		if _, err := e.client.CoreV1().Pods("infra").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var calls []string // on nodes, during the Cordon
	e.client.PrependReactor("*", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		calls = append(calls, a.GetVerb())
		if len(calls) == 4 { // the revert's first patch: the node changed since the cordon
			return true, nil, apierrors.NewConflict(corev1.Resource("nodes"), "a", errors.New("the object has been modified"))
		}
		return false, nil, nil
	})
	placed, err := e.backend.Cordon(ctx, "a")
	if err == nil || placed || !strings.Contains(err.Error(), "infra/notebook") || !strings.Contains(err.Error(), "node a") {
		t.Errorf("Cordon of a node where a pod landed: placed %v, %v; want an error naming the node and the pod", placed, err)
	}
	if want := []string{"get", "patch", "get", "patch", "get", "patch"}; !slices.Equal(calls, want) {
		t.Errorf("calls on nodes %v, want %v: the cordon, a revert refused for a conflict, the revert, each on the node read afresh", calls, want)
	}
	a, err := e.client.CoreV1().Nodes().Get(ctx, "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a.Spec.Unschedulable || a.Annotations[AnnotationParked] != "" {
		t.Errorf("node a after the refused Cordon: unschedulable %v, annotations %v; want its cordon off", a.Spec.Unschedulable, a.Annotations)
	}
	if _, err := e.backend.Cordon(ctx, "b"); err != nil {
		t.Errorf("Cordon of a node with a DaemonSet's pod and a finished pod: %v", err)
	}
	if _, err := e.backend.Cordon(ctx, "c"); err == nil || !strings.Contains(err.Error(), "infra/burn-in-c") {
		t.Errorf("Cordon of a node where a DaemonSet's pod holds a GPU: %v, want it refused", err)
	}
}

// A cordon whose revert fails is reported placed, with the error: the
// mark is on, and the plane takes it off later.
func TestACordonLeftOnIsReportedPlaced(t *testing.T) {
	e := newFakeEnv(t, gpuNode("a", 8, nil))
	e.watch()
	ctx := context.Background()
	if _, err := e.client.CoreV1().Pods("infra").Create(ctx, othersPod("notebook", "a", 0), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	patches := 0
	e.client.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		if patches++; patches > 1 {
			return true, nil, errors.New("connection refused")
		}
		return false, nil, nil
	})
	placed, err := e.backend.Cordon(ctx, "a")
	if err == nil || !placed || !strings.Contains(err.Error(), "taking its cordon off again") {
		t.Errorf("Cordon whose revert fails: placed %v, %v; want placed and an error saying the cordon stayed", placed, err)
	}
}

// Parking would power down what runs on a node: another scheduler's pod
// keeps it up, a DaemonSet's or a static pod does not unless it holds
// GPUs, and a node of MIG instances is never parked.
func TestANodeWhereOtherWorkRunsIsUnparkable(t *testing.T) {
	foreign := func(name, node string) *corev1.Pod { return othersPod(name, node, 0) }
	daemon := ofDaemonSet(foreign("exporter-x", "b"))
	static := foreign("etcd-b", "b")
	static.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"}
	gpuDaemon := ofDaemonSet(othersPod("burn-in-c", "c", 1))
	e := newFakeEnv(t, gpuNode("a", 8, nil), gpuNode("b", 8, nil), gpuNode("c", 8, nil), migNodeOf("m", 4, map[string]int64{"1g.10gb": 7}),
		foreign("notebook", "a"), foreign("cache", "a"), daemon, static, gpuDaemon)
	e.watch()
	if why := e.backend.Unparkable("c"); why != "pods of other schedulers run there (1)" {
		t.Errorf("node c, where a DaemonSet's pod holds a GPU: %q, want unparkable", why)
	}
	if why := e.backend.Unparkable("a"); why != "pods of other schedulers run there (2)" {
		t.Errorf("node a, where two pods of other schedulers run: %q", why)
	}
	if why := e.backend.Unparkable("b"); why != "" {
		t.Errorf("node b, with a DaemonSet's pod and a static pod: %q, want parkable", why)
	}
	for _, n := range []string{"m", "m" + MIGNodeSeparator + "1g.10gb"} {
		if why := e.backend.Unparkable(n); !strings.Contains(why, "MIG") {
			t.Errorf("node %s: %q, want it unparkable for its MIG instances", n, why)
		}
	}
	if err := e.client.CoreV1().Pods("infra").Delete(context.Background(), "notebook", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "one pod on a once the other is gone", func() bool {
		return e.backend.Unparkable("a") == "pods of other schedulers run there (1)"
	})
	// A pod that finishes no longer counts.
	p, err := e.client.CoreV1().Pods("infra").Get(context.Background(), "cache", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status.Phase = corev1.PodSucceeded
	if _, err := e.client.CoreV1().Pods("infra").UpdateStatus(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "node a parkable once its pods ended", func() bool { return e.backend.Unparkable("a") == "" })
}

// othersPod is a running pod of the default scheduler on node, asking for
// gpus.
func othersPod(name, node string, gpus int) *corev1.Pod {
	p := gpuPod("infra", name, gpus, nil)
	p.Spec.SchedulerName, p.Spec.NodeName, p.Status.Phase = "default-scheduler", node, corev1.PodRunning
	return p
}

// ofDaemonSet makes p a DaemonSet's pod.
func ofDaemonSet(p *corev1.Pod) *corev1.Pod {
	yes := true
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: appsv1.SchemeGroupVersion.String(), Kind: "DaemonSet", Name: "exporter", UID: "ds", Controller: &yes}}
	return p
}
