package kubernetes

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	authv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	kubebackend "github.com/prescient-sched/prescient/backend/kubernetes"
	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/control"
	manifests "github.com/prescient-sched/prescient/deploy/kubernetes"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/executor/policies"
	"github.com/prescient-sched/prescient/service"
	"github.com/prescient-sched/prescient/store"
	"github.com/prescient-sched/prescient/test/kubernetes/internal/apiserver"
)

// serviceAccount is the user the scheduler runs as: deploy/kubernetes's
// ServiceAccount, whose rights are those rbac.yaml grants.
const serviceAccount = "system:serviceaccount:prescient:prescient"

// testCluster is an API server with deploy/kubernetes's RBAC applied, a
// namespace "ml" for the workloads, and a client that acts as the
// scheduler's ServiceAccount with a token the API server minted for it, and
// fails the test on any 403.
type testCluster struct {
	t      *testing.T
	ctx    context.Context
	admin  kubernetes.Interface
	sched  kubernetes.Interface
	denied *deniedLog
	// adminCfg is the admin's client configuration (clientAs impersonates
	// from it).
	adminCfg *rest.Config
}

// deniedLog records the requests the API server refused with 403.
type deniedLog struct {
	mu   sync.Mutex
	reqs []string
}

type recordForbidden struct {
	next http.RoundTripper
	log  *deniedLog
}

func (r recordForbidden) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	if err == nil && resp.StatusCode == http.StatusForbidden {
		r.log.mu.Lock()
		r.log.reqs = append(r.log.reqs, req.Method+" "+req.URL.Path)
		r.log.mu.Unlock()
	}
	return resp, err
}

func newTestCluster(t *testing.T) *testCluster {
	t.Helper()
	s := apiserver.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c := &testCluster{t: t, ctx: ctx, admin: s.Client, denied: &deniedLog{}, adminCfg: s.Admin}
	var applied []runtime.Object
	for _, name := range []string{"base/namespace.yaml", "base/rbac.yaml"} {
		objs, err := manifests.Objects(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			c.apply(o)
		}
		applied = append(applied, objs...)
	}
	c.waitForRBAC(applied)
	c.createNamespace("ml")
	cfg := rest.CopyConfig(s.Admin)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: serviceAccount}
	// The impersonation holds: the ServiceAccount may not read secrets.
	plain, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plain.CoreV1().Secrets("prescient").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("the scheduler's ServiceAccount listed secrets: %v, want 403", err)
	}
	c.sched = c.clientWithToken("prescient", "prescient")
	t.Cleanup(func() {
		c.denied.mu.Lock()
		defer c.denied.mu.Unlock()
		if len(c.denied.reqs) > 0 {
			t.Errorf("the API server refused a ServiceAccount of deploy/kubernetes (403): %v", c.denied.reqs)
		}
	})
	return c
}

