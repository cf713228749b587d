package kubernetes

import (
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
)

// batchJobOf is a batch Job as its controller would see it.
func batchJobOf(name string, completions, parallelism *int32, created time.Time) *batchv1.Job {
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name, UID: types.UID("juid-" + name + "-0000"),
		CreationTimestamp: metav1.NewTime(created)},
		Spec: batchv1.JobSpec{Completions: completions, Parallelism: parallelism}}
}

// podOfJob is a pod the Job's controller made: gpus GPUs, owned by j.
func podOfJob(j *batchv1.Job, name string, gpus int) *corev1.Pod {
	p := gpuPod("ml", name, gpus, map[string]string{LabelTenant: "vision"})
	p.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(j, batchv1.SchemeGroupVersion.WithKind("Job"))}
	return p
}

func TestAJobsPodsAreOneJobAcrossTheirRetries(t *testing.T) {
	created := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	kj := batchJobOf("train", nil, nil, created)
	kj.Spec.ActiveDeadlineSeconds = ptr.To[int64](3600)
	e := newFakeEnv(t, gpuNode("a", 8, nil), kj, podOfJob(kj, "train-x1", 4))
	e.watch()
	id := cluster.JobID("k8s:ml:job=train:juid-tra")
	eventually(t, "the Job's pod submitted as the Job's job", func() bool { _, ok := e.svc.request(id); return ok })
	req, _ := e.svc.request(id)
	if !req.Spec.Deadline.Equal(created.Add(time.Hour)) || req.Spec.Labels["k8s_job"] != "train" || req.Spec.GPUs != 4 ||
		req.Spec.Tenant != "vision" {
		t.Errorf("spec %+v; want 4 GPUs of tenant vision, label k8s_job train and the deadline of activeDeadlineSeconds", req.Spec)
	}
	if err := e.backend.Start(e.ctx, assignment(id, 1, 4, []string{"a"}, []int{4})); err != nil {
		t.Fatal(err)
	}
	e.next(executor.JobStarted)

	// The pod fails: the Job's controller will retry it, so the attempt
	// is lost (requeued), not the job failed.
	p := e.pod("ml", "train-x1")
	p.Status.Phase = corev1.PodFailed
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", State: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{ExitCode: 137}}}}
	if _, err := e.client.CoreV1().Pods("ml").UpdateStatus(e.ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if ev := e.next(executor.JobLost); ev.Job != id || ev.Attempt != 1 {
		t.Errorf("lost event %+v; want attempt 1 of %s", ev, id)
	}

	if !e.backend.Waiting(id) {
		t.Error("the job does not wait for its replacement pod")
	}
	// Its replacement is the same job's next attempt; the failed pod stays
	// unbound history.
	e.create(podOfJob(kj, "train-x2", 4))
	eventually(t, "the replacement filed", func() bool {
		e.backend.mu.Lock()
		defer e.backend.mu.Unlock()
		return e.backend.jobs[id].pods["train-x2"] != nil
	})
	if e.backend.Waiting(id) {
		t.Error("the job waits though its replacement pod exists")
	}
	if err := e.backend.Start(e.ctx, assignment(id, 2, 4, []string{"a"}, []int{4})); err != nil {
		t.Fatal(err)
	}
	if ev := e.next(executor.JobStarted); ev.Attempt != 2 {
		t.Errorf("started %+v; want attempt 2", ev)
	}
	if got := e.pod("ml", "train-x2"); got.Spec.NodeName != "a" || got.Annotations[AnnotationAttempt] != "2" {
		t.Errorf("replacement on %q with %v; want node a, attempt 2", got.Spec.NodeName, got.Annotations)
	}
	e.svc.mu.Lock()
	n := len(e.svc.submitted)
	e.svc.mu.Unlock()
	if n != 1 {
		t.Errorf("%d jobs submitted; want the Job's one", n)
	}

	// The controller gives up: the job is cancelled.
	kj = kj.DeepCopy()
	kj.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded"}}
	if _, err := e.client.BatchV1().Jobs("ml").UpdateStatus(e.ctx, kj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the failed Job's job cancelled", func() bool {
		e.svc.mu.Lock()
		defer e.svc.mu.Unlock()
		return slices.Contains(e.svc.cancelled, id)
	})
}

