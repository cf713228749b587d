package kubernetes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"

	"github.com/prescient-sched/prescient/agent/protocol"
	"github.com/prescient-sched/prescient/collector"
)

// Environment a pod's workload container sets so that the node agent can
// relay checkpoint requests to it (DESIGN.md section 6): the
// acknowledgement file, and optionally the checkpoint signal.
const (
	EnvCheckpointAck    = "PRESCIENT_CHECKPOINT_ACK"
	EnvCheckpointSignal = "PRESCIENT_CHECKPOINT_SIGNAL"
)

// PodProcess is one process of a pod as the node sees it.
type PodProcess struct {
	PID int
	// Env is the process's environment.
	Env map[string]string
	// Root is where the process's file system is seen from the node
	// (/proc/PID/root): the container's paths are under it.
	Root string
}

// PodProcesses finds the processes of a pod on this node.
type PodProcesses interface {
	Of(podUID types.UID) ([]PodProcess, error)
}

// ProcPodProcesses finds a pod's processes in /proc by the pod UID in
// their cgroup (as the kubelet's cgroup drivers name it). Reading other
// containers' environments and roots needs the agent's privileges
// (hostPID, CAP_SYS_PTRACE).
type ProcPodProcesses struct {
	// Root is the proc file system; default /proc.
	Root string
}

// Of implements PodProcesses.
func (p ProcPodProcesses) Of(uid types.UID) ([]PodProcess, error) {
	root := p.Root
	if root == "" {
		root = "/proc"
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("processes of pod %s: %w", uid, err)
	}
	want := "pod:" + string(uid)
	var out []PodProcess
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		dir := filepath.Join(root, e.Name())
		cg, err := os.ReadFile(filepath.Join(dir, "cgroup"))
		if err != nil {
			continue // gone, or not ours to read
		}
		if id, ok := collector.ParseCgroup(cg); !ok || id != want {
			continue
		}
		environ, err := os.ReadFile(filepath.Join(dir, "environ"))
		if err != nil {
			continue
		}
		out = append(out, PodProcess{PID: pid, Env: parseEnviron(environ), Root: filepath.Join(dir, "root")})
	}
	return out, nil
}

func parseEnviron(b []byte) map[string]string {
	env := map[string]string{}
	for kv := range bytes.SplitSeq(b, []byte{0}) {
		if k, v, ok := bytes.Cut(kv, []byte{'='}); ok && len(k) > 0 {
			env[string(k)] = string(v)
		}
	}
	return env
}

// NodeAgentConfig configures a NodeAgent.
type NodeAgentConfig struct {
	Client kubernetes.Interface
	// Node is the node the agent runs on; it watches the pods bound there.
	Node string
	// Processes finds a pod's processes; default ProcPodProcesses on
	// ProcRoot.
	Processes PodProcesses
	// ProcRoot is the proc file system (default /proc), read to name each
	// process's job (JobOfPID) and, by default, to find pods' processes.
	ProcRoot string
	// AckTimeout bounds the wait for a workload's acknowledgement after
	// the signal (default 10 min); the control plane stops the pod after
	// its grace period anyway.
	AckTimeout time.Duration
	// Poll is how often the acknowledgement file is read (default 250 ms).
	Poll   time.Duration
	Logger *slog.Logger
	Clock  func() time.Time
}

// NodeAgent is the node side of the Kubernetes backend, run by the
// DaemonSet on each GPU node (`prescient agent --kubernetes`). Kubelets run
// the pods; the agent relays Prescient's checkpoint requests to them: when
// a pod of Prescient's scheduler on its node gets a new
// prescient.io/checkpoint-requested, it sends the checkpoint signal
// (SIGUSR1, or the container's PRESCIENT_CHECKPOINT_SIGNAL) to the pod's
// processes that set PRESCIENT_CHECKPOINT_ACK, waits for that file to change
// (the workload protocol's acknowledgement: step and path), and writes
// prescient.io/checkpointed-at, -step and -path on the pod, which the
// control plane takes as the checkpoint. It also names the job of each pod
// process for the collector (JobOfPID), from the pod's prescient.io/job.
type NodeAgent struct {
	cfg NodeAgentConfig
	log *slog.Logger

	mu      sync.Mutex
	relayed map[types.UID]string  // the checkpoint request last relayed, per pod
	jobs    map[types.UID]string  // the job of each pod, from its annotation
	procs   collector.JobRegistry // the PID → job or pod fallback
	wg      sync.WaitGroup
	synced  chan struct{}
	stats   NodeAgentStats
}