// waitForRBAC waits until the API server's authorizer grants every rule
// of the roles in objs to the subjects bound to them. The authorizer reads
// roles and bindings through informers, so a request made right after they
// were created may still be refused (403), which the strict clients would
// count as deploy/kubernetes's RBAC refusing the scheduler.
func (c *testCluster) waitForRBAC(objs []runtime.Object) {
	c.t.Helper()
	type roleKey struct{ kind, ns, name string }
	rules := map[roleKey][]rbacv1.PolicyRule{}
	for _, o := range objs {
		switch o := o.(type) {
		case *rbacv1.ClusterRole:
			rules[roleKey{"ClusterRole", "", o.Name}] = o.Rules
		case *rbacv1.Role:
			rules[roleKey{"Role", o.Namespace, o.Name}] = o.Rules
		}
	}
	var reviews []authzv1.SubjectAccessReviewSpec
	bind := func(ns string, ref rbacv1.RoleRef, subjects []rbacv1.Subject) {
		roleNS := ""
		if ref.Kind == "Role" {
			roleNS = ns
		}
		for _, s := range subjects {
			if s.Kind != rbacv1.ServiceAccountKind {
				continue
			}
			for _, r := range rules[roleKey{ref.Kind, roleNS, ref.Name}] {
				if len(r.Resources) == 0 || len(r.Verbs) == 0 || len(r.APIGroups) == 0 {
					continue
				}
				res, sub, _ := strings.Cut(r.Resources[0], "/")
				reviews = append(reviews, authzv1.SubjectAccessReviewSpec{
					User: "system:serviceaccount:" + s.Namespace + ":" + s.Name,
					ResourceAttributes: &authzv1.ResourceAttributes{Namespace: ns, Verb: r.Verbs[0],
						Group: r.APIGroups[0], Resource: res, Subresource: sub}})
			}
		}
	}
	for _, o := range objs {
		switch o := o.(type) {
		case *rbacv1.ClusterRoleBinding:
			bind("", o.RoleRef, o.Subjects)
		case *rbacv1.RoleBinding:
			bind(o.Namespace, o.RoleRef, o.Subjects)
		}
	}
	if len(reviews) == 0 {
		c.t.Fatal("deploy/kubernetes's manifests bind no rules to a ServiceAccount")
	}
	for _, spec := range reviews {
		eventually(c.t, fmt.Sprintf("RBAC grants %s %s %s", spec.User, spec.ResourceAttributes.Verb, spec.ResourceAttributes.Resource), func() bool {
			r, err := c.admin.AuthorizationV1().SubjectAccessReviews().Create(c.ctx,
				&authzv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
			return err == nil && r.Status.Allowed
		})
	}
}

// clientAs is a client that acts as user (impersonated); any 403 it gets
// fails the test.
func (c *testCluster) clientAs(user string) kubernetes.Interface { return c.clientOf(user, "", true) }

// clientWithToken is a client that authenticates as the ServiceAccount
// ns/name with a token the API server mints for it (TokenRequest), as a
// pod of the ServiceAccount would; any 403 it gets fails the test.
func (c *testCluster) clientWithToken(ns, name string) kubernetes.Interface {
	c.t.Helper()
	tr, err := c.admin.CoreV1().ServiceAccounts(ns).CreateToken(c.ctx, name, &authv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatalf("token for %s/%s: %v", ns, name, err)
	}
	cfg := rest.AnonymousClientConfig(c.adminCfg)
	cfg.BearerToken = tr.Status.Token
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return recordForbidden{next: rt, log: c.denied} }
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	return client
}

// nodeNameExtra is what the API server adds to the user of a token bound to
// a pod: the pod's node.
const nodeNameExtra = "authentication.kubernetes.io/node-name"

// clientOf is a client that acts as user, with the node of its pod when
// node is set (as a token bound to a pod on that node carries it); with
// strict, any 403 it gets fails the test.
func (c *testCluster) clientOf(user, node string, strict bool) kubernetes.Interface {
	c.t.Helper()
	cfg := rest.CopyConfig(c.adminCfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	if node != "" {
		cfg.Impersonate.Extra = map[string][]string{nodeNameExtra: {node}}
	}
	if strict {
		cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return recordForbidden{next: rt, log: c.denied} }
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	return client
}

// apply creates one object of rbac.yaml or namespace.yaml as the admin.
func (c *testCluster) apply(o any) {
	c.t.Helper()
	var err error
	switch o := o.(type) {
	case *corev1.Namespace:
		_, err = c.admin.CoreV1().Namespaces().Create(c.ctx, o, metav1.CreateOptions{})
	case *corev1.ServiceAccount:
		_, err = c.admin.CoreV1().ServiceAccounts(o.Namespace).Create(c.ctx, o, metav1.CreateOptions{})
	case *rbacv1.ClusterRole:
		_, err = c.admin.RbacV1().ClusterRoles().Create(c.ctx, o, metav1.CreateOptions{})
	case *rbacv1.ClusterRoleBinding:
		_, err = c.admin.RbacV1().ClusterRoleBindings().Create(c.ctx, o, metav1.CreateOptions{})
	case *rbacv1.Role:
		_, err = c.admin.RbacV1().Roles(o.Namespace).Create(c.ctx, o, metav1.CreateOptions{})
	case *rbacv1.RoleBinding:
		_, err = c.admin.RbacV1().RoleBindings(o.Namespace).Create(c.ctx, o, metav1.CreateOptions{})
	case *admissionv1.ValidatingAdmissionPolicy:
		_, err = c.admin.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(c.ctx, o, metav1.CreateOptions{})
	case *admissionv1.ValidatingAdmissionPolicyBinding:
		_, err = c.admin.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(c.ctx, o, metav1.CreateOptions{})
	default:
		c.t.Fatalf("apply: %T not handled", o)
	}
	if err != nil {
		c.t.Fatalf("apply %T: %v", o, err)
	}
}

// createNamespace makes a namespace with its default ServiceAccount (no
// controller manager runs to make it).
func (c *testCluster) createNamespace(ns string) {
	c.t.Helper()
	if _, err := c.admin.CoreV1().Namespaces().Create(c.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		c.t.Fatal(err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns}}
	if _, err := c.admin.CoreV1().ServiceAccounts(ns).Create(c.ctx, sa, metav1.CreateOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

// addNode creates a Ready node with gpus H100s, as GPU feature discovery
// and the device plugin would label and report it.
func (c *testCluster) addNode(name string, gpus int, rack string) {
	c.t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		kubebackend.LabelGPUProduct: "NVIDIA-H100-80GB-HBM3", kubebackend.LabelGPUCount: fmt.Sprint(gpus),
		kubebackend.LabelGPUMemory: "81559", kubebackend.LabelRack: rack, kubebackend.LabelNVLinkDomain: name}}}
	n, err := c.admin.CoreV1().Nodes().Create(c.ctx, n, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	n.Status = corev1.NodeStatus{
		Capacity: corev1.ResourceList{kubebackend.ResourceGPU: *resource.NewQuantity(int64(gpus), resource.DecimalSI),
			corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("512Gi"), corev1.ResourcePods: resource.MustParse("110")},
		Allocatable: corev1.ResourceList{kubebackend.ResourceGPU: *resource.NewQuantity(int64(gpus), resource.DecimalSI),
			corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("512Gi"), corev1.ResourcePods: resource.MustParse("110")},
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}},
	}
	n, err = c.admin.CoreV1().Nodes().UpdateStatus(c.ctx, n, metav1.UpdateOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	c.liftNotReady(n)
}