func TestIndexedAndParallelJobsPods(t *testing.T) {
	indexed := batchJobOf("sweep", ptr.To[int32](2), ptr.To[int32](2), time.Now())
	workers := batchJobOf("queue", nil, ptr.To[int32](3), time.Now())
	p0, p1 := podOfJob(indexed, "sweep-0-a", 1), podOfJob(indexed, "sweep-1-b", 1)
	p0.Annotations = map[string]string{AnnotationCompletionIndex: "0"}
	p1.Annotations = map[string]string{AnnotationCompletionIndex: "1"}
	w := podOfJob(workers, "queue-abc", 1)
	e := newFakeEnv(t, gpuNode("a", 8, nil), indexed, workers, p0, p1, w)
	e.watch()
	for _, id := range []cluster.JobID{"k8s:ml:job=sweep:juid-swe:index=0", "k8s:ml:job=sweep:juid-swe:index=1",
		"k8s:ml:pod=queue-abc:uid-queu"} {
		eventually(t, "job "+string(id)+" submitted", func() bool { _, ok := e.svc.request(id); return ok })
	}
}

func TestAPodWaitsForItsOwningJobToBeSeen(t *testing.T) {
	kj := batchJobOf("late", nil, nil, time.Now())
	e := newFakeEnv(t, gpuNode("a", 8, nil), podOfJob(kj, "late-x", 2))
	e.watch()
	time.Sleep(100 * time.Millisecond)
	e.svc.mu.Lock()
	n := len(e.svc.submitted)
	e.svc.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d jobs submitted before the pod's Job was seen", n)
	}
	if _, err := e.client.BatchV1().Jobs("ml").Create(e.ctx, kj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the pod submitted once its Job is seen", func() bool {
		_, ok := e.svc.request("k8s:ml:job=late:juid-lat")
		return ok
	})
}

// A pod that ended while no replica watched is reported after the sync
// that lists it; a Job's failed pod of an earlier attempt is history and
// listed nowhere.
func TestARestartReportsPodsThatEndedUnwatched(t *testing.T) {
	kj := batchJobOf("train", nil, nil, time.Now())
	old, done := podOfJob(kj, "train-1", 2), gpuPod("ml", "done", 2, nil)
	id := cluster.JobID("k8s:ml:job=train:juid-tra")
	old.Spec.NodeName, old.Status.Phase = "a", corev1.PodFailed
	old.Annotations = map[string]string{AnnotationJob: string(id), AnnotationAttempt: "1"}
	current := podOfJob(kj, "train-2", 2)
	current.Spec.NodeName = "a"
	current.Annotations = map[string]string{AnnotationJob: string(id), AnnotationAttempt: "2"}
	done.Spec.NodeName, done.Status.Phase = "a", corev1.PodSucceeded
	done.Annotations = map[string]string{AnnotationJob: "k8s:ml:pod=done:uid-done", AnnotationAttempt: "1"}
	e := newFakeEnv(t, gpuNode("a", 8, nil), kj, old, current, done)
	e.watch()
	if n := e.backend.InitialEvents(); n != 2 {
		t.Errorf("%d initial events; want node a's sync and the exit", n)
	}
	sync := e.next(executor.NodeSynced)
	want := []executor.RunningAttempt{{Job: id, Attempt: 2}, {Job: "k8s:ml:pod=done:uid-done", Attempt: 1}}
	if !slices.Equal(sync.Running, want) {
		t.Errorf("synced %v; want %v (not the Job's failed attempt 1)", sync.Running, want)
	}
	if h := sync.Holdings[want[0]]; len(h) != 2 || h[0].GPU.Node != "a" {
		t.Errorf("holdings of %v: %v; want 2 GPUs of a", want[0], h)
	}
	if ev := e.next(executor.JobExited); ev.Job != "k8s:ml:pod=done:uid-done" || ev.ExitCode != 0 {
		t.Errorf("exit %+v; want the succeeded pod's job", ev)
	}
}

// A Job's job outlives its pods while the Job lives (its controller's
// backoff can be minutes), and goes with the Job.
func TestAJobsJobWaitsForItsPodsAsLongAsTheJobLives(t *testing.T) {
	kj := batchJobOf("train", nil, nil, time.Now())
	e := newFakeEnv(t, gpuNode("a", 8, nil), kj, podOfJob(kj, "train-x1", 2))
	e.watch()
	id := cluster.JobID("k8s:ml:job=train:juid-tra")
	eventually(t, "submitted", func() bool { _, ok := e.svc.request(id); return ok })
	if err := e.client.CoreV1().Pods("ml").Delete(e.ctx, "train-x1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // GoneAfter is 50 ms
	e.svc.mu.Lock()
	cancelled := slices.Contains(e.svc.cancelled, id)
	e.svc.mu.Unlock()
	if cancelled {
		t.Fatal("the job was cancelled while its Job lives")
	}
	if !e.backend.Waiting(id) {
		t.Error("the job does not wait for its Job's next pod")
	}
	if err := e.client.BatchV1().Jobs("ml").Delete(e.ctx, "train", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the deleted Job's job cancelled", func() bool {
		e.svc.mu.Lock()
		defer e.svc.mu.Unlock()
		return slices.Contains(e.svc.cancelled, id)
	})
}
