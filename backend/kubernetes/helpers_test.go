package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/service"
)

// gpuNode is a Ready node with n allocatable GPUs of GPU feature
// discovery's labels.
func gpuNode(name string, n int, labels map[string]string) *corev1.Node {
	l := map[string]string{LabelGPUProduct: "NVIDIA-H100-80GB-HBM3", LabelGPUCount: fmt.Sprint(n), LabelGPUMemory: "81559"}
	for k, v := range labels {
		l[k] = v
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{ResourceGPU: *resource.NewQuantity(int64(n), resource.DecimalSI),
				corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("512Gi")},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
}

// gpuPod is a pod of Prescient's scheduler that asks gpus GPUs.
func gpuPod(ns, name string, gpus int, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name + "-0000"), Labels: labels},
		Spec: corev1.PodSpec{SchedulerName: SchedulerName, Containers: []corev1.Container{{Name: "main", Image: "train",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{ResourceGPU: *resource.NewQuantity(int64(gpus), resource.DecimalSI)}}}}}}
}

func gang(name string, size int) map[string]string {
	return map[string]string{LabelGang: name, LabelGangSize: fmt.Sprint(size)}
}

// fakeService records submissions and cancellations.
type fakeService struct {
	mu        sync.Mutex
	submitted map[cluster.JobID]service.SubmitRequest
	cancelled []cluster.JobID
}

func newFakeService() *fakeService {
	return &fakeService{submitted: map[cluster.JobID]service.SubmitRequest{}}
}

func (s *fakeService) Submit(_ context.Context, r service.SubmitRequest) (service.JobStatus, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.submitted[r.ID] = r
	return service.JobStatus{ID: r.ID, State: cluster.StateQueued}, nil
}

func (s *fakeService) Cancel(_ context.Context, id cluster.JobID) (service.JobStatus, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cancelled = append(s.cancelled, id)
	return service.JobStatus{ID: id, State: cluster.StateCancelled}, nil
}

func (s *fakeService) request(id cluster.JobID) (service.SubmitRequest, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.submitted[id]
	return r, ok
}

// fakeEnv is a backend over client-go's fake clientset. The fake does not
// act on subresources, so reactors do what the API server does: a binding
// sets the pod's node, an eviction deletes the pod. failBind, when set,
// fails the bind of that pod.
type fakeEnv struct {
	t       *testing.T
	ctx     context.Context
	client  *fake.Clientset
	svc     *fakeService
	backend *Backend
	events  <-chan executor.JobEvent

	mu       sync.Mutex
	failBind string
	binds    []string // "pod→node"
	evicted  map[string]int64
}

func newFakeEnv(t *testing.T, objs ...runtime.Object) *fakeEnv {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	e := &fakeEnv{t: t, ctx: ctx, client: fake.NewClientset(objs...), svc: newFakeService(), evicted: map[string]int64{}}
	e.client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ca := a.(k8stesting.CreateAction)
		switch a.GetSubresource() {
		case "binding":
			b := ca.GetObject().(*corev1.Binding)
			e.mu.Lock()
			fail := e.failBind == b.Name
			e.binds = append(e.binds, b.Name+"→"+b.Target.Name)
			e.mu.Unlock()
			if fail {
				return true, nil, errors.New("injected bind failure")
			}
			p, err := e.client.Tracker().Get(corev1.SchemeGroupVersion.WithResource("pods"), b.Namespace, b.Name)
			if err != nil {
				return true, nil, err
			}
			pod := p.(*corev1.Pod).DeepCopy()
			pod.Spec.NodeName = b.Target.Name
			return true, nil, e.client.Tracker().Update(corev1.SchemeGroupVersion.WithResource("pods"), pod, b.Namespace)
		case "eviction":
			ev := ca.GetObject().(*policyv1.Eviction)
			e.mu.Lock()
			e.evicted[ev.Name] = *ev.DeleteOptions.GracePeriodSeconds
			e.mu.Unlock()
			return true, nil, e.client.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("pods"), ev.Namespace, ev.Name)
		}
		return false, nil, nil
	})
	b, err := New(Config{Client: e.client, GoneAfter: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	b.SetService(e.svc)
	e.backend = b
	return e
}

func (e *fakeEnv) watch() {
	e.t.Helper()
	ch, err := e.backend.Watch(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	e.events = ch
}

// next returns the next event of the given type, skipping others.
func (e *fakeEnv) next(typ executor.JobEventType) executor.JobEvent {
	e.t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case ev := <-e.events:
			if ev.Type == typ {
				return ev
			}
		case <-deadline:
			e.t.Fatalf("no %s event within 5s", typ)
		}
	}
}

// eventually polls cond until it holds or 5s pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("%s: not within 5s", what)
}

func (e *fakeEnv) pod(ns, name string) *corev1.Pod {
	e.t.Helper()
	p, err := e.client.CoreV1().Pods(ns).Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

func (e *fakeEnv) create(p *corev1.Pod) {
	e.t.Helper()
	if _, err := e.client.CoreV1().Pods(p.Namespace).Create(e.ctx, p, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// assignment puts the job's GPUs on the nodes, perNode[i] GPUs on node i.
func assignment(id cluster.JobID, attempt, gpus int, nodes []string, perNode []int) executor.Assignment {
	a := executor.Assignment{Job: cluster.Job{ID: id, Spec: cluster.JobSpec{GPUs: gpus, GPUMilli: cluster.MilliGPU}}, Attempt: attempt}
	for i, n := range nodes {
		for g := 0; g < perNode[i]; g++ {
			a.Allocations = append(a.Allocations, cluster.Allocation{Job: id, GPU: cluster.GPURef{Node: n, Index: g}, Milli: cluster.MilliGPU})
		}
	}
	return a
}

// noJobs knows no batch Job.
func noJobs(string, string) *batchv1.Job { return nil }
