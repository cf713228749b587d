package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/service"
)

func TestNodesComeFromGPULabelsAndAllocatable(t *testing.T) {
	notReady := gpuNode("c", 4, nil)
	notReady.Status.Conditions[0].Status = corev1.ConditionFalse
	cordoned := gpuNode("d", 2, nil)
	cordoned.Spec.Unschedulable = true
	e := newFakeEnv(t, gpuNode("a", 8, map[string]string{LabelRack: "r1", LabelLeaf: "l1", LabelNVLinkDomain: "nv0"}),
		gpuNode("b", 4, map[string]string{LabelGPUMemory: "bad"}), notReady, cordoned)
	e.watch()
	nodes := e.backend.Nodes()
	names := make([]string, len(nodes))
	for i, n := range nodes {
		names[i] = n.Name
	}
	if !slices.Equal(names, []string{"a", "c", "d"}) {
		t.Fatalf("nodes %v: want a, c, d (b has a malformed label)", names)
	}
	a := nodes[0]
	if len(a.GPUs) != 8 || a.State != cluster.NodeReady || a.Topology != (cluster.Topology{Rack: "r1", Leaf: "l1"}) || a.CPUMilli != 64000 {
		t.Errorf("node a: %+v", a)
	}
	g := a.GPUs[7]
	if g.Index != 7 || g.MemoryBytes != 81559<<20 || g.NVLinkDomain != "nv0" || g.Model == "" {
		t.Errorf("node a's GPU 7: %+v", g)
	}
	if nodes[1].State != cluster.NodeDrained || nodes[2].State != cluster.NodeDrained {
		t.Errorf("a node not Ready and a cordoned one: states %s, %s; want drained", nodes[1].State, nodes[2].State)
	}
}

func TestNodeLabelErrorsNameTheNodeAndLabel(t *testing.T) {
	for label, value := range map[string]string{LabelGPUMemory: "80GB", LabelGPUCount: "-1"} {
		n := gpuNode("n1", 2, map[string]string{label: value})
		delete(n.Status.Allocatable, ResourceGPU) // the count label is read only without allocatable
		_, err := nodeFromKube(n)
		if err == nil || !strings.Contains(err.Error(), "n1") || !strings.Contains(err.Error(), label) {
			t.Errorf("%s=%s: error %v; want one naming n1 and the label", label, value, err)
		}
	}
}

func TestPodsAndWholeGangsAreSubmitted(t *testing.T) {
	single := gpuPod("ml", "solo", 2, map[string]string{LabelTier: "production", LabelTenant: "vision"})
	single.Annotations = map[string]string{AnnotationCheckpointable: "true"}
	e := newFakeEnv(t, gpuNode("a", 8, nil), single, gpuPod("ml", "g-0", 4, gang("g", 2)))
	e.watch()
	soloID, _ := jobOfPod(single, noJobs)
	eventually(t, "the single pod submitted", func() bool { _, ok := e.svc.request(soloID.ID); return ok })
	r, _ := e.svc.request(soloID.ID)
	if r.Spec.GPUs != 2 || r.Spec.Tier != cluster.TierProduction || r.Spec.Tenant != "vision" || !r.Spec.Checkpointable || r.Spec.GangSize != 0 {
		t.Errorf("single pod's spec %+v", r.Spec)
	}
	gangID := cluster.JobID("k8s:ml:gang=g")
	time.Sleep(50 * time.Millisecond)
	if _, ok := e.svc.request(gangID); ok {
		t.Fatal("a gang of 2 was submitted with 1 member")
	}
	e.create(gpuPod("ml", "g-1", 4, gang("g", 2)))
	eventually(t, "the gang submitted", func() bool { _, ok := e.svc.request(gangID); return ok })
	r, _ = e.svc.request(gangID)
	if r.Spec.GPUs != 8 || r.Spec.GangSize != 2 || r.Spec.Tenant != "ml" || r.Spec.Tier != cluster.DefaultTier {
		t.Errorf("gang spec %+v: want 8 GPUs in 2 members, tenant = namespace", r.Spec)
	}
}

