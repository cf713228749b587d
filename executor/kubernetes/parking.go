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
	"k8s.io/apimachinery/pkg/types"
)

// The Backend is the control plane's Cordoner: a node the plane parks is
// cordoned (spec.unschedulable, as kubectl cordon sets it) and annotated
// AnnotationParked, so that no scheduler places a pod on a node being
// powered down; the annotation says the cordon is Prescient's, and only
// such a cordon is taken off. A cordon an operator set first keeps the
// node from being parked (it is drained); one set while the node is
// parked is taken off with Prescient's when the node is woken. The writes
// need get and patch on nodes (deploy/kubernetes/parking.yaml).

// Unparkable implements control.Cordoner: a node where pods of other
// schedulers run (but for DaemonSets' and static pods that hold no GPUs,
// which every node runs) is not powered down, nor a node whose GPUs are partitioned into
// MIG instances (the planner sees the instances as a node of their own,
// which may be busy while the node is empty).
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

// Cordoned implements control.Cordoner: the nodes the informer last saw
// with AnnotationParked.
func (b *Backend) Cordoned() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Sorted(maps.Keys(b.cordoned))
}

// Cordon implements control.Cordoner. It reads the node from the API
// server and patches it on that version only (a node changed meanwhile
// is an error, and the plane tries again at a later cycle); a node
// already cordoned by someone else is refused. A node whose object is
// gone (a cloud's node controller deletes the Node of a stopped machine)
// takes no pod: there is nothing to cordon.
func (b *Backend) Cordon(ctx context.Context, node string) error {
	kn, err := b.cfg.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("kubernetes backend: cordoning node %s: %w", node, err)
	}
	if kn.Annotations[AnnotationParked] != "" && kn.Spec.Unschedulable {
		return nil
	}
	if kn.Spec.Unschedulable {
		return fmt.Errorf("kubernetes backend: node %s is cordoned already, not by Prescient: it is not parked", node)
	}
	at := b.cfg.Clock().UTC().Format(time.RFC3339)
	if err := b.patchNode(ctx, kn, at, true); err != nil {
		return fmt.Errorf("kubernetes backend: cordoning node %s: %w", node, err)
	}
	b.log.Info("node cordoned to be parked", "node", node)
	return nil
}

// Uncordon implements control.Cordoner: it takes AnnotationParked and the
// cordon off a node that bears the annotation; a node without it, or
// gone, is left alone.
func (b *Backend) Uncordon(ctx context.Context, node string) error {
	kn, err := b.cfg.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("kubernetes backend: uncordoning node %s: %w", node, err)
	}
	if _, ok := kn.Annotations[AnnotationParked]; !ok {
		return nil
	}
	if err := b.patchNode(ctx, kn, "", false); err != nil {
		return fmt.Errorf("kubernetes backend: uncordoning node %s: %w", node, err)
	}
	b.log.Info("node uncordoned: no longer parked", "node", node)
	return nil
}

// patchNode sets a node's cordon and AnnotationParked (at; "" removes it)
// with a merge patch that holds only on the version read.
func (b *Backend) patchNode(ctx context.Context, kn *corev1.Node, at string, cordon bool) error {
	var ann any = at
	if at == "" {
		ann = nil // a merge patch's null deletes the key
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": kn.ResourceVersion, "annotations": map[string]any{AnnotationParked: ann}},
		"spec":     map[string]any{"unschedulable": cordon},
	})
	if err != nil {
		return err
	}
	_, err = b.cfg.Client.CoreV1().Nodes().Patch(ctx, kn.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

// daemonPod reports whether a pod is a DaemonSet's or a static pod (the
// kubelet's mirror of it): pods every node runs, which parking powers
// down with their node.
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
