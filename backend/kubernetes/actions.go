package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"k8s.io/component-helpers/storage/volume"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
)

// Start binds the job's pods to the planned nodes: each pod takes its GPU
// count of the node's allocated GPUs. The attempt and job are written on
// each pod first, so that a restart knows what it bound. If a bind fails
// midway, the members already bound are deleted (their controller
// recreates them) and the attempt is reported lost, so the control plane
// requeues it. The same attempt again binds nothing.
func (b *Backend) Start(ctx context.Context, a executor.Assignment) error {
	b.mu.Lock()
	j := b.jobs[a.Job.ID]
	if j == nil || len(j.pods) == 0 {
		b.mu.Unlock()
		return fmt.Errorf("start %s attempt %d: %w", a.Job.ID, a.Attempt, ErrUnknownJob)
	}
	if a.Attempt < j.attempt || (a.Attempt == j.attempt && (j.started || j.provisioning == a.Attempt)) {
		b.mu.Unlock()
		return nil
	}
	var pods []*corev1.Pod
	for _, p := range sortedPods(j.pods) {
		if p.DeletionTimestamp == nil && !finished(p) {
			pods = append(pods, p)
		}
	}
	nodes, err := podNodes(a, len(pods), j.pj.Size)
	if err != nil {
		b.mu.Unlock()
		return fmt.Errorf("start %s attempt %d: %w: %w", a.Job.ID, a.Attempt, ErrInvalidAssignment, err)
	}
	for i, p := range pods {
		if ra, ok := boundAttempt(p); p.Spec.NodeName != "" && (!ok || ra.Job != a.Job.ID || ra.Attempt != a.Attempt || plannerNode(p) != nodes[i]) {
			b.mu.Unlock()
			return fmt.Errorf("start %s attempt %d: %w: pod %s/%s is bound to node %s already", a.Job.ID, a.Attempt,
				ErrInvalidAssignment, p.Namespace, p.Name, p.Spec.NodeName)
		}
	}
	b.unassumeLocked(j, pods) // an older attempt's: this one places them anew
	if err := b.checkPlacementLocked(pods, nodes); err != nil {
		b.mu.Unlock()
		return fmt.Errorf("start %s attempt %d: %w", a.Job.ID, a.Attempt, err)
	}
	b.assumeLocked(pods, nodes)
	j.attempt, j.started, j.ended, j.stopping = a.Attempt, false, false, false
	storage := b.constraints.storage
	b.mu.Unlock()

	if claims := storage.toProvision(pods, nodes); len(claims) > 0 {
		if err := b.selectNodes(ctx, claims); err != nil {
			b.mu.Lock()
			if j.attempt == a.Attempt {
				b.unassumeLocked(j, pods)
				j.ended = true
			}
			b.emitLocked(executor.JobEvent{Type: executor.JobLost, Time: b.cfg.Clock(), Node: nodes[0], Job: a.Job.ID,
				Attempt: a.Attempt, Message: err.Error()})
			b.mu.Unlock()
			return nil
		}
		b.mu.Lock()
		j.provisioning = a.Attempt
		run := b.runCtx
		b.mu.Unlock()
		if run == nil { // Start before Watch: only tests do that
			run = context.WithoutCancel(ctx)
		}
		go b.bindWhenProvisioned(run, a, j, pods, nodes, claims)
		return nil
	}
	b.bindAll(ctx, a, j, pods, nodes)
	return nil
}

