package kubernetes

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
)

func TestAJobsLogIsReadFromItsPodsOnEachNode(t *testing.T) {
	e := newFakeEnv(t, gpuNode("a", 8, nil), gpuNode("b", 8, nil), gpuPod("ml", "g-0", 4, gang("g", 2)), gpuPod("ml", "g-1", 4, gang("g", 2)))
	e.client.PrependReactor("get", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "log" {
			return false, nil, nil
		}
		if a.(k8stesting.GenericAction).GetValue() == nil {
			return true, nil, errors.New("no log options")
		}
		return true, &runtime.Unknown{Raw: []byte("step 1\nstep 2\nstep 3\n")}, nil
	})
	e.watch()
	id := cluster.JobID("k8s:ml:gang=g")
	eventually(t, "the gang submitted", func() bool { _, ok := e.svc.request(id); return ok })
	if err := e.backend.Start(e.ctx, assignment(id, 1, 8, []string{"b", "a"}, []int{4, 4})); err != nil {
		t.Fatal(err)
	}
	e.next(executor.JobStarted)
	eventually(t, "the informer sees the binds", func() bool {
		e.backend.mu.Lock()
		defer e.backend.mu.Unlock()
		return e.backend.jobs[id].pods["g-0"].Spec.NodeName == "b" && e.backend.jobs[id].pods["g-1"].Spec.NodeName == "a"
	})

	got := e.backend.JobLog(e.ctx, id, 1, []string{"a", "b", "c"}, 1<<16)
	if got[0].Node != "a" || got[0].Text != "step 1\nstep 2\nstep 3\n" || got[0].Unavailable != "" || got[1].Text == "" {
		t.Errorf("logs on a and b: %+v", got[:2])
	}
	if got[2].Text != "" || !strings.Contains(got[2].Unavailable, "node c") {
		t.Errorf("log on a node without its pods: %+v", got[2])
	}
	tail := e.backend.JobLog(e.ctx, id, 1, []string{"a"}, 10)[0]
	if !tail.Truncated || tail.Text != "step 3\n" {
		t.Errorf("a tail of 10 bytes: %+v, want the last whole line", tail)
	}
	if other := e.backend.JobLog(e.ctx, id, 2, []string{"a"}, 100)[0]; other.Unavailable == "" {
		t.Errorf("the log of an attempt the pods do not run: %+v", other)
	}
}
