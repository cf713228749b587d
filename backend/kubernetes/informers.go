package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/service"
)

func (b *Backend) nodeChanged(o any) {
	kn, ok := o.(*corev1.Node)
	if !ok {
		return
	}
	ns, err := nodesFromKube(kn)
	b.mu.Lock()
	defer b.mu.Unlock()
	mig := slices.Clone(b.migNodes[kn.Name])
	defer func() {
		if !slices.Equal(mig, b.migNodes[kn.Name]) {
			b.constraints.version++ // the allowed nodes name MIG instances' nodes
		}
	}()
	b.dropNodeLocked(kn.Name)
	b.setNodeLocked(kn)
	if parkedMark(kn) {
		b.cordoned[kn.Name] = true
	} else {
		delete(b.cordoned, kn.Name)
	}
	if err != nil {
		if b.badNode[kn.Name] != err.Error() {
			b.badNode[kn.Name] = err.Error()
			b.log.Warn("node ignored", "node", kn.Name, "error", err)
		}
		return
	}
	delete(b.badNode, kn.Name)
	for _, n := range ns[1:] {
		b.migNodes[kn.Name] = append(b.migNodes[kn.Name], n.Name)
		b.nodes[n.Name] = n
	}
	b.nodes[kn.Name] = ns[0]
}

// dropNodeLocked forgets a node and the nodes of its MIG instances.
func (b *Backend) dropNodeLocked(name string) {
	for _, m := range b.migNodes[name] {
		delete(b.nodes, m)
	}
	delete(b.migNodes, name)
	delete(b.nodes, name)
}

