package kubernetes

import (
	"context"
	"errors"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/service"
)

// retriedLocked reports whether the owning Job of a job's pods will
// replace a pod that failed or was deleted: the job is a Job's unit of
// work, Prescient did not stop it, and the Job has not failed.
func (b *Backend) retriedLocked(j *kubeJob) bool {
	return !j.stopping && b.ownerLivesLocked(j)
}

// ownerLivesLocked reports whether a job is a Job's unit of work and that
// Job still exists, has not failed (nor is about to: FailureTarget) and
// has not completed.
func (b *Backend) ownerLivesLocked(j *kubeJob) bool {
	owner := j.pj.Owner
	if owner == nil || b.failedJobs[owner.UID] {
		return false
	}
	current := b.batchJobs[types.NamespacedName{Namespace: owner.Namespace, Name: owner.Name}]
	if current == nil || current.UID != owner.UID {
		return false
	}
	if _, failed := jobFailed(current); failed {
		return false
	}
	for _, c := range current.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailureTarget) && c.Status == corev1.ConditionTrue {
			return false
		}
	}
	return true
}

// batchJob is the Job of that name as last seen; nil when none is.
func (b *Backend) batchJob(ns, name string) *batchv1.Job {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.batchJobs[types.NamespacedName{Namespace: ns, Name: name}]
}

// park keeps a pod until its owning Job is seen; it reports false, parking
// nothing, when the Job was seen meanwhile (the pod is to be filed again)
// or the pod is gone.
func (b *Backend) park(p *corev1.Pod) bool {
	ref := metav1.GetControllerOf(p)
	if ref == nil {
		return true
	}
	jk := types.NamespacedName{Namespace: p.Namespace, Name: ref.Name}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, deleted := b.gone[p.UID]; deleted {
		return true
	}
	if kj := b.batchJobs[jk]; kj != nil && kj.UID == ref.UID {
		return false
	}
	if b.parked[jk] == nil {
		b.parked[jk] = map[string]*corev1.Pod{}
	}
	b.parked[jk][p.Name] = p
	return true
}

// batchJobChanged records a Job, files the pods that waited for it, and,
// once its controller has given up on it (condition Failed), cancels the
// Prescient jobs of its pods that are still queued or running.
func (b *Backend) batchJobChanged(ctx context.Context, o any) {
	kj, ok := o.(*batchv1.Job)
	if !ok {
		return
	}
	jk := types.NamespacedName{Namespace: kj.Namespace, Name: kj.Name}
	b.mu.Lock()
	b.batchJobs[jk] = kj
	var waiting []*corev1.Pod
	for _, p := range b.parked[jk] {
		waiting = append(waiting, p)
	}
	delete(b.parked, jk)
	var cancel []cluster.JobID
	why, failed := jobFailed(kj)
	if failed && !b.failedJobs[kj.UID] {
		b.failedJobs[kj.UID] = true
		cancel = b.jobsOfLocked(kj.UID, false)
	}
	svc := b.svc
	b.mu.Unlock()
	for _, p := range waiting {
		b.podChanged(ctx, p)
	}
	b.cancelJobs(ctx, svc, cancel, "its Job "+kj.Namespace+"/"+kj.Name+" failed: "+why)
}

func (b *Backend) batchJobDeleted(ctx context.Context, o any) {
	kj, ok := o.(*batchv1.Job)
	if !ok {
		return
	}
	b.mu.Lock()
	delete(b.batchJobs, types.NamespacedName{Namespace: kj.Namespace, Name: kj.Name})
	delete(b.failedJobs, kj.UID)
	// Its pods go with it (the garbage collector deletes them); the jobs
	// of its pods that are not running are cancelled now, those that run
	// when their pods go (the sweep).
	cancel := b.jobsOfLocked(kj.UID, true)
	svc := b.svc
	b.mu.Unlock()
	b.cancelJobs(ctx, svc, cancel, "its Job "+kj.Namespace+"/"+kj.Name+" was deleted")
}

// jobsOfLocked are the submitted jobs of a batch Job's pods; with idle,
// only those not running.
func (b *Backend) jobsOfLocked(uid types.UID, idle bool) []cluster.JobID {
	var out []cluster.JobID
	for id, j := range b.jobs {
		if j.pj.Owner != nil && j.pj.Owner.UID == uid && j.submitted == "ok" && !(idle && j.started && !j.ended) {
			out = append(out, id)
		}
	}
	return out
}

// cancelJobs cancels jobs through svc, saying why in the log; a job that
// ended already (ErrConflict) is no error.
func (b *Backend) cancelJobs(ctx context.Context, svc Service, ids []cluster.JobID, why string) {
	for _, id := range ids {
		if _, err := svc.Cancel(ctx, id); err != nil && !errors.Is(err, service.ErrConflict) {
			b.log.Warn("job not cancelled", "job", id, "why", why, "error", err)
			continue
		}
		b.log.Info("job cancelled", "job", id, "why", why)
	}
}