// liftNotReady removes the not-ready taint the API server's admission puts
// on a new node, as the node lifecycle controller (which this test server
// does not run) does once the node reports Ready.
func (c *testCluster) liftNotReady(n *corev1.Node) {
	c.t.Helper()
	n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeNotReady })
	if _, err := c.admin.CoreV1().Nodes().Update(c.ctx, n, metav1.UpdateOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

// podOpts shape a workload pod.
type podOpts struct {
	gpus           int
	tier           string
	gang           string
	gangSize       int
	checkpointable bool
}

// createPod creates a pod of Prescient's scheduler in namespace ml.
func (c *testCluster) createPod(name string, o podOpts) *corev1.Pod {
	c.t.Helper()
	return c.createPodWith(name, o, nil)
}

// createPodWith is createPod with mod changing the pod first.
func (c *testCluster) createPodWith(name string, o podOpts, mod func(*corev1.Pod)) *corev1.Pod {
	c.t.Helper()
	labels := map[string]string{kubebackend.LabelTenant: "ml"}
	if o.tier != "" {
		labels[kubebackend.LabelTier] = o.tier
	}
	if o.gang != "" {
		labels[kubebackend.LabelGang], labels[kubebackend.LabelGangSize] = o.gang, fmt.Sprint(o.gangSize)
	}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ml", Labels: labels,
		Annotations: map[string]string{kubebackend.AnnotationCheckpointable: fmt.Sprint(o.checkpointable)}},
		Spec: corev1.PodSpec{SchedulerName: kubebackend.SchedulerName, Containers: []corev1.Container{{Name: "train", Image: "example/train:1",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{kubebackend.ResourceGPU: *resource.NewQuantity(int64(o.gpus), resource.DecimalSI)}}}}}}
	if mod != nil {
		mod(p)
	}
	p, err := c.admin.CoreV1().Pods("ml").Create(c.ctx, p, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	return p
}

func (c *testCluster) pod(name string) *corev1.Pod {
	c.t.Helper()
	p, err := c.admin.CoreV1().Pods("ml").Get(c.ctx, name, metav1.GetOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	return p
}

// eventually polls cond for up to 30s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("%s: not within 30s", what)
}

// tenHours forecasts every job at ten hours (P90 twelve).
type tenHours struct{}

