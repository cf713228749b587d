package kubernetes

import (
	"context"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/prescient-sched/prescient/agent/protocol"
	kubebackend "github.com/prescient-sched/prescient/backend/kubernetes"
	"github.com/prescient-sched/prescient/service"
)

// agentServiceAccount is the node agent's user: agent.yaml's ServiceAccount.
const agentServiceAccount = "system:serviceaccount:prescient:prescient-agent"

// helperEnv makes this test binary the workload of a pod: on SIGUSR1 it
// writes the acknowledgement (step 42) to the file the variable names,
// then runs until killed.
const helperEnv = "PRESCIENT_TEST_POD_WORKLOAD_ACK"

func TestHelperPodWorkload(t *testing.T) {
	if os.Getenv(helperEnv) == "" {
		return
	}
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	os.Stdout.WriteString("ready\n")
	<-usr1
	if err := protocol.WriteAck(os.Getenv(helperEnv), protocol.Ack{Step: 42, Path: "/ckpt/step-42"}); err != nil {
		os.Exit(3)
	}
	time.Sleep(time.Minute)
	os.Exit(0)
}

// podProcesses maps pods to processes, standing in for /proc (the test has
// no kubelet to put processes in a pod's cgroup).
type podProcesses map[types.UID][]kubebackend.PodProcess

func (p podProcesses) Of(uid types.UID) ([]kubebackend.PodProcess, error) { return p[uid], nil }

func TestTheNodeAgentRelaysTheCheckpointAndThenThePodIsEvicted(t *testing.T) {
	c := newTestCluster(t)
	c.addNode("a", 4, "r1")
	c.startPrescient(tempDB(t), service.ModeAutopilot)
	c.createPod("batch", podOpts{gpus: 4, tier: "batch", checkpointable: true})
	c.bound("batch")

	// The batch pod's workload, a real process, with its file system at root.
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "ckpt"), 0o755); err != nil {
		t.Fatal(err)
	}
	w := exec.Command(os.Args[0], "-test.run=^TestHelperPodWorkload$")
	w.Env = append(os.Environ(), helperEnv+"="+filepath.Join(root, "ckpt", "ack"))
	out, err := w.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Process.Kill(); _ = w.Wait() })
	if buf := make([]byte, 6); func() bool { _, err := out.Read(buf); return err != nil || string(buf) != "ready\n" }() {
		t.Fatal("the workload did not start")
	}

	// The node agent of node a, under agent.yaml's ServiceAccount.
	a, err := kubebackend.NewNodeAgent(kubebackend.NodeAgentConfig{Client: c.clientOf(agentServiceAccount, "a", true), Node: "a",
		Processes: podProcesses{c.pod("batch").UID: {{PID: w.Process.Pid, Env: map[string]string{kubebackend.EnvCheckpointAck: "/ckpt/ack"}, Root: root}}},
		Poll:      10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(c.ctx)
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-a.Synced():
	case err := <-done:
		t.Fatalf("the node agent ended: %v", err)
	}

	// A production pod needs the GPUs: Prescient asks batch to checkpoint,
	// the agent signals its workload and writes the acknowledgement, and
	// only then is batch evicted.
	c.createPod("urgent", podOpts{gpus: 4, tier: "production"})
	eventually(t, "the batch pod evicted after its checkpoint", func() bool { return c.pod("batch").DeletionTimestamp != nil })
	ann := c.pod("batch").Annotations
	if ann[kubebackend.AnnotationCheckpointRequested] == "" || ann[kubebackend.AnnotationCheckpointedAt] == "" ||
		ann[kubebackend.AnnotationCheckpointStep] != "42" || ann[kubebackend.AnnotationCheckpointPath] != "/ckpt/step-42" {
		t.Fatalf("batch's annotations %v: want the request and the workload's acknowledgement (step 42)", ann)
	}
	if st := a.Stats(); st.Acknowledged != 1 || st.Failed != 0 {
		t.Errorf("agent stats %+v, want one acknowledged", st)
	}
}

