package kubernetes

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// leaseClient is a fake clientset whose Lease updates check the
// resourceVersion as the API server does (the fake alone does not, and
// two electors would then both win).
func leaseClient() *fake.Clientset {
	client := fake.NewClientset()
	var mu sync.Mutex
	gvr := coordv1.SchemeGroupVersion.WithResource("leases")
	client.PrependReactor("*", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		switch a.GetVerb() {
		case "create":
			l := a.(k8stesting.CreateAction).GetObject().(*coordv1.Lease).DeepCopy()
			l.ResourceVersion = "1"
			if err := client.Tracker().Create(gvr, l, l.Namespace); err != nil {
				return true, nil, err
			}
			return true, l, nil
		case "update":
			l := a.(k8stesting.UpdateAction).GetObject().(*coordv1.Lease).DeepCopy()
			cur, err := client.Tracker().Get(gvr, l.Namespace, l.Name)
			if err != nil {
				return true, nil, err
			}
			rv := cur.(*coordv1.Lease).ResourceVersion
			if l.ResourceVersion != rv {
				return true, nil, apierrors.NewConflict(gvr.GroupResource(), l.Name, errors.New("the object has been modified"))
			}
			n, _ := strconv.Atoi(rv)
			l.ResourceVersion = strconv.Itoa(n + 1)
			return true, l, client.Tracker().Update(gvr, l, l.Namespace)
		}
		return false, nil, nil
	})
	return client
}

func TestOnlyOneReplicaLeadsAndTheOtherTakesOver(t *testing.T) {
	client := leaseClient()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	election := func(id string) Election {
		return Election{Client: client, Namespace: "prescient", Name: "prescient", Identity: id,
			LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 100 * time.Millisecond}
	}
	leading := make(chan string, 2)
	stop := map[string]chan struct{}{"a": make(chan struct{}), "b": make(chan struct{})}
	results := make(chan error, 2)
	for _, id := range []string{"a", "b"} {
		go func() {
			results <- RunElected(ctx, election(id), func(ctx context.Context) error {
				leading <- id
				select {
				case <-stop[id]:
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			})
		}()
	}
	var first string
	select {
	case first = <-leading:
	case <-time.After(10 * time.Second):
		t.Fatal("nobody leads")
	}
	select {
	case id := <-leading:
		t.Fatalf("%s leads while %s does", id, first)
	case <-time.After(3 * time.Second): // longer than the lease
	}
	lease, err := client.CoordinationV1().Leases("prescient").Get(ctx, "prescient", metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != first {
		t.Fatalf("lease %+v (%v): want held by %s", lease, err, first)
	}
	close(stop[first]) // the leader's work ends: it gives the lease up
	if err := <-results; err != nil {
		t.Fatalf("the first leader returned %v, want nil", err)
	}
	select {
	case second := <-leading:
		if second == first {
			t.Fatalf("%s leads again", second)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the other replica did not take over")
	}
	cancel()
	if err := <-results; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("the second leader returned %v after ctx ended", err)
	}
}

func TestElectionNeedsItsFields(t *testing.T) {
	if err := RunElected(t.Context(), Election{}, func(context.Context) error { return nil }); err == nil {
		t.Fatal("no error without a client and lease")
	}
}

func TestMarkLeaderSetsAndRemovesTheLabel(t *testing.T) {
	ctx := context.Background()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "prescient", Name: "prescient-0", Labels: map[string]string{"app": "p"}}}
	client := fake.NewClientset(pod)
	label := func() (string, bool) {
		p, err := client.CoreV1().Pods("prescient").Get(ctx, "prescient-0", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		v, ok := p.Labels[LabelLeader]
		return v, ok
	}
	if err := MarkLeader(ctx, client, "prescient", "prescient-0", true); err != nil {
		t.Fatal(err)
	}
	if v, _ := label(); v != "true" {
		t.Fatalf("label %q after marking the leader", v)
	}
	if err := MarkLeader(ctx, client, "prescient", "prescient-0", false); err != nil {
		t.Fatal(err)
	}
	if _, ok := label(); ok {
		t.Fatal("label still there after unmarking")
	}
	if err := MarkLeader(ctx, client, "prescient", "gone", true); err == nil || !strings.Contains(err.Error(), "prescient/gone") {
		t.Errorf("a missing pod: %v; want an error naming it", err)
	}
}