func (tenHours) Forecast(_ context.Context, jobs []*cluster.Job) ([]executor.Forecast, error) {
	out := make([]executor.Forecast, len(jobs))
	for i, j := range jobs {
		out[i] = executor.Forecast{Job: j.ID, DurationP50: 10 * time.Hour, DurationP90: 12 * time.Hour, Source: "test"}
	}
	return out, nil
}

// prescient is one run of the control plane with the Kubernetes backend,
// under the leader election, as `prescient serve --backend kubernetes
// --leader-elect` runs it.
type prescient struct {
	plane   *control.Plane
	backend *kubebackend.Backend
	store   *store.Store
	cancel  context.CancelFunc
	done    chan error
}

func (c *testCluster) startPrescient(dbPath string, mode service.Mode) *prescient {
	c.t.Helper()
	return c.startPrescientWith(dbPath, mode, nil)
}

// startPrescientWith is startPrescient with mod changing the plane's
// configuration (its store opened) first.
func (c *testCluster) startPrescientWith(dbPath string, mode service.Mode, mod func(*control.Config)) *prescient {
	c.t.Helper()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	st, err := store.Open(c.ctx, dbPath)
	if err != nil {
		c.t.Fatal(err)
	}
	b, err := kubebackend.New(kubebackend.Config{Client: c.sched, GoneAfter: time.Second, Logger: log})
	if err != nil {
		c.t.Fatal(err)
	}
	cfg := control.Config{Store: st, Nodes: b, Backend: b, Forecaster: tenHours{}, Mode: mode, Tick: 200 * time.Millisecond,
		Debounce: 20 * time.Millisecond, Logger: log, PolicyOptions: policies.Options{PreemptMinRun: time.Millisecond}}
	if mode == service.ModeAdvisor {
		cfg.Recommendations = b
	}
	if mod != nil {
		mod(&cfg)
	}
	plane, err := control.New(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	b.SetService(plane)
	ctx, cancel := context.WithCancel(c.ctx)
	p := &prescient{plane: plane, backend: b, store: st, cancel: cancel, done: make(chan error, 1)}
	go func() {
		p.done <- kubebackend.RunElected(ctx, kubebackend.Election{Client: c.sched, Namespace: "prescient", Name: "prescient",
			Identity: fmt.Sprintf("test-%d", time.Now().UnixNano()), LeaseDuration: 2 * time.Second, RenewDeadline: time.Second,
			RetryPeriod: 200 * time.Millisecond, Logger: log}, plane.Run)
	}()
	c.t.Cleanup(p.stop)
	select {
	case <-plane.Ready():
	case err := <-p.done:
		c.t.Fatalf("prescient ended before it was ready: %v", err)
	case <-time.After(30 * time.Second):
		c.t.Fatal("prescient not ready within 30s")
	}
	return p
}

// fleetNode is a node as p's GET /v1/fleet shows it; the zero NodeState
// when it is not there.
func (c *testCluster) fleetNode(p *prescient, name string) service.NodeState {
	c.t.Helper()
	fs, err := p.plane.Fleet(c.ctx)
	if err != nil {
		c.t.Fatal(err)
	}
	for _, n := range fs.Nodes {
		if n.Name == name {
			return n
		}
	}
	return service.NodeState{}
}

// stop ends the control plane (giving the Lease up) and closes its store.
func (p *prescient) stop() {
	if p.cancel == nil {
		return
	}
	p.cancel()
	p.cancel = nil
	<-p.done
	_ = p.store.Close()
}

// jobOf is the job of the pod (or gang) named by the k8s_pod (k8s_gang)
// label the backend gives it.
func (c *testCluster) jobOf(p *prescient, key, name string) service.JobStatus {
	c.t.Helper()
	var st service.JobStatus
	eventually(c.t, "job of "+key+"="+name, func() bool {
		jobs, err := p.plane.Jobs(c.ctx, service.JobQuery{Labels: map[string]string{key: name}})
		if err != nil || len(jobs) != 1 {
			return false
		}
		st = jobs[0]
		return true
	})
	return st
}

// placementNodes counts the GPUs of a placement ("node/gpuN") per node.
func placementNodes(placement []string) map[string]int {
	out := map[string]int{}
	for _, g := range placement {
		node, _, _ := strings.Cut(g, "/")
		out[node]++
	}
	return out
}

// tempDB is a store path in the test's temporary directory.
func tempDB(t *testing.T) string { return filepath.Join(t.TempDir(), "prescient.db") }