// podsOnTwoNodes is a test cluster with nodes a and b and a pod of
// Prescient's scheduler bound to each, on-a and on-b.
func podsOnTwoNodes(t *testing.T) *testCluster {
	t.Helper()
	c := newTestCluster(t)
	c.addNode("a", 8, "r1")
	c.addNode("b", 8, "r1")
	for _, n := range []string{"a", "b"} {
		c.createPod("on-"+n, podOpts{gpus: 1})
		binding := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "on-" + n, Namespace: "ml"},
			Target: corev1.ObjectReference{Kind: "Node", Name: n}}
		if err := c.admin.CoreV1().Pods("ml").Bind(c.ctx, binding, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// acknowledge writes a checkpoint acknowledgement on pod ml/pod as client,
// as a node agent does.
func (c *testCluster) acknowledge(client kubernetes.Interface, pod string) error {
	ack := []byte(`{"metadata":{"annotations":{"prescient.io/checkpointed-at":"2026-12-04T06:00:00Z"}}}`)
	_, err := client.CoreV1().Pods("ml").Patch(c.ctx, pod, types.MergePatchType, ack, metav1.PatchOptions{})
	return err
}

// The node agent's RBAC lets it patch every pod; the admission policy of
// rbac.yaml narrows that to the pods of its own node.
func TestTheNodeAgentChangesOnlyItsOwnNodesPods(t *testing.T) {
	c := podsOnTwoNodes(t)
	patch := c.acknowledge
	ofB := c.clientOf(agentServiceAccount, "b", false)
	// The policy takes effect once the API server has loaded it.
	eventually(t, "the agent of b refused a pod of a", func() bool { return apierrors.IsForbidden(patch(ofB, "on-a")) })
	if err := patch(ofB, "on-b"); err != nil {
		t.Errorf("the agent of b patching its own node's pod: %v", err)
	}
	if err := patch(c.clientOf(agentServiceAccount, "", false), "on-b"); !apierrors.IsForbidden(err) {
		t.Errorf("an agent token bound to no node: %v; want 403", err)
	}
	if err := patch(c.sched, "on-a"); err != nil {
		t.Errorf("the scheduler, which the policy does not match: %v", err)
	}
}

// With a real token: the API server mints the agent's token bound to its
// DaemonSet pod (TokenRequest), and the node name it carries is what the
// admission policy checks, with no impersonation.
func TestTheNodeAgentsPodBoundTokenKeepsItToItsNode(t *testing.T) {
	c := podsOnTwoNodes(t)
	// The agent's pod on node b, as its DaemonSet would make it.
	agentPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "prescient-agent-b", Namespace: "prescient"},
		Spec: corev1.PodSpec{NodeName: "b", ServiceAccountName: "prescient-agent",
			Containers: []corev1.Container{{Name: "agent", Image: "example/prescient:1"}}}}
	agentPod, err := c.admin.CoreV1().Pods("prescient").Create(c.ctx, agentPod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := c.admin.CoreV1().ServiceAccounts("prescient").CreateToken(c.ctx, "prescient-agent", &authv1.TokenRequest{
		Spec: authv1.TokenRequestSpec{BoundObjectRef: &authv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1",
			Name: agentPod.Name, UID: agentPod.UID}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token request: %v", err)
	}
	cfg := rest.AnonymousClientConfig(c.adminCfg)
	cfg.BearerToken = tr.Status.Token
	agent, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	patch := func(pod string) error { return c.acknowledge(agent, pod) }
	eventually(t, "the agent of b refused a pod of a", func() bool { return apierrors.IsForbidden(patch("on-a")) })
	if err := patch("on-b"); err != nil {
		t.Errorf("the agent of b patching its own node's pod with its pod-bound token: %v", err)
	}
	if _, err := agent.CoreV1().Pods("ml").List(c.ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("the agent's token lists pods (its RBAC): %v", err)
	}
}
