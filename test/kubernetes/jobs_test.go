package kubernetes

import (
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	kubebackend "github.com/prescient-sched/prescient/backend/kubernetes"
	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/service"
)

// createJobPod creates, as the Job controller would (none runs here), a
// pod of the Job's template owned by the Job.
func (c *testCluster) createJobPod(j *batchv1.Job, name string) {
	c.t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: j.Namespace, Labels: j.Spec.Template.Labels,
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(j, batchv1.SchemeGroupVersion.WithKind("Job"))}},
		Spec: *j.Spec.Template.Spec.DeepCopy()}
	if _, err := c.admin.CoreV1().Pods(j.Namespace).Create(c.ctx, p, metav1.CreateOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

func TestAJobsReplacementPodIsTheSameJobsNextAttempt(t *testing.T) {
	c := newTestCluster(t)
	c.addNode("a", 8, "r1")
	p := c.startPrescient(tempDB(t), service.ModeAutopilot)
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ml"},
		Spec: batchv1.JobSpec{Completions: ptr.To[int32](1), ActiveDeadlineSeconds: ptr.To[int64](7200),
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{kubebackend.LabelTenant: "ml"}},
				Spec: corev1.PodSpec{SchedulerName: kubebackend.SchedulerName, RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{Name: "train", Image: "example/train:1", Resources: corev1.ResourceRequirements{
						Limits: corev1.ResourceList{kubebackend.ResourceGPU: resource.MustParse("4")}}}}}}}}
	j, err := c.admin.BatchV1().Jobs("ml").Create(c.ctx, j, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.createJobPod(j, "train-1")
	if node := c.bound("train-1"); node != "a" {
		t.Fatalf("train-1 bound to %s", node)
	}
	st := c.waitRunning(p, c.jobOf(p, "k8s_job", "train").ID)
	if st.Deadline == nil || st.Deadline.Sub(j.CreationTimestamp.Time) != 2*time.Hour {
		t.Errorf("deadline %v; want the Job's creation + activeDeadlineSeconds (2h)", st.Deadline)
	}

	// A node drain deletes the pod; the Job's controller makes another,
	// which is the same job's next attempt.
	zero := int64(0)
	if err := c.admin.CoreV1().Pods("ml").Delete(c.ctx, "train-1", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the job requeued", func() bool {
		s, err := p.plane.Job(c.ctx, st.ID)
		return err == nil && s.State == cluster.StateQueued
	})
	// While the Job has no pod, the job waits: no attempt is spent.
	time.Sleep(time.Second)
	c.createJobPod(j, "train-2")
	if node := c.bound("train-2"); node != "a" {
		t.Fatalf("train-2 bound to %s", node)
	}
	var again service.JobStatus
	eventually(t, "attempt 2 of the same job running", func() bool {
		again, err = p.plane.Job(c.ctx, st.ID)
		return err == nil && again.State == cluster.StateRunning && again.Attempts == 2
	})
	if a := c.pod("train-2").Annotations; a[kubebackend.AnnotationJob] != string(st.ID) || a[kubebackend.AnnotationAttempt] != fmt.Sprint(again.Attempts) {
		t.Errorf("train-2 annotations %v; want job %s, attempt %d", a, st.ID, again.Attempts)
	}

	// The controller gives up on the Job: its job is cancelled and its pod
	// evicted.
	j, err = c.admin.BatchV1().Jobs("ml").Get(c.ctx, "train", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	j.Status.StartTime = &now
	j.Status.Conditions = append(j.Status.Conditions,
		batchv1.JobCondition{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: "DeadlineExceeded", LastTransitionTime: now},
		batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "DeadlineExceeded", LastTransitionTime: now})
	if _, err := c.admin.BatchV1().Jobs("ml").UpdateStatus(c.ctx, j, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the failed Job's pod evicted", func() bool { return c.pod("train-2").DeletionTimestamp != nil })
	// The kubelet would end the container; without one, the test removes
	// the pod object.
	if err := c.admin.CoreV1().Pods("ml").Delete(c.ctx, "train-2", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the failed Job's job cancelled", func() bool {
		s, err := p.plane.Job(c.ctx, st.ID)
		return err == nil && s.State == cluster.StateCancelled
	})
}