// NodeAgentStats count the agent's relays.
type NodeAgentStats struct {
	Acknowledged int `json:"checkpoints_acknowledged"` // requests answered with the workload's acknowledgement
	Failed       int `json:"checkpoints_not_relayed"`  // requests no process could take, or not acknowledged in time
}

// Stats returns the counts so far.
func (a *NodeAgent) Stats() NodeAgentStats {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.stats
}

var _ collector.JobRegistry = (*NodeAgent)(nil)

// NewNodeAgent makes an agent; nothing is watched before Run.
func NewNodeAgent(cfg NodeAgentConfig) (*NodeAgent, error) {
	switch {
	case cfg.Client == nil:
		return nil, errors.New("kubernetes node agent: Client is required")
	case cfg.Node == "":
		return nil, errors.New("kubernetes node agent: Node is required")
	case cfg.AckTimeout < 0 || cfg.Poll < 0:
		return nil, errors.New("kubernetes node agent: AckTimeout and Poll must not be negative")
	}
	if cfg.Processes == nil {
		cfg.Processes = ProcPodProcesses{Root: cfg.ProcRoot}
	}
	if cfg.AckTimeout == 0 {
		cfg.AckTimeout = 10 * time.Minute
	}
	if cfg.Poll == 0 {
		cfg.Poll = 250 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	return &NodeAgent{cfg: cfg, log: cfg.Logger.With("component", "kubernetes-agent", "node", cfg.Node),
		relayed: map[types.UID]string{}, jobs: map[types.UID]string{}, procs: collector.ProcJobs{Root: cfg.ProcRoot},
		synced: make(chan struct{})}, nil
}

// Synced is closed once the agent has listed its node's pods.
func (a *NodeAgent) Synced() <-chan struct{} { return a.synced }

// Run watches the node's pods and relays checkpoint requests until ctx
// ends; relays in flight are waited for.
func (a *NodeAgent) Run(ctx context.Context) error {
	factory := informers.NewSharedInformerFactoryWithOptions(a.cfg.Client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.AndSelectors(
				fields.OneTermEqualSelector("spec.nodeName", a.cfg.Node),
				fields.OneTermEqualSelector("spec.schedulerName", SchedulerName),
			).String()
		}))
	if err := startInformer(ctx, factory, factory.Core().V1().Pods().Informer(), func(o any) { a.podChanged(ctx, o) },
		a.podDeleted, "pods of node "+a.cfg.Node); err != nil {
		factory.Shutdown()
		return fmt.Errorf("kubernetes node agent: %w", err)
	}
	close(a.synced)
	a.log.Info("watching the node's pods for checkpoint requests")
	<-ctx.Done()
	factory.Shutdown()
	a.wg.Wait()
	return nil
}

// JobOfPID implements collector.JobRegistry: a process of a pod Prescient
// bound is its job's; another process is named as collector.ProcJobs names
// it (PRESCIENT_JOB_ID, or "pod:UID").
func (a *NodeAgent) JobOfPID(pid int) (string, bool) {
	id, ok := a.procs.JobOfPID(pid)
	if !ok {
		return "", false
	}
	if uid, isPod := strings.CutPrefix(id, "pod:"); isPod {
		a.mu.Lock()
		job, known := a.jobs[types.UID(uid)]
		a.mu.Unlock()
		if known {
			return job, true
		}
	}
	return id, true
}

func (a *NodeAgent) podDeleted(o any) {
	p, ok := o.(*corev1.Pod)
	if !ok {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.jobs, p.UID)
	delete(a.relayed, p.UID)
}

// podChanged notes the pod's job and starts a relay for a checkpoint
// request that is new and not yet acknowledged.
func (a *NodeAgent) podChanged(ctx context.Context, o any) {
	p, ok := o.(*corev1.Pod)
	if !ok || p.Spec.NodeName != a.cfg.Node || p.Spec.SchedulerName != SchedulerName {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if job := p.Annotations[AnnotationJob]; job != "" {
		a.jobs[p.UID] = job
	}
	req := p.Annotations[AnnotationCheckpointRequested]
	if req == "" || a.relayed[p.UID] == req || p.DeletionTimestamp != nil {
		return
	}
	reqAt, err := time.Parse(time.RFC3339Nano, req)
	if err != nil {
		a.relayed[p.UID] = req
		a.log.Warn("checkpoint request ignored", "pod", p.Namespace+"/"+p.Name,
			"error", fmt.Errorf("annotation %s=%q: want an RFC 3339 time: %w", AnnotationCheckpointRequested, req, err))
		return
	}
	if ack, err := time.Parse(time.RFC3339Nano, p.Annotations[AnnotationCheckpointedAt]); err == nil && !ack.Before(reqAt) {
		a.relayed[p.UID] = req // answered already (by the workload itself, or before a restart)
		return
	}
	a.relayed[p.UID] = req
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		err := a.relay(ctx, p.DeepCopy())
		a.mu.Lock()
		if err != nil {
			a.stats.Failed++
		}
		a.mu.Unlock()
		if err != nil {
			a.log.Warn("checkpoint request not relayed", "pod", p.Namespace+"/"+p.Name, "error", err)
			a.event(ctx, p, corev1.EventTypeWarning, "PrescientCheckpointNotRelayed", err.Error())
		}
	}()
}