func TestAGangIsBoundToThePlannedNodesOnce(t *testing.T) {
	e := newFakeEnv(t, gpuNode("a", 8, nil), gpuNode("b", 8, nil), gpuPod("ml", "g-0", 4, gang("g", 2)), gpuPod("ml", "g-1", 4, gang("g", 2)))
	e.watch()
	id := cluster.JobID("k8s:ml:gang=g")
	eventually(t, "the gang submitted", func() bool { _, ok := e.svc.request(id); return ok })
	a := assignment(id, 1, 8, []string{"b", "a"}, []int{4, 4})
	if err := e.backend.Start(e.ctx, a); err != nil {
		t.Fatal(err)
	}
	if ev := e.next(executor.JobStarted); ev.Job != id || ev.Attempt != 1 {
		t.Errorf("started event %+v", ev)
	}
	if p := e.pod("ml", "g-0"); p.Spec.NodeName != "b" || p.Annotations[AnnotationJob] != string(id) || p.Annotations[AnnotationAttempt] != "1" {
		t.Errorf("g-0 on %q with %v: want node b, annotated with job and attempt", p.Spec.NodeName, p.Annotations)
	}
	if p := e.pod("ml", "g-1"); p.Spec.NodeName != "a" {
		t.Errorf("g-1 on %q, want a", p.Spec.NodeName)
	}
	eventually(t, "the informer sees the binds", func() bool {
		e.backend.mu.Lock()
		defer e.backend.mu.Unlock()
		return e.backend.jobs[id].pods["g-1"].Spec.NodeName == "a"
	})
	if err := e.backend.Start(e.ctx, a); err != nil {
		t.Fatal(err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.binds) != 2 {
		t.Errorf("binds %v: the same attempt again bound again", e.binds)
	}
}

func TestAStartThatDoesNotSplitIntoPodsIsRefused(t *testing.T) {
	e := newFakeEnv(t, gpuNode("a", 8, nil), gpuNode("b", 8, nil), gpuPod("ml", "g-0", 4, gang("g", 2)), gpuPod("ml", "g-1", 4, gang("g", 2)))
	e.watch()
	id := cluster.JobID("k8s:ml:gang=g")
	eventually(t, "the gang submitted", func() bool { _, ok := e.svc.request(id); return ok })
	err := e.backend.Start(e.ctx, assignment(id, 1, 8, []string{"a", "b"}, []int{6, 2}))
	if !errors.Is(err, ErrInvalidAssignment) {
		t.Fatalf("6+2 GPUs for two pods of 4: %v, want ErrInvalidAssignment", err)
	}
	if err := e.backend.Start(e.ctx, assignment("k8s:ml:gang=nope", 1, 8, []string{"a"}, []int{8})); !errors.Is(err, ErrUnknownJob) {
		t.Fatalf("start of a job without pods: %v, want ErrUnknownJob", err)
	}
}

func TestAGangWhoseBindFailsMidwayIsUnboundAndLost(t *testing.T) {
	e := newFakeEnv(t, gpuNode("a", 8, nil), gpuNode("b", 8, nil), gpuPod("ml", "g-0", 4, gang("g", 2)), gpuPod("ml", "g-1", 4, gang("g", 2)))
	e.watch()
	id := cluster.JobID("k8s:ml:gang=g")
	eventually(t, "the gang submitted", func() bool { _, ok := e.svc.request(id); return ok })
	e.mu.Lock()
	e.failBind = "g-1"
	e.mu.Unlock()
	if err := e.backend.Start(e.ctx, assignment(id, 1, 8, []string{"a", "b"}, []int{4, 4})); err != nil {
		t.Fatal(err)
	}
	if ev := e.next(executor.JobLost); ev.Job != id || ev.Attempt != 1 || !strings.Contains(ev.Message, "g-1") {
		t.Errorf("lost event %+v", ev)
	}
	if _, err := e.client.CoreV1().Pods("ml").Get(e.ctx, "g-0", metav1.GetOptions{}); err == nil {
		t.Error("g-0 was bound and is still there: a half-bound gang")
	}
}

func TestCheckpointThenStopEvictsWithTheGrace(t *testing.T) {
	e := newFakeEnv(t, gpuNode("a", 8, nil), gpuPod("ml", "solo", 2, nil))
	e.watch()
	p := e.pod("ml", "solo")
	pj, _ := jobOfPod(p, noJobs)
	eventually(t, "submitted", func() bool { _, ok := e.svc.request(pj.ID); return ok })
	if err := e.backend.Start(e.ctx, assignment(pj.ID, 1, 2, []string{"a"}, []int{2})); err != nil {
		t.Fatal(err)
	}
	e.next(executor.JobStarted)
	if err := e.backend.Checkpoint(e.ctx, pj.ID); err != nil {
		t.Fatal(err)
	}
	req := e.pod("ml", "solo").Annotations[AnnotationCheckpointRequested]
	if _, err := time.Parse(time.RFC3339, req); err != nil {
		t.Fatalf("checkpoint request annotation %q: %v", req, err)
	}
	// The workload acknowledges.
	p = e.pod("ml", "solo")
	p.Annotations[AnnotationCheckpointedAt] = "2026-06-01T08:05:00Z"
	p.Annotations[AnnotationCheckpointStep] = "1200"
	p.Annotations[AnnotationCheckpointPath] = "/ckpt/1200"
	if _, err := e.client.CoreV1().Pods("ml").Update(e.ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	ev := e.next(executor.JobCheckpointed)
	if ev.Job != pj.ID || ev.Checkpoint == nil || ev.Checkpoint.Step != 1200 || ev.Checkpoint.Path != "/ckpt/1200" {
		t.Errorf("checkpointed event %+v", ev)
	}
	if err := e.backend.Stop(e.ctx, pj.ID, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	ev = e.next(executor.JobExited)
	if !ev.Stopped || ev.Job != pj.ID || ev.Attempt != 1 {
		t.Errorf("exit event %+v: want stopped", ev)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.evicted["solo"] != 30 {
		t.Errorf("evicted with grace %d s, want 30", e.evicted["solo"])
	}
}

func TestADeletedPodEndsItsJobAndIsCancelledWhenGone(t *testing.T) {
	e := newFakeEnv(t, gpuNode("a", 8, nil), gpuPod("ml", "solo", 2, nil), gpuPod("ml", "queued", 2, nil))
	e.watch()
	solo, _ := jobOfPod(e.pod("ml", "solo"), noJobs)
	queued, _ := jobOfPod(e.pod("ml", "queued"), noJobs)
	eventually(t, "submitted", func() bool { _, ok := e.svc.request(queued.ID); return ok })
	if err := e.backend.Start(e.ctx, assignment(solo.ID, 1, 2, []string{"a"}, []int{2})); err != nil {
		t.Fatal(err)
	}
	e.next(executor.JobStarted)
	eventually(t, "the bind seen", func() bool {
		e.backend.mu.Lock()
		defer e.backend.mu.Unlock()
		return e.backend.jobs[solo.ID].pods["solo"].Spec.NodeName == "a"
	})
	for _, n := range []string{"solo", "queued"} {
		if err := e.client.CoreV1().Pods("ml").Delete(e.ctx, n, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if ev := e.next(executor.JobExited); ev.Job != solo.ID || ev.Stopped || ev.ExitCode != -1 {
		t.Errorf("exit of a deleted pod %+v", ev)
	}
	eventually(t, "both jobs cancelled once their pods are gone", func() bool {
		e.svc.mu.Lock()
		defer e.svc.mu.Unlock()
		return len(e.svc.cancelled) == 2
	})
}

func TestARestartReportsWhatIsBoundAndBindsNothingTwice(t *testing.T) {
	id := cluster.JobID("k8s:ml:gang=g")
	bound := func(name, node string) *corev1.Pod {
		p := gpuPod("ml", name, 4, gang("g", 2))
		p.Spec.NodeName = node
		p.Annotations = map[string]string{AnnotationJob: string(id), AnnotationAttempt: "3"}
		return p
	}
	e := newFakeEnv(t, gpuNode("a", 8, nil), gpuNode("b", 8, nil), bound("g-0", "a"), bound("g-1", "b"))
	e.watch()
	synced := map[string][]executor.RunningAttempt{}
	for range 2 {
		ev := e.next(executor.NodeSynced)
		synced[ev.Node] = ev.Running
	}
	want := []executor.RunningAttempt{{Job: id, Attempt: 3}}
	if !slices.Equal(synced["a"], want) || !slices.Equal(synced["b"], want) {
		t.Errorf("synced %v, want attempt 3 on a and b", synced)
	}
	// The control plane resends the start it recorded: nothing is bound.
	if err := e.backend.Start(e.ctx, assignment(id, 3, 8, []string{"a", "b"}, []int{4, 4})); err != nil {
		t.Fatal(err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.binds) != 0 {
		t.Errorf("binds %v after a restart", e.binds)
	}
}

func TestRecommendationsAreWrittenOnThePods(t *testing.T) {
	e := newFakeEnv(t, gpuNode("a", 8, nil), gpuPod("ml", "solo", 2, nil))
	e.watch()
	pj, _ := jobOfPod(e.pod("ml", "solo"), noJobs)
	eventually(t, "submitted", func() bool { _, ok := e.svc.request(pj.ID); return ok })
	e.backend.Recommended(e.ctx, service.Recommendation{ID: 7, Job: pj.ID, Kind: "start", Reason: "fits on a",
		Details: map[string]any{"placement": []any{"a/gpu0", "a/gpu1"}}})
	eventually(t, "annotation written", func() bool {
		return e.pod("ml", "solo").Annotations[AnnotationRecommendation] != ""
	})
	var note recommendationNote
	if err := json.Unmarshal([]byte(e.pod("ml", "solo").Annotations[AnnotationRecommendation]), &note); err != nil {
		t.Fatal(err)
	}
	if note.ID != 7 || note.Kind != "start" || note.Reason != "fits on a" {
		t.Errorf("annotation %+v", note)
	}
	eventually(t, "an Event recorded", func() bool {
		evs, err := e.client.CoreV1().Events("ml").List(e.ctx, metav1.ListOptions{})
		return err == nil && len(evs.Items) == 1 && evs.Items[0].Reason == "PrescientRecommendation" &&
			strings.Contains(evs.Items[0].Message, "a/gpu1") && evs.Items[0].InvolvedObject.Name == "solo"
	})
	if p := e.pod("ml", "solo"); p.Spec.NodeName != "" {
		t.Error("the advisor bound a pod")
	}
}

func TestInvalidPodsGetAWarningEventAndNoJob(t *testing.T) {
	bad := gpuPod("ml", "bad", 2, map[string]string{LabelTier: "urgent"})
	e := newFakeEnv(t, gpuNode("a", 8, nil), bad)
	e.watch()
	eventually(t, "a warning Event", func() bool {
		evs, err := e.client.CoreV1().Events("ml").List(e.ctx, metav1.ListOptions{})
		return err == nil && len(evs.Items) > 0 && evs.Items[0].Type == corev1.EventTypeWarning &&
			strings.Contains(evs.Items[0].Message, LabelTier)
	})
	e.svc.mu.Lock()
	defer e.svc.mu.Unlock()
	if len(e.svc.submitted) != 0 {
		t.Errorf("submitted %v", e.svc.submitted)
	}
}

func TestWatchNeedsAService(t *testing.T) {
	b, err := New(Config{Client: newFakeEnv(t).client})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Watch(t.Context()); !errors.Is(err, ErrNoService) {
		t.Fatalf("Watch without a service: %v", err)
	}
	if _, err := New(Config{}); err == nil {
		t.Fatal("New without a client: no error")
	}
}

func TestOtherSchedulersPodsTakeTheirGPUsOffTheirNode(t *testing.T) {
	other := func(name, node string, gpus int, phase corev1.PodPhase) *corev1.Pod {
		p := gpuPod("infra", name, gpus, nil)
		p.Spec.SchedulerName, p.Spec.NodeName, p.Status.Phase = "default-scheduler", node, phase
		p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"),
			corev1.ResourceMemory: resource.MustParse("16Gi")}
		return p
	}
	e := newFakeEnv(t, gpuNode("a", 8, nil), gpuNode("b", 4, nil),
		other("inference", "a", 3, corev1.PodRunning),
		other("done", "a", 2, corev1.PodSucceeded), // finished: holds nothing
		other("pending", "", 1, corev1.PodPending), // not bound: holds nothing
		other("greedy", "b", 6, corev1.PodRunning)) // more than the node has: none left, not fewer than none
	e.watch()
	gpus := func() map[string]int {
		out := map[string]int{}
		for _, n := range e.backend.Nodes() {
			out[n.Name] = len(n.GPUs)
		}
		return out
	}
	if got := gpus(); got["a"] != 5 || got["b"] != 0 {
		t.Fatalf("GPUs per node %v; want a: 5 (3 of 8 held by another scheduler's pod), b: 0", got)
	}
	if a := e.backend.Nodes()[0]; a.CPUMilli != 60000 || a.MemoryBytes != 496<<30 {
		t.Errorf("node a: %d CPU milli, %d memory bytes; want the other pod's 4 CPUs and 16Gi taken off", a.CPUMilli, a.MemoryBytes)
	}
	if err := e.client.CoreV1().Pods("infra").Delete(context.Background(), "inference", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "node a's GPUs free once the other pod is gone", func() bool { return gpus()["a"] == 8 })
}

// A role without a right the informers need fails Watch at once, naming
// the resource and the role to mend, instead of an informer retrying
// unseen while Watch waits.
func TestWatchNamesTheRightTheRoleLacks(t *testing.T) {
	e := newFakeEnv(t, gpuNode("a", 8, nil))
	e.client.PrependReactor("list", "namespaces", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "namespaces"}, "", errors.New("no rule"))
	})
	_, err := e.backend.Watch(e.ctx)
	if err == nil || !strings.Contains(err.Error(), "list namespaces") || !strings.Contains(err.Error(), "rbac.yaml") {
		t.Fatalf("Watch: %v, want the namespaces right named", err)
	}
}