func (b *Backend) nodeDeleted(o any) {
	kn, ok := o.(*corev1.Node)
	if !ok {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.dropNodeLocked(kn.Name)
	b.forgetNodeLocked(kn.Name)
	delete(b.badNode, kn.Name)
	delete(b.cordoned, kn.Name)
	// Its pods are gone with it: their deletions report the jobs.
}

// foreignChanged records what a pod of another scheduler holds on its node;
// the informer's field selector already leaves out unbound and finished
// pods, and the checks here repeat it for clients that ignore selectors. A
// terminating pod holds its resources until its object is gone.
func (b *Backend) foreignChanged(o any) {
	p, ok := o.(*corev1.Pod)
	if !ok {
		return
	}
	key := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
	b.mu.Lock()
	defer b.mu.Unlock()
	if p.Spec.SchedulerName == SchedulerName {
		return // Prescient's own: podChanged's (a client that ignores the selector sends them here too)
	}
	if !othersBound(p) {
		b.setForeignLocked(key, nil)
		b.setPlacedLocked(key, nil, "")
		return
	}
	b.setPlacedLocked(key, p, p.Spec.NodeName)
	cpu, mem := podRequests(p)
	f := foreignPod{node: p.Spec.NodeName, gpus: podGPUs(p), cpuMilli: cpu, memBytes: mem}
	if prof, n, err := podMIG(p); err == nil && n > 0 {
		f.mig, f.migCount = p.Spec.NodeName+MIGNodeSeparator+prof, n
	}
	f.daemon = nodeService(p)
	b.setForeignLocked(key, &f)
}

// setForeignLocked records what a foreign pod holds (nil: nothing, it is
// gone) and keeps foreignOn counting it.
func (b *Backend) setForeignLocked(key types.NamespacedName, f *foreignPod) {
	if old, ok := b.foreign[key]; ok && !old.daemon {
		if b.foreignOn[old.node]--; b.foreignOn[old.node] <= 0 {
			delete(b.foreignOn, old.node)
		}
	}
	delete(b.foreign, key)
	if f == nil {
		return
	}
	b.foreign[key] = *f
	if !f.daemon {
		b.foreignOn[f.node]++
	}
}

func (b *Backend) foreignDeleted(o any) {
	p, ok := o.(*corev1.Pod)
	if !ok {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	key := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
	b.setForeignLocked(key, nil)
	if p.Spec.SchedulerName != SchedulerName {
		b.setPlacedLocked(key, nil, "")
	}
}

// podChanged files a pod under its job, submits the job once all its
// members exist, and reports checkpoints and exits.
func (b *Backend) podChanged(ctx context.Context, o any) {
	p, ok := o.(*corev1.Pod)
	if !ok || p.Spec.SchedulerName != SchedulerName {
		return
	}
	pj, err := jobOfPod(p, b.batchJob)
	if errors.Is(err, errOwnerNotSeen) {
		if b.park(p) {
			b.log.Debug("pod waits for its Job", "pod", p.Namespace+"/"+p.Name, "error", err)
			return
		}
		pj, err = jobOfPod(p, b.batchJob) // the Job was seen meanwhile
	}
	if err != nil {
		b.log.Warn("pod ignored", "pod", p.Namespace+"/"+p.Name, "error", err)
		b.podEvent(ctx, p, corev1.EventTypeWarning, "PrescientInvalid", err.Error())
		return
	}
	b.mu.Lock()
	if _, deleted := b.gone[p.UID]; deleted {
		b.mu.Unlock()
		return // a copy of a pod deleted since (one that waited for its Job)
	}
	j := b.jobs[pj.ID]
	if j == nil {
		j = &kubeJob{pj: pj, pods: map[string]*corev1.Pod{}}
		b.jobs[pj.ID] = j
	}
	j.pods[p.Name] = p
	b.forgetJobLocked(j.pj.ID)
	j.empty = time.Time{}
	key := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
	b.byPod[key] = pj.ID
	if finished(p) {
		b.setPlacedLocked(key, nil, "")
	} else if p.Spec.NodeName != "" {
		b.setPlacedLocked(key, p, p.Spec.NodeName)
	} // unbound: keeps what Start assumed when it bound the pod
	if node := plannerNode(p); node != p.Spec.NodeName && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
		cpu, mem := podRequests(p)
		b.ownMIG[key] = foreignPod{node: p.Spec.NodeName, cpuMilli: cpu, memBytes: mem}
	} else {
		delete(b.ownMIG, key)
	}
	b.checkpointedLocked(j, p)
	b.finishedLocked(j)
	var submit *service.SubmitRequest
	var members []*corev1.Pod
	if j.submitted != "ok" && len(j.pods) >= pj.Size {
		members = specMembers(j.pods, pj.Size)
		spec, err := specOf(pj, members, b.cfg.PriorityTiers)
		if err != nil {
			if j.submitted != err.Error() {
				j.submitted = err.Error()
				b.mu.Unlock()
				b.log.Warn("job not submitted", "job", pj.ID, "error", err)
				b.podEvent(ctx, p, corev1.EventTypeWarning, "PrescientInvalid", err.Error())
				return
			}
		} else {
			submit = &service.SubmitRequest{ID: pj.ID, Spec: spec}
		}
	}
	svc := b.svc
	b.mu.Unlock()
	if submit == nil {
		return
	}
	st, err := svc.Submit(ctx, *submit)
	b.mu.Lock()
	defer b.mu.Unlock()
	if errors.Is(err, service.ErrConflict) {
		// The store has the job already, from another spec (another
		// replica's view of its pods): it is the same job.
		b.log.Info("job known already", "job", pj.ID, "note", err)
		j.submitted = "ok"
		return
	}
	if err != nil {
		b.log.Warn("job not submitted", "job", pj.ID, "error", err)
		if j.submitted != err.Error() {
			j.submitted = err.Error()
			go b.podEvent(ctx, p, corev1.EventTypeWarning, "PrescientRejected", err.Error())
		}
		return
	}
	j.submitted = "ok"
	b.log.Info("job submitted", "job", pj.ID, "state", st.State, "pods", len(members), "gpus", submit.Spec.GPUs)
}

// checkpointedLocked reports a new prescient.io/checkpointed-at on a
// member of a started attempt.
func (b *Backend) checkpointedLocked(j *kubeJob, p *corev1.Pod) {
	v, ok := p.Annotations[AnnotationCheckpointedAt]
	if !ok || v == j.ack || !j.started || j.ended {
		return
	}
	if ra, bound := boundAttempt(p); !bound || ra.Attempt != j.attempt {
		return // a pod of an earlier attempt (a Job's failed pod)
	}
	j.ack = v
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		b.log.Warn("checkpoint acknowledgement ignored", "pod", p.Namespace+"/"+p.Name,
			"error", fmt.Errorf("annotation %s=%q: want an RFC 3339 time: %w", AnnotationCheckpointedAt, v, err))
		return
	}
	cp := &cluster.Checkpoint{Time: t.UTC(), Path: p.Annotations[AnnotationCheckpointPath]}
	if s, ok := p.Annotations[AnnotationCheckpointStep]; ok {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			cp.Step = n
		}
	}
	b.emitLocked(executor.JobEvent{Type: executor.JobCheckpointed, Time: b.cfg.Clock(), Node: plannerNode(p),
		Job: j.pj.ID, Attempt: j.attempt, Checkpoint: cp})
}

// finishedLocked reports the exit of a started attempt whose pods ended
// on their own (a kubelet set their phase): failed at the first member
// that failed, succeeded once every member succeeded.
func (b *Backend) finishedLocked(j *kubeJob) {
	if !j.started || j.ended {
		return
	}
	done := 0
	for _, p := range j.pods {
		if ra, ok := boundAttempt(p); !ok || ra.Attempt != j.attempt {
			continue // an earlier attempt's pod, or one not bound
		}
		switch p.Status.Phase {
		case corev1.PodFailed:
			j.ended = true
			if b.retriedLocked(j) {
				// Its controller retries it with a new pod: the same job's
				// next attempt.
				b.emitLocked(executor.JobEvent{Type: executor.JobLost, Time: b.cfg.Clock(), Node: plannerNode(p), Job: j.pj.ID,
					Attempt: j.attempt, Message: fmt.Sprintf("pod %s failed (exit %d), Job %s retries it: %s", p.Name,
						exitCode(p), j.pj.Owner.Name, p.Status.Message)})
				return
			}
			b.emitLocked(executor.JobEvent{Type: executor.JobExited, Time: b.cfg.Clock(), Node: plannerNode(p), Job: j.pj.ID,
				Attempt: j.attempt, ExitCode: exitCode(p), Stopped: j.stopping, Message: "pod " + p.Name + " failed: " + p.Status.Message})
			return
		case corev1.PodSucceeded:
			done++
		}
	}
	if done == j.pj.Size {
		j.ended = true
		b.emitLocked(executor.JobEvent{Type: executor.JobExited, Time: b.cfg.Clock(), Job: j.pj.ID, Attempt: j.attempt, Stopped: j.stopping})
	}
}

