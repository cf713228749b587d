package kubernetes

import (
	"context"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/prescient-sched/prescient/agent/protocol"
)

// The helper process stands in for a pod's workload: on SIGUSR1 it writes
// the acknowledgement (step 42) to PRESCIENT_CHECKPOINT_ACK, then waits to
// be killed.
const helperEnv = "PRESCIENT_TEST_HELPER_WORKLOAD"

func TestHelperWorkload(t *testing.T) {
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

// startHelper runs the helper workload, its acknowledgement file at
// root+ackPath, and waits until it listens for the signal.
func startHelper(t *testing.T, root, ackPath string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperWorkload$")
	cmd.Env = append(os.Environ(), helperEnv+"="+filepath.Join(root, ackPath))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	buf := make([]byte, 6)
	if _, err := out.Read(buf); err != nil || string(buf) != "ready\n" {
		t.Fatalf("helper workload did not start: %q, %v", buf, err)
	}
	return cmd
}

// stubProcesses maps pod UIDs to processes.
type stubProcesses map[types.UID][]PodProcess

func (s stubProcesses) Of(uid types.UID) ([]PodProcess, error) { return s[uid], nil }

func boundPod(name, node string, ann map[string]string) *corev1.Pod {
	p := gpuPod("ml", name, 4, nil)
	p.UID = types.UID("0f0e0d0c-0b0a-4908-8706-05040302010" + name[len(name)-1:])
	p.Spec.NodeName, p.Annotations = node, ann
	return p
}

func runNodeAgent(t *testing.T, cfg NodeAgentConfig) *NodeAgent {
	t.Helper()
	a, err := NewNodeAgent(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	select {
	case <-a.Synced():
	case err := <-done:
		t.Fatalf("Run: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("the node agent did not list its pods")
	}
	return a
}

func TestTheNodeAgentRelaysACheckpointRequestToTheWorkload(t *testing.T) {
	root := t.TempDir() // the container's file system, seen from the node
	if err := os.MkdirAll(filepath.Join(root, "ckpt"), 0o755); err != nil {
		t.Fatal(err)
	}
	helper := startHelper(t, root, "/ckpt/ack")
	requested := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC).Format(time.RFC3339Nano)
	pod := boundPod("train-1", "a", map[string]string{AnnotationJob: "k8s:ml:pod=train-1:0f0e0d0c", AnnotationCheckpointRequested: requested})
	// A pod on another node with a request: not this agent's.
	other := boundPod("train-2", "b", map[string]string{AnnotationCheckpointRequested: requested})
	client := fake.NewClientset(pod, other)
	procs := stubProcesses{pod.UID: {
		{PID: os.Getpid(), Env: map[string]string{"HOME": "/root"}, Root: root}, // the pod's sidecar: not signalled
		{PID: helper.Process.Pid, Env: map[string]string{EnvCheckpointAck: "/ckpt/ack"}, Root: root},
	}}
	now := time.Date(2026, 12, 3, 12, 0, 5, 0, time.UTC)
	runNodeAgent(t, NodeAgentConfig{Client: client, Node: "a", Processes: procs, Poll: 5 * time.Millisecond,
		Clock: func() time.Time { return now }})
	var got *corev1.Pod
	eventually(t, "the acknowledgement on the pod", func() bool {
		p, err := client.CoreV1().Pods("ml").Get(context.Background(), "train-1", metav1.GetOptions{})
		got = p
		return err == nil && p.Annotations[AnnotationCheckpointedAt] != ""
	})
	if a := got.Annotations; a[AnnotationCheckpointedAt] != now.Format(time.RFC3339Nano) || a[AnnotationCheckpointStep] != "42" ||
		a[AnnotationCheckpointPath] != "/ckpt/step-42" {
		t.Errorf("annotations %v: want checkpointed-at %s, step 42, path /ckpt/step-42", a, now.Format(time.RFC3339Nano))
	}
	if p, _ := client.CoreV1().Pods("ml").Get(context.Background(), "train-2", metav1.GetOptions{}); p.Annotations[AnnotationCheckpointedAt] != "" {
		t.Errorf("the pod of node b was answered by node a's agent: %v", p.Annotations)
	}
}

func TestTheNodeAgentSaysWhenNoProcessCanCheckpoint(t *testing.T) {
	pod := boundPod("train-1", "a", map[string]string{AnnotationCheckpointRequested: time.Now().UTC().Format(time.RFC3339)})
	client := fake.NewClientset(pod)
	procs := stubProcesses{pod.UID: {{PID: 1, Env: map[string]string{}, Root: "/"}}}
	runNodeAgent(t, NodeAgentConfig{Client: client, Node: "a", Processes: procs})
	eventually(t, "a warning Event on the pod", func() bool {
		evs, err := client.CoreV1().Events("ml").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, ev := range evs.Items {
			if ev.Reason == "PrescientCheckpointNotRelayed" && ev.Type == corev1.EventTypeWarning &&
				strings.Contains(ev.Message, EnvCheckpointAck) {
				return true
			}
		}
		return false
	})
}

func TestProcessesOfAPodAreFoundByTheirCgroup(t *testing.T) {
	proc := t.TempDir()
	write := func(pid, cgroup, environ string) {
		dir := filepath.Join(proc, pid)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, content := range map[string]string{"cgroup": cgroup, "environ": environ} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	const uid = "5a1b2c3d-4e5f-4061-8273-948596a7b8c9"
	// The systemd driver writes the UID with underscores, cgroupfs with dashes.
	write("120", "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod5a1b2c3d_4e5f_4061_8273_948596a7b8c9.slice/cri-containerd-1.scope\n",
		"PATH=/bin\x00PRESCIENT_CHECKPOINT_ACK=/ckpt/ack\x00")
	write("121", "0::/kubepods/besteffort/pod5a1b2c3d-4e5f-4061-8273-948596a7b8c9/abc\n", "HOME=/\x00")
	write("300", "0::/kubepods/besteffort/pod11111111-2222-4333-8444-555555555555/def\n", "PRESCIENT_CHECKPOINT_ACK=/x\x00")
	write("self", "0::/\n", "")
	got, err := ProcPodProcesses{Root: proc}.Of(uid)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].PID != 120 || got[1].PID != 121 || got[0].Env[EnvCheckpointAck] != "/ckpt/ack" ||
		got[0].Root != filepath.Join(proc, "120", "root") {
		t.Fatalf("processes of pod %s: %+v; want 120 (with its ack path) and 121", uid, got)
	}

	// The collector names a pod's process by the pod's job.
	pod := boundPod("train-1", "a", map[string]string{AnnotationJob: "k8s:ml:pod=train-1:5a1b2c3d"})
	pod.UID = uid
	a := runNodeAgent(t, NodeAgentConfig{Client: fake.NewClientset(pod), Node: "a", ProcRoot: proc})
	if job, ok := a.JobOfPID(120); !ok || job != "k8s:ml:pod=train-1:5a1b2c3d" {
		t.Errorf("JobOfPID(120) = %q, %v; want the pod's job", job, ok)
	}
	if job, ok := a.JobOfPID(300); !ok || job != "pod:11111111-2222-4333-8444-555555555555" {
		t.Errorf("JobOfPID(300) = %q, %v; want the pod it belongs to (not Prescient's)", job, ok)
	}
}
