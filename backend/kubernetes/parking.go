package kubernetes

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
)

// The Backend is the control plane's Cordoner: a node the plane parks is
// cordoned (spec.unschedulable, as kubectl cordon sets it) and annotated
// AnnotationParked, so that no scheduler places a pod on a node being
// powered down; the annotation says the cordon is Prescient's, and only
// such a cordon is taken off. A cordon an operator set first keeps the
// node from being parked (it is drained); one set while the node is
// parked is taken off with Prescient's when the node is woken. The writes
// need get and patch on nodes (deploy/kubernetes/components/parking/parking.yaml).

// Unparkable implements service.Cordoner: a node where pods of other
// schedulers run (but for DaemonSets' and static pods that hold no GPUs,
// which every node runs) is not powered down, nor a node whose GPUs are
// partitioned into MIG instances (the planner sees the instances as a
// node of their own, which may be busy while the node is empty).
func (b *Backend) Unparkable(node string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	host := parentNode(node)
	if len(b.migNodes[host]) > 0 || host != node {
		return "its GPUs are partitioned into MIG instances"
	}
	if n := b.foreignOn[node]; n > 0 {
		return fmt.Sprintf("pods of other schedulers run there (%d)", n)
	}
	return ""
}

// Cordoned implements service.Cordoner: the nodes the informer last saw
// with AnnotationParked.
func (b *Backend) Cordoned() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Sorted(maps.Keys(b.cordoned))
}

// parkedMark reports whether a node bears AnnotationParked, whatever its
// value (the time it was put on).
func parkedMark(kn *corev1.Node) bool {
	_, ok := kn.Annotations[AnnotationParked]
	return ok
}

// Marked implements service.Cordoner: whether the API server's node
// bears AnnotationParked now; a node that is gone is an error.
func (b *Backend) Marked(ctx context.Context, node string) (bool, error) {
	kn, err := b.cfg.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return false, fmt.Errorf("kubernetes backend: reading node %s: %w", node, err)
	}
	return parkedMark(kn), nil
}

// Cordon implements service.Cordoner. It reads the node from the API
// server and patches it on that version only (a node changed meanwhile
// is an error, and the plane tries again later); a node already cordoned
// by someone else is refused. Once cordoned, the node's pods are listed
// from the API server, not the informer: a pod another scheduler bound
// there before the cordon (after the plane found the node empty) takes
// the cordon off again (read afresh, as the node lifecycle controller
// taints a cordoned node meanwhile), and the node is not parked. A node
// whose object is gone (a cloud's node controller deletes the Node of a
// stopped machine) takes no pod: there is nothing to cordon (placed is
// false). If the cordon cannot be taken off again, the error comes with
// placed true: the mark is on.
func (b *Backend) Cordon(ctx context.Context, node string) (placed bool, err error) {
	kn, err := b.cfg.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("kubernetes backend: cordoning node %s: %w", node, err)
	}
	if parkedMark(kn) && kn.Spec.Unschedulable {
		return false, nil
	}
	if kn.Spec.Unschedulable {
		return false, fmt.Errorf("kubernetes backend: node %s is cordoned already, not by Prescient: it is not parked", node)
	}
	at := b.cfg.Clock().UTC().Format(time.RFC3339)
	if _, err := b.patchNode(ctx, kn, at, true); err != nil {
		return false, fmt.Errorf("kubernetes backend: cordoning node %s: %w", node, err)
	}
	var why error
	switch landed, err := b.podOfOthersOn(ctx, node); {
	case err != nil:
		why = fmt.Errorf("kubernetes backend: cordoning node %s: listing its pods: %w", node, err)
	case landed != "":
		why = fmt.Errorf("kubernetes backend: node %s: pod %s of another scheduler runs there: it is not parked", node, landed)
	default:
		b.log.Info("node cordoned to be parked", "node", node)
		return true, nil
	}
	if err := b.unmark(ctx, node); err != nil {
		return true, fmt.Errorf("%w; taking its cordon off again: %w", why, err)
	}
	return false, why
}

// podOfOthersOn names a pod of another scheduler that runs on node and
// is neither a DaemonSet's nor a static pod (or is one that holds GPUs),
// as the API server lists them now; "" when there is none.
func (b *Backend) podOfOthersOn(ctx context.Context, node string) (string, error) {
	pods, err := b.cfg.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String()})
	if err != nil {
		return "", err
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Spec.NodeName == node && othersBound(p) && !nodeService(p) { // the selector repeated, for clients that ignore it
			return p.Namespace + "/" + p.Name, nil
		}
	}
	return "", nil
}

// Uncordon implements service.Cordoner: it takes AnnotationParked and the
// cordon off a node that bears the annotation; a node without it, or
// gone, is left alone.
func (b *Backend) Uncordon(ctx context.Context, node string) error {
	if err := b.unmark(ctx, node); err != nil {
		return fmt.Errorf("kubernetes backend: uncordoning node %s: %w", node, err)
	}
	return nil
}

// unmark takes AnnotationParked and the cordon off node, reading it afresh
// and trying again while its version changes under the patch.
func (b *Backend) unmark(ctx context.Context, node string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		kn, err := b.cfg.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if !parkedMark(kn) {
			return nil
		}
		if _, err := b.patchNode(ctx, kn, "", false); err != nil {
			return err
		}
		b.log.Info("node uncordoned: no longer parked", "node", node)
		return nil
	})
}

// patchNode sets a node's cordon and AnnotationParked (at; "" removes it)
// with a merge patch that holds only on the version read, and returns the
// node patched.
func (b *Backend) patchNode(ctx context.Context, kn *corev1.Node, at string, cordon bool) (*corev1.Node, error) {
	var ann any = at
	if at == "" {
		ann = nil // a merge patch's null deletes the key
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": kn.ResourceVersion, "annotations": map[string]any{AnnotationParked: ann}},
		"spec":     map[string]any{"unschedulable": cordon},
	})
	if err != nil {
		return nil, err
	}
	return b.cfg.Client.CoreV1().Nodes().Patch(ctx, kn.Name, types.MergePatchType, patch, metav1.PatchOptions{})
}

// othersBound reports whether a pod of another scheduler is bound to a
// node and holds its resources there: not finished.
func othersBound(p *corev1.Pod) bool {
	return p.Spec.SchedulerName != SchedulerName && p.Spec.NodeName != "" &&
		p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

// nodeService reports whether a pod is a service of its node, which
// parking powers down with it: a DaemonSet's or a static pod that holds
// no GPUs (one that does is work).
func nodeService(p *corev1.Pod) bool {
	_, mig, err := podMIG(p)
	return daemonPod(p) && podGPUs(p) == 0 && mig == 0 && err == nil
}

// daemonPod reports whether a pod is a DaemonSet's or a static pod (the
// kubelet's mirror of it): pods every node runs.
func daemonPod(p *corev1.Pod) bool {
	if _, ok := p.Annotations[corev1.MirrorPodAnnotationKey]; ok {
		return true
	}
	for _, o := range p.OwnerReferences {
		if o.Kind == "DaemonSet" && o.Controller != nil && *o.Controller && strings.HasPrefix(o.APIVersion, "apps/") {
			return true
		}
	}
	return false
}