// bindAll binds the pods of an attempt to their nodes (Start), reporting
// the attempt started, or lost if a bind fails (the members bound are
// deleted).
func (b *Backend) bindAll(ctx context.Context, a executor.Assignment, j *kubeJob, pods []*corev1.Pod, nodes []string) {
	var bound []*corev1.Pod
	for i, p := range pods {
		if p.Spec.NodeName == "" {
			if err := b.bind(ctx, p, a, parentNode(nodes[i])); err != nil {
				b.log.Warn("bind failed; deleting the members bound", "job", a.Job.ID, "attempt", a.Attempt, "pod", p.Name,
					"node", nodes[i], "bound", len(bound), "error", err)
				b.deletePods(ctx, bound, "its gang could not be bound whole")
				b.mu.Lock()
				if j.attempt == a.Attempt {
					b.unassumeLocked(j, pods)
					j.ended = true
				}
				b.emitLocked(executor.JobEvent{Type: executor.JobLost, Time: b.cfg.Clock(), Node: nodes[i], Job: a.Job.ID,
					Attempt: a.Attempt, Message: fmt.Sprintf("bind of pod %s to node %s failed: %v", p.Name, nodes[i], err)})
				b.mu.Unlock()
				return
			}
		}
		bound = append(bound, p)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if j.attempt == a.Attempt && !j.ended {
		j.started = true
		b.emitLocked(executor.JobEvent{Type: executor.JobStarted, Time: b.cfg.Clock(), Node: nodes[0], Job: a.Job.ID, Attempt: a.Attempt})
	}
}

// claimToProvision is an unbound WaitForFirstConsumer claim of a pod and
// the node its pod goes to.
type claimToProvision struct {
	claim *corev1.PersistentVolumeClaim
	node  string
}

// toProvision are the pods' unbound WaitForFirstConsumer claims with the
// Kubernetes node each pod goes to.
func (s storageListers) toProvision(pods []*corev1.Pod, nodes []string) []claimToProvision {
	if s.claims == nil {
		return nil
	}
	var out []claimToProvision
	for i, p := range pods {
		if p.Spec.NodeName != "" {
			continue
		}
		for _, c := range s.podClaims(p) {
			if c == nil || c.Spec.VolumeName != "" {
				continue
			}
			if delay, err := volume.IsDelayBindingMode(c, s.classes); err == nil && delay {
				out = append(out, claimToProvision{claim: c, node: parentNode(nodes[i])})
			}
		}
	}
	return out
}

// selectNodes writes each claim's node in the annotation its provisioner
// waits for (volume.kubernetes.io/selected-node), as kube-scheduler's
// volume binder does.
func (b *Backend) selectNodes(ctx context.Context, claims []claimToProvision) error {
	for _, c := range claims {
		if c.claim.Annotations[volume.AnnSelectedNode] == c.node {
			continue
		}
		patch, err := annotationPatch(map[string]string{volume.AnnSelectedNode: c.node})
		if err != nil {
			return err
		}
		if _, err := b.cfg.Client.CoreV1().PersistentVolumeClaims(c.claim.Namespace).Patch(ctx, c.claim.Name, types.MergePatchType, patch,
			metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("select node %s for claim %s/%s: %w", c.node, c.claim.Namespace, c.claim.Name, err)
		}
	}
	return nil
}

// bindWhenProvisioned binds the attempt's pods once every claim is bound,
// as kube-scheduler's PreBind waits; the attempt is lost when they are
// not bound within ProvisionTimeout, and dropped when it is stopped or
// replaced meanwhile.
func (b *Backend) bindWhenProvisioned(ctx context.Context, a executor.Assignment, j *kubeJob, pods []*corev1.Pod, nodes []string, claims []claimToProvision) {
	deadline := b.cfg.Clock().Add(b.cfg.ProvisionTimeout)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		b.mu.Lock()
		live := j.attempt == a.Attempt && j.provisioning == a.Attempt && !j.stopping && !j.ended && b.jobs[a.Job.ID] == j
		storage := b.constraints.storage
		if !live && j.provisioning == a.Attempt {
			j.provisioning = 0
		}
		if !live && j.attempt == a.Attempt { // a newer attempt owns what is assumed now
			b.unassumeLocked(j, pods)
		}
		b.mu.Unlock()
		if !live {
			return
		}
		waiting := ""
		for _, c := range claims {
			got, err := storage.claims.PersistentVolumeClaims(c.claim.Namespace).Get(c.claim.Name)
			if err != nil || got.Spec.VolumeName == "" {
				waiting = c.claim.Namespace + "/" + c.claim.Name
				break
			}
		}
		if waiting == "" {
			b.mu.Lock()
			j.provisioning = 0
			b.mu.Unlock()
			b.bindAll(ctx, a, j, pods, nodes)
			return
		}
		if b.cfg.Clock().After(deadline) {
			b.mu.Lock()
			j.provisioning = 0
			if j.attempt == a.Attempt {
				b.unassumeLocked(j, pods)
				j.ended = true
			}
			b.emitLocked(executor.JobEvent{Type: executor.JobLost, Time: b.cfg.Clock(), Node: nodes[0], Job: a.Job.ID, Attempt: a.Attempt,
				Message: fmt.Sprintf("claim %s not bound within %s of its node being selected", waiting, b.cfg.ProvisionTimeout)})
			b.mu.Unlock()
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// checkPlacementLocked runs, for each pod not yet bound, the filters
// that read the pods bound (podsFilter) at its planned node, each pod
// seeing the gang's members before it as bound, as kube-scheduler binding
// them one by one would; members on one node must not share a host port,
// and together with the pods bound there must fit its CPU, memory and pod
// count. A node that a pod bound since the plan now rules
// out is executor.ErrPlanStale (the job is planned again); one the gang's
// own members rule out is ErrInvalidAssignment.
func (b *Backend) checkPlacementLocked(pods []*corev1.Pod, nodes []string) error {
	var members []*placedPod
	for i, p := range pods {
		n := b.constraints.nodes[parentNode(nodes[i])]
		if p.Spec.NodeName != "" || n == nil {
			continue // bound: it counts itself
		}
		f, err := newPodsFilter(p, b.podListerLocked(nil))
		if err != nil {
			return fmt.Errorf("%w: pod %s/%s: %s%v", ErrInvalidAssignment, p.Namespace, p.Name, reasonAffinityNotValid, err)
		}
		why := f.refuses(n)
		if why == "" {
			why = insufficient(b.constraints.allocatable[n.Name], b.constraints.pods.used[n.Name], requestsOf(p))
		}
		if why == "" {
			why = otherRequests(p).lacking(b.constraints.allocOther[n.Name], b.constraints.pods.usedOther[n.Name])
		}
		if why != "" {
			return fmt.Errorf("pod %s/%s on node %s: %s, since the plan: %w", p.Namespace, p.Name, n.Name, why, executor.ErrPlanStale)
		}
		if len(members) > 0 {
			f, _ = newPodsFilter(p, b.podListerLocked(members))
			why = f.refuses(n)
		}
		used := b.constraints.pods.used[n.Name]
		for _, m := range members {
			if m.node == n.Name {
				used = used.plus(m.req)
			}
		}
		if why == "" {
			why = insufficient(b.constraints.allocatable[n.Name], used, requestsOf(p))
		}
		for k := range i {
			if why == "" && parentNode(nodes[k]) == n.Name && portsConflict(hostPorts(p), hostPorts(pods[k])) {
				why = "node(s) didn't have free ports for the requested pod ports"
			}
		}
		if why != "" {
			return fmt.Errorf("%w: pod %s/%s on node %s: %s, with its gang's members placed before it", ErrInvalidAssignment,
				p.Namespace, p.Name, n.Name, why)
		}
		members = append(members, newPlacedPod(p, n.Name))
	}
	return nil
}

// assumeLocked counts the pods as bound to their nodes from now, as
// kube-scheduler assumes a pod before its bind: a plan made before the
// informer shows the binds sees them.
func (b *Backend) assumeLocked(pods []*corev1.Pod, nodes []string) {
	for i, p := range pods {
		key := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
		if _, placed := b.constraints.pods.all[key]; !placed && p.Spec.NodeName == "" {
			b.setPlacedLocked(key, p, parentNode(nodes[i]))
		}
	}
}

// unassumeLocked forgets what assumeLocked counted for the pods of the job
// that are still unbound (a bind that failed or never came).
func (b *Backend) unassumeLocked(j *kubeJob, pods []*corev1.Pod) {
	for _, p := range pods {
		if cur := j.pods[p.Name]; cur == nil || cur.Spec.NodeName == "" {
			b.setPlacedLocked(types.NamespacedName{Namespace: p.Namespace, Name: p.Name}, nil, "")
		}
	}
}

// podNodes says which node each of n pods (sorted by name) goes to: the
// allocations' nodes in order of first appearance, each taking as many
// pods as it has GPUs for.
func podNodes(a executor.Assignment, n, size int) ([]string, error) {
	if n != size {
		return nil, fmt.Errorf("%d of the gang's %d pods exist", n, size)
	}
	if len(a.Allocations) == 0 {
		return nil, errors.New("no allocations")
	}
	perPod := a.Job.Spec.GPUs / size
	var order []string
	gpus := map[string]int{}
	for _, al := range a.Allocations {
		if _, ok := gpus[al.GPU.Node]; !ok {
			order = append(order, al.GPU.Node)
		}
		gpus[al.GPU.Node]++
	}
	if perPod == 0 {
		if len(order) != 1 && size != 1 {
			return nil, errors.New("GPU-less gang members spread over several nodes")
		}
		out := make([]string, n)
		for i := range out {
			out[i] = order[i%len(order)]
		}
		return out, nil
	}
	var out []string
	for _, node := range order {
		if gpus[node]%perPod != 0 {
			return nil, fmt.Errorf("node %s: %d GPUs do not split into pods of %d", node, gpus[node], perPod)
		}
		for k := 0; k < gpus[node]/perPod; k++ {
			out = append(out, node)
		}
	}
	if len(out) != n {
		return nil, fmt.Errorf("the allocations hold %d pods of %d GPUs, the job has %d", len(out), perPod, n)
	}
	return out, nil
}

// bind writes the job and attempt on the pod, then binds it to node.
func (b *Backend) bind(ctx context.Context, p *corev1.Pod, a executor.Assignment, node string) error {
	patch, err := annotationPatch(map[string]string{AnnotationJob: string(a.Job.ID), AnnotationAttempt: strconv.Itoa(a.Attempt)})
	if err != nil {
		return err
	}
	pods := b.cfg.Client.CoreV1().Pods(p.Namespace)
	if _, err := pods.Patch(ctx, p.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("annotate pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	binding := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID},
		Target: corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: node}}
	if err := pods.Bind(ctx, binding, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("bind pod %s/%s to node %s: %w", p.Namespace, p.Name, node, err)
	}
	return nil
}

// deletePods deletes pods (their controller recreates them); gone ones
// are no error.
func (b *Backend) deletePods(ctx context.Context, pods []*corev1.Pod, why string) {
	for _, p := range pods {
		err := b.cfg.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			b.log.Error("pod not deleted", "pod", p.Namespace+"/"+p.Name, "why", why, "error", err)
			continue
		}
		b.log.Info("pod deleted", "pod", p.Namespace+"/"+p.Name, "why", why)
	}
}

// Checkpoint implements executor.Backend: it sets
// prescient.io/checkpoint-requested on every member; the workload answers
// with prescient.io/checkpointed-at.
func (b *Backend) Checkpoint(ctx context.Context, id cluster.JobID) error {
	pods, err := b.members(id, "checkpoint")
	if err != nil {
		return err
	}
	patch, err := annotationPatch(map[string]string{AnnotationCheckpointRequested: b.cfg.Clock().UTC().Format(time.RFC3339)})
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range pods {
		if _, err := b.cfg.Client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("checkpoint %s: annotate pod %s/%s: %w", id, p.Namespace, p.Name, err))
		}
	}
	return errors.Join(errs...)
}