// exitCode is the first non-zero exit code of a failed pod's containers;
// -1 when none says.
func exitCode(p *corev1.Pod) int {
	for _, s := range p.Status.ContainerStatuses {
		if t := s.State.Terminated; t != nil && t.ExitCode != 0 {
			return int(t.ExitCode)
		}
	}
	return -1
}

// podDeleted frees what the pod held: a started attempt whose pods are
// gone exited (stopped, when Prescient evicted them), and a gang that
// loses a member it did not lose on request is lost (its other members are
// deleted, for their controller to recreate).
func (b *Backend) podDeleted(ctx context.Context, o any) {
	p, ok := o.(*corev1.Pod)
	if !ok {
		return
	}
	key := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.gone[p.UID] = b.cfg.Clock()
	delete(b.ownMIG, key)
	b.setPlacedLocked(key, nil, "")
	if ref := metav1.GetControllerOf(p); ref != nil {
		jk := types.NamespacedName{Namespace: p.Namespace, Name: ref.Name}
		if delete(b.parked[jk], p.Name); len(b.parked[jk]) == 0 {
			delete(b.parked, jk)
		}
	}
	id, ok := b.byPod[key]
	if !ok {
		return
	}
	delete(b.byPod, key)
	j := b.jobs[id]
	if j == nil {
		return
	}
	delete(j.pods, p.Name)
	if len(j.pods) == 0 {
		j.empty = b.cfg.Clock()
	}
	ra, bound := boundAttempt(p)
	if !bound || ra.Attempt != j.attempt || !j.started || j.ended {
		return
	}
	now := b.cfg.Clock()
	switch {
	case j.stopping:
		for _, q := range j.pods {
			if qa, bound := boundAttempt(q); bound && qa.Attempt == j.attempt && !finished(q) {
				return // the others have yet to go
			}
		}
		j.ended = true
		b.emitLocked(executor.JobEvent{Type: executor.JobExited, Time: now, Node: plannerNode(p), Job: id, Attempt: j.attempt,
			Stopped: true, ExitCode: -1, Message: "pods evicted"})
	case p.Status.Phase == corev1.PodSucceeded && !j.pj.Gang:
		j.ended = true
		b.emitLocked(executor.JobEvent{Type: executor.JobExited, Time: now, Node: plannerNode(p), Job: id, Attempt: j.attempt})
	case !finished(p) && b.retriedLocked(j):
		j.ended = true
		b.emitLocked(executor.JobEvent{Type: executor.JobLost, Time: now, Node: plannerNode(p), Job: id, Attempt: j.attempt,
			Message: "pod " + p.Name + " was deleted; Job " + j.pj.Owner.Name + " recreates it"})
	case j.pj.Gang:
		j.ended = true
		b.emitLocked(executor.JobEvent{Type: executor.JobLost, Time: now, Node: plannerNode(p), Job: id, Attempt: j.attempt,
			Message: "gang member " + p.Name + " was deleted"})
		rest := sortedPods(j.pods)
		go b.deletePods(ctx, rest, "a member of its gang was deleted")
	default:
		j.ended = true
		b.emitLocked(executor.JobEvent{Type: executor.JobExited, Time: now, Node: plannerNode(p), Job: id, Attempt: j.attempt,
			ExitCode: exitCode(p), Message: "pod " + p.Name + " was deleted"})
	}
}

// sweep cancels the jobs that have had no pod for GoneAfter.
func (b *Backend) sweep(ctx context.Context) {
	every := min(b.cfg.GoneAfter/2, 5*time.Second)
	t := time.NewTicker(max(every, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := b.cfg.Clock()
		var gone []cluster.JobID
		b.mu.Lock()
		svc := b.svc
		for uid, at := range b.gone {
			if now.Sub(at) >= goneMemory {
				delete(b.gone, uid)
			}
		}
		for id, j := range b.jobs {
			// A Job's job waits for its controller's next pod (backoff,
			// suspension) as long as the Job lives: its failure or deletion
			// cancels it.
			if len(j.pods) == 0 && !j.empty.IsZero() && now.Sub(j.empty) >= b.cfg.GoneAfter && !b.ownerLivesLocked(j) {
				delete(b.jobs, id)
				b.forgetJobLocked(id)
				if j.submitted == "ok" {
					gone = append(gone, id)
				}
			}
		}
		b.mu.Unlock()
		b.cancelJobs(ctx, svc, gone, "it has had no pod for "+b.cfg.GoneAfter.String())
	}
}