// relay signals the pod's workload processes and writes their
// acknowledgement on the pod.
func (a *NodeAgent) relay(ctx context.Context, p *corev1.Pod) error {
	procs, err := a.cfg.Processes.Of(p.UID)
	if err != nil {
		return err
	}
	type target struct {
		proc PodProcess
		ack  string // the acknowledgement file, seen from the node
		old  []byte
	}
	var targets []target
	for _, pr := range procs {
		path := pr.Env[EnvCheckpointAck]
		if path == "" {
			continue
		}
		if !filepath.IsAbs(path) {
			return fmt.Errorf("process %d: %s=%q: want an absolute path", pr.PID, EnvCheckpointAck, path)
		}
		t := target{proc: pr, ack: filepath.Join(pr.Root, path)}
		t.old, _ = readLimited(t.ack)
		targets = append(targets, t)
	}
	if len(targets) == 0 {
		return fmt.Errorf("no process of the pod (of %d found) sets %s: the workload cannot be asked to checkpoint", len(procs), EnvCheckpointAck)
	}
	for _, t := range targets {
		sig, err := protocol.ParseSignal(t.proc.Env[EnvCheckpointSignal])
		if err != nil {
			return fmt.Errorf("process %d: %s: %w", t.proc.PID, EnvCheckpointSignal, err)
		}
		if err := syscall.Kill(t.proc.PID, sig); err != nil {
			return fmt.Errorf("process %d: send %s: %w", t.proc.PID, sig, err)
		}
	}
	a.log.Info("checkpoint requested of the pod's workload", "pod", p.Namespace+"/"+p.Name, "processes", len(targets))

	// The first acknowledgement that changes answers the request.
	timeout := time.NewTimer(a.cfg.AckTimeout)
	defer timeout.Stop()
	tick := time.NewTicker(a.cfg.Poll)
	defer tick.Stop()
	for {
		for _, t := range targets {
			b, err := readLimited(t.ack)
			if err != nil || bytes.Equal(b, t.old) {
				continue
			}
			ack, err := protocol.ParseAck(b)
			if err != nil {
				continue // being written by a workload that does not write atomically
			}
			return a.acknowledge(ctx, p, ack)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-timeout.C:
			return fmt.Errorf("no acknowledgement in %s after the checkpoint signal", a.cfg.AckTimeout)
		case <-tick.C:
		}
	}
}

// acknowledge writes the checkpoint on the pod.
func (a *NodeAgent) acknowledge(ctx context.Context, p *corev1.Pod, ack protocol.Ack) error {
	patch, err := annotationPatch(map[string]string{
		AnnotationCheckpointedAt: a.cfg.Clock().UTC().Format(time.RFC3339Nano),
		AnnotationCheckpointStep: strconv.FormatInt(ack.Step, 10),
		AnnotationCheckpointPath: ack.Path,
	})
	if err != nil {
		return err
	}
	if _, err := a.cfg.Client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("write the acknowledgement (step %d) on the pod: %w", ack.Step, err)
	}
	a.mu.Lock()
	a.stats.Acknowledged++
	a.mu.Unlock()
	a.log.Info("checkpoint acknowledged", "pod", p.Namespace+"/"+p.Name, "step", ack.Step, "path", ack.Path)
	return nil
}

func (a *NodeAgent) event(ctx context.Context, p *corev1.Pod, typ, reason, msg string) {
	recordEvent(ctx, a.cfg.Client, p, corev1.EventSource{Component: "prescient-agent", Host: a.cfg.Node},
		a.cfg.Clock(), typ, reason, msg, a.log)
}

// readLimited reads a small file (an acknowledgement) whole.
func readLimited(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, 64<<10))
}