// Stop implements executor.Backend: it evicts every member through the
// Eviction API with the grace period. A job whose pods are gone is
// stopped already.
func (b *Backend) Stop(ctx context.Context, id cluster.JobID, grace time.Duration) error {
	b.mu.Lock()
	j := b.jobs[id]
	if j == nil || len(j.pods) == 0 || j.ended {
		b.mu.Unlock()
		return nil
	}
	j.stopping = true
	pods := sortedPods(j.pods)
	b.mu.Unlock()
	secs := int64(grace.Round(time.Second) / time.Second)
	var errs []error
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace},
			DeleteOptions: &metav1.DeleteOptions{GracePeriodSeconds: &secs, Preconditions: &metav1.Preconditions{UID: &p.UID}}}
		if err := b.cfg.Client.PolicyV1().Evictions(p.Namespace).Evict(ctx, ev); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("stop %s: evict pod %s/%s: %w", id, p.Namespace, p.Name, err))
		}
	}
	return errors.Join(errs...)
}

// members returns the pods of a job.
func (b *Backend) members(id cluster.JobID, what string) ([]*corev1.Pod, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	j := b.jobs[id]
	if j == nil || len(j.pods) == 0 {
		return nil, fmt.Errorf("%s %s: %w", what, id, ErrUnknownJob)
	}
	var out []*corev1.Pod
	for _, p := range sortedPods(j.pods) {
		if !finished(p) { // a Job's failed pods of earlier attempts are history
			out = append(out, p)
		}
	}
	return out, nil
}
