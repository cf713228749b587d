package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/prescient-sched/prescient/backend"
	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/service"
)

// Errors of the backend's methods, for errors.Is.
var (
	// ErrUnknownJob: Start, Checkpoint or Stop of a job no pod belongs to.
	ErrUnknownJob = errors.New("no pod of the job")
	// ErrInvalidAssignment: an assignment the pods cannot take (members
	// missing, GPUs that do not split into whole pods per node).
	ErrInvalidAssignment = errors.New("invalid assignment")
	// ErrNoService: Watch before SetService.
	ErrNoService = errors.New("no control plane attached (SetService)")
)

// Service is what the backend asks of the control plane: it submits the
// pods' jobs and cancels those whose pods are gone. control.Plane is one.
type Service interface {
	Submit(ctx context.Context, req service.SubmitRequest) (service.JobStatus, error)
	Cancel(ctx context.Context, id cluster.JobID) (service.JobStatus, error)
}

// Config configures a Backend.
type Config struct {
	Client kubernetes.Interface
	// Namespace limits the pods watched; "" watches every namespace.
	Namespace string
	// GoneAfter is how long a job may have no pod before it is cancelled
	// (a gang's controller may recreate members meanwhile); default 30s.
	GoneAfter time.Duration
	// Resync is the informers' resync period; 0 for none.
	Resync time.Duration
	Logger *slog.Logger
	Clock  func() time.Time
}

// Backend is the Kubernetes executor.Backend and service.NodeSource. Bind
// it to the control plane with SetService before the plane runs.
type Backend struct {
	cfg Config
	log *slog.Logger

	mu    sync.Mutex
	svc   Service
	nodes map[string]cluster.Node // by the planner's name: Kubernetes nodes and their MIG instances
	// migNodes names, for a Kubernetes node, the nodes of its MIG instances.
	migNodes map[string][]string
	badNode  map[string]string // node → the error last logged about it
	jobs     map[cluster.JobID]*kubeJob
	byPod    map[types.NamespacedName]cluster.JobID
	events   *backend.Events
	watched  bool
	recs     chan service.Recommendation
	// foreign are the bound, unfinished pods of other schedulers that hold
	// GPUs, CPU or memory: what they hold is taken off their node in Nodes.
	foreign map[types.NamespacedName]foreignPod
	// foreignOn counts, by node, the foreign pods that are not a
	// DaemonSet's or static (work that parking would power down);
	// cordoned are the nodes that bear AnnotationParked.
	foreignOn map[string]int
	cordoned  map[string]bool
	// ownMIG are Prescient's bound, unfinished pods on MIG instances: their
	// host CPU and memory are taken off their node in Nodes.
	ownMIG map[types.NamespacedName]foreignPod
	// batchJobs are the batch Jobs seen; parked, by Job, the pods that
	// wait for their owning Job to be seen; failedJobs the Jobs whose
	// failure cancelled their Prescient jobs.
	initial    int // events queued when Watch returned (InitialEvents)
	batchJobs  map[types.NamespacedName]*batchv1.Job
	parked     map[types.NamespacedName]map[string]*corev1.Pod
	failedJobs map[types.UID]bool
	// gone are the UIDs of pods deleted in the last goneMemory: a stale
	// copy of one (a pod that waited for its Job) is not filed again.
	gone map[types.UID]time.Time
}

// goneMemory is how long a deleted pod's UID is remembered.
const goneMemory = 10 * time.Minute

// foreignPod is what a pod of another scheduler holds on its node.
type foreignPod struct {
	node     string
	gpus     int64
	cpuMilli int64
	memBytes int64
	mig      string // the node of its MIG instances, if it holds some
	migCount int64
	daemon   bool // a service of its node (nodeService): on every node, parked with it
}

// kubeJob is one job and its pods.
type kubeJob struct {
	pj        podJob
	pods      map[string]*corev1.Pod // by name; terminating ones included
	submitted string                 // the spec error last reported, or "ok"
	attempt   int                    // the attempt bound; 0 before the first
	started   bool                   // started reported for attempt
	ended     bool                   // exited or lost reported for attempt
	stopping  bool
	ack       string    // the checkpointed-at value last reported
	empty     time.Time // when its last pod went; zero while it has pods
	cancelled bool
}

var (
	_ executor.Backend           = (*Backend)(nil)
	_ executor.InitialSyncer     = (*Backend)(nil)
	_ executor.Waiter            = (*Backend)(nil)
	_ service.NodeSource         = (*Backend)(nil)
	_ service.RecommendationSink = (*Backend)(nil)
	_ service.Cordoner           = (*Backend)(nil)
)

// New makes a backend; nothing is watched before Watch.
func New(cfg Config) (*Backend, error) {
	if cfg.Client == nil {
		return nil, errors.New("kubernetes backend: Client is required")
	}
	if cfg.GoneAfter < 0 || cfg.Resync < 0 {
		return nil, errors.New("kubernetes backend: GoneAfter and Resync must not be negative")
	}
	if cfg.GoneAfter == 0 {
		cfg.GoneAfter = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	log := cfg.Logger.With("component", "kubernetes")
	return &Backend{cfg: cfg, log: log, events: backend.NewEvents("kubernetes backend", 0, log), nodes: map[string]cluster.Node{},
		migNodes: map[string][]string{}, badNode: map[string]string{}, jobs: map[cluster.JobID]*kubeJob{}, byPod: map[types.NamespacedName]cluster.JobID{},
		foreign: map[types.NamespacedName]foreignPod{}, foreignOn: map[string]int{}, cordoned: map[string]bool{}, ownMIG: map[types.NamespacedName]foreignPod{},
		batchJobs: map[types.NamespacedName]*batchv1.Job{}, parked: map[types.NamespacedName]map[string]*corev1.Pod{},
		failedJobs: map[types.UID]bool{}, gone: map[types.UID]time.Time{},
		recs: make(chan service.Recommendation, 1024)}, nil
}

// SetService attaches the control plane the pods' jobs are submitted to.
func (b *Backend) SetService(s Service) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.svc = s
}

// Nodes implements service.NodeSource: the nodes the informer last saw,
// by name, less what other schedulers' pods hold there. Those pods' GPUs
// come off the top of the node's GPU list (the device plugin, not the
// scheduler, picks a pod's GPUs: Prescient's indices are bookkeeping), and
// their CPU and memory requests off the node's allocatable.
func (b *Backend) Nodes() []cluster.Node {
	b.mu.Lock()
	defer b.mu.Unlock()
	held := map[string]foreignPod{}
	for _, f := range b.foreign {
		h := held[f.node]
		h.gpus += f.gpus
		h.cpuMilli += f.cpuMilli
		h.memBytes += f.memBytes
		held[f.node] = h
		if f.mig != "" {
			h := held[f.mig]
			h.gpus += f.migCount
			held[f.mig] = h
		}
	}
	// The host CPU and memory of Prescient's own pods on MIG instances are
	// taken off their Kubernetes node: the planner books them on the node
	// of the instances, which tracks none.
	for _, f := range b.ownMIG {
		h := held[f.node]
		h.cpuMilli += f.cpuMilli
		h.memBytes += f.memBytes
		held[f.node] = h
	}
	out := make([]cluster.Node, 0, len(b.nodes))
	for name, n := range b.nodes {
		if h, ok := held[name]; ok {
			n.GPUs = n.GPUs[:len(n.GPUs)-int(min(h.gpus, int64(len(n.GPUs))))]
			n.CPUMilli = max(n.CPUMilli-h.cpuMilli, 0)
			n.MemoryBytes = max(n.MemoryBytes-h.memBytes, 0)
		}
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b cluster.Node) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Watch starts the informers (nodes, batch Jobs, its scheduler's pods,
// other schedulers' pods, in that order), reports a NodeSynced for every
// node once the pods are listed (what runs where is what the API server
// says), and streams the events until ctx ends.
func (b *Backend) Watch(ctx context.Context) (<-chan executor.JobEvent, error) {
	b.mu.Lock()
	if b.watched {
		b.mu.Unlock()
		return nil, errors.New("kubernetes backend: Watch called twice")
	}
	if b.svc == nil {
		b.mu.Unlock()
		return nil, fmt.Errorf("kubernetes backend: %w", ErrNoService)
	}
	b.watched = true
	b.mu.Unlock()

	nodeFactory := informers.NewSharedInformerFactory(b.cfg.Client, b.cfg.Resync)
	if err := startInformer(ctx, nodeFactory, nodeFactory.Core().V1().Nodes().Informer(), b.nodeChanged, b.nodeDeleted, "nodes"); err != nil {
		return nil, fmt.Errorf("kubernetes backend: %w", err)
	}
	// The batch Jobs that own pods, before the pods: a Job's pod waits
	// for its Job (see jobOfPod).
	jobFactory := informers.NewSharedInformerFactoryWithOptions(b.cfg.Client, b.cfg.Resync, informers.WithNamespace(b.cfg.Namespace))
	if err := startInformer(ctx, jobFactory, jobFactory.Batch().V1().Jobs().Informer(),
		func(o any) { b.batchJobChanged(ctx, o) }, func(o any) { b.batchJobDeleted(ctx, o) }, "Jobs"); err != nil {
		return nil, fmt.Errorf("kubernetes backend: %w", err)
	}
	podFactory := informers.NewSharedInformerFactoryWithOptions(b.cfg.Client, b.cfg.Resync,
		informers.WithNamespace(b.cfg.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.schedulerName", SchedulerName).String()
		}))
	if err := startInformer(ctx, podFactory, podFactory.Core().V1().Pods().Informer(),
		func(o any) { b.podChanged(ctx, o) }, func(o any) { b.podDeleted(ctx, o) }, "pods"); err != nil {
		return nil, fmt.Errorf("kubernetes backend: %w", err)
	}
	// Other schedulers' pods, in every namespace: bound and not finished.
	otherFactory := informers.NewSharedInformerFactoryWithOptions(b.cfg.Client, b.cfg.Resync,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.AndSelectors(
				fields.OneTermNotEqualSelector("spec.schedulerName", SchedulerName),
				fields.OneTermNotEqualSelector("spec.nodeName", ""),
				fields.OneTermNotEqualSelector("status.phase", string(corev1.PodSucceeded)),
				fields.OneTermNotEqualSelector("status.phase", string(corev1.PodFailed)),
			).String()
		}))
	if err := startInformer(ctx, otherFactory, otherFactory.Core().V1().Pods().Informer(), b.foreignChanged, b.foreignDeleted,
		"other schedulers' pods"); err != nil {
		return nil, fmt.Errorf("kubernetes backend: %w", err)
	}
	b.syncNodes()
	b.mu.Lock()
	b.initial = b.events.Queued()
	b.mu.Unlock()

	out, err := b.events.Watch(ctx)
	if err != nil {
		return nil, fmt.Errorf("kubernetes backend: %w", err)
	}
	go b.sweep(ctx)
	go b.annotate(ctx)
	return out, nil
}

// startInformer has changed hear each object the informer adds or
// updates and deleted each it deletes (the last state seen, when the
// deletion itself was missed), starts factory and waits until the
// handlers have seen the initial list, not only the cache. what names the
// objects in errors.
func startInformer(ctx context.Context, factory informers.SharedInformerFactory, inf cache.SharedIndexInformer,
	changed, deleted func(o any), what string) error {
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    changed,
		UpdateFunc: func(_, o any) { changed(o) },
		DeleteFunc: func(o any) {
			if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			deleted(o)
		},
	})
	if err != nil {
		return fmt.Errorf("informer of %s: %w", what, err)
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		return fmt.Errorf("%s not listed: %w", what, context.Cause(ctx))
	}
	return nil
}

// syncNodes reports, for every node, the attempts bound there: the pods
// Prescient bound carry their job and attempt in annotations.
func (b *Backend) syncNodes() {
	b.mu.Lock()
	defer b.mu.Unlock()
	running := map[string]map[executor.RunningAttempt][]cluster.Allocation{}
	for name := range b.nodes {
		running[name] = map[executor.RunningAttempt][]cluster.Allocation{}
	}
	// What each bound pod holds, in GPU index order on its node (the device
	// plugin picks the devices: Prescient's indices are bookkeeping, as in
	// Nodes, where other schedulers' GPUs come off the top).
	next := map[string]int{}
	for _, j := range slices.SortedFunc(maps.Values(b.jobs), func(a, b *kubeJob) int { return strings.Compare(string(a.pj.ID), string(b.pj.ID)) }) {
		latest := 0 // a Job's failed pods of earlier attempts are history
		for _, p := range j.pods {
			if ra, ok := boundAttempt(p); ok {
				latest = max(latest, ra.Attempt)
			}
		}
		for _, p := range sortedPods(j.pods) {
			ra, ok := boundAttempt(p)
			if !ok || ra.Attempt < latest {
				continue
			}
			node := plannerNode(p)
			if running[node] == nil {
				running[node] = map[executor.RunningAttempt][]cluster.Allocation{}
			}
			_, n, _ := podDevices(p)
			allocs := running[node][ra]
			for range n {
				allocs = append(allocs, cluster.Allocation{Job: ra.Job, GPU: cluster.GPURef{Node: node, Index: next[node]}, Milli: cluster.MilliGPU})
				next[node]++
			}
			running[node][ra] = allocs
			if ra.Job == j.pj.ID && ra.Attempt >= j.attempt {
				j.attempt, j.started = ra.Attempt, true
			}
		}
	}
	now := b.cfg.Clock()
	for _, name := range slices.Sorted(maps.Keys(running)) {
		list := slices.SortedFunc(maps.Keys(running[name]), func(a, b executor.RunningAttempt) int {
			return strings.Compare(string(a.Job), string(b.Job))
		})
		holdings := map[executor.RunningAttempt][]cluster.Allocation{}
		for ra, allocs := range running[name] {
			if len(allocs) > 0 {
				holdings[ra] = allocs
			}
		}
		b.emitLocked(executor.JobEvent{Type: executor.NodeSynced, Time: now, Node: name, Running: list, Holdings: holdings})
	}
	// Pods that ended while no one watched: their exits follow the syncs
	// that reported them bound.
	for _, j := range b.jobs {
		b.finishedLocked(j)
	}
}

// boundAttempt is the attempt a bound pod runs, from the annotations
// Prescient wrote before binding it.
func boundAttempt(p *corev1.Pod) (executor.RunningAttempt, bool) {
	if p.Spec.NodeName == "" {
		return executor.RunningAttempt{}, false
	}
	id := p.Annotations[AnnotationJob]
	n, err := strconv.Atoi(p.Annotations[AnnotationAttempt])
	if id == "" || err != nil {
		return executor.RunningAttempt{}, false
	}
	return executor.RunningAttempt{Job: cluster.JobID(id), Attempt: n}, true
}

// emitLocked queues an event for Watch's reader; b.mu is held.
func (b *Backend) emitLocked(e executor.JobEvent) { b.events.Emit(e) }

func (b *Backend) emit(e executor.JobEvent) { b.events.Emit(e) }

func (b *Backend) nodeChanged(o any) {
	kn, ok := o.(*corev1.Node)
	if !ok {
		return
	}
	ns, err := nodesFromKube(kn)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.dropNodeLocked(kn.Name)
	if parkedMark(kn) {
		b.cordoned[kn.Name] = true
	} else {
		delete(b.cordoned, kn.Name)
	}
	if err != nil {
		if b.badNode[kn.Name] != err.Error() {
			b.badNode[kn.Name] = err.Error()
			b.log.Warn("node ignored", "node", kn.Name, "error", err)
		}
		return
	}
	delete(b.badNode, kn.Name)
	for _, n := range ns[1:] {
		b.migNodes[kn.Name] = append(b.migNodes[kn.Name], n.Name)
		b.nodes[n.Name] = n
	}
	b.nodes[kn.Name] = ns[0]
}

// dropNodeLocked forgets a node and the nodes of its MIG instances.
func (b *Backend) dropNodeLocked(name string) {
	for _, m := range b.migNodes[name] {
		delete(b.nodes, m)
	}
	delete(b.migNodes, name)
	delete(b.nodes, name)
}

func (b *Backend) nodeDeleted(o any) {
	kn, ok := o.(*corev1.Node)
	if !ok {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.dropNodeLocked(kn.Name)
	delete(b.badNode, kn.Name)
	delete(b.cordoned, kn.Name)
	// Its pods are gone with it: their deletions report the jobs.
}

// foreignChanged records what a pod of another scheduler holds on its node;
// the informer's field selector already leaves out unbound and finished
// pods, and the checks here repeat it for clients that ignore selectors. A
// terminating pod holds its resources until its object is gone.
func (b *Backend) foreignChanged(o any) {
	p, ok := o.(*corev1.Pod)
	if !ok {
		return
	}
	key := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !othersBound(p) {
		b.setForeignLocked(key, nil)
		return
	}
	cpu, mem := podRequests(p)
	f := foreignPod{node: p.Spec.NodeName, gpus: podGPUs(p), cpuMilli: cpu, memBytes: mem}
	if prof, n, err := podMIG(p); err == nil && n > 0 {
		f.mig, f.migCount = p.Spec.NodeName+MIGNodeSeparator+prof, n
	}
	f.daemon = nodeService(p)
	b.setForeignLocked(key, &f)
}

// setForeignLocked records what a foreign pod holds (nil: nothing, it is
// gone) and keeps foreignOn counting it.
func (b *Backend) setForeignLocked(key types.NamespacedName, f *foreignPod) {
	if old, ok := b.foreign[key]; ok && !old.daemon {
		if b.foreignOn[old.node]--; b.foreignOn[old.node] <= 0 {
			delete(b.foreignOn, old.node)
		}
	}
	delete(b.foreign, key)
	if f == nil {
		return
	}
	b.foreign[key] = *f
	if !f.daemon {
		b.foreignOn[f.node]++
	}
}

func (b *Backend) foreignDeleted(o any) {
	p, ok := o.(*corev1.Pod)
	if !ok {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.setForeignLocked(types.NamespacedName{Namespace: p.Namespace, Name: p.Name}, nil)
}

// podChanged files a pod under its job, submits the job once all its
// members exist, and reports checkpoints and exits.
func (b *Backend) podChanged(ctx context.Context, o any) {
	p, ok := o.(*corev1.Pod)
	if !ok || p.Spec.SchedulerName != SchedulerName {
		return
	}
	pj, err := jobOfPod(p, b.batchJob)
	if errors.Is(err, errOwnerNotSeen) {
		if b.park(p) {
			b.log.Debug("pod waits for its Job", "pod", p.Namespace+"/"+p.Name, "error", err)
			return
		}
		pj, err = jobOfPod(p, b.batchJob) // the Job was seen meanwhile
	}
	if err != nil {
		b.log.Warn("pod ignored", "pod", p.Namespace+"/"+p.Name, "error", err)
		b.podEvent(ctx, p, corev1.EventTypeWarning, "PrescientInvalid", err.Error())
		return
	}
	b.mu.Lock()
	if _, deleted := b.gone[p.UID]; deleted {
		b.mu.Unlock()
		return // a copy of a pod deleted since (one that waited for its Job)
	}
	j := b.jobs[pj.ID]
	if j == nil {
		j = &kubeJob{pj: pj, pods: map[string]*corev1.Pod{}}
		b.jobs[pj.ID] = j
	}
	j.pods[p.Name] = p
	j.empty = time.Time{}
	key := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
	b.byPod[key] = pj.ID
	if node := plannerNode(p); node != p.Spec.NodeName && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
		cpu, mem := podRequests(p)
		b.ownMIG[key] = foreignPod{node: p.Spec.NodeName, cpuMilli: cpu, memBytes: mem}
	} else {
		delete(b.ownMIG, key)
	}
	b.checkpointedLocked(j, p)
	b.finishedLocked(j)
	var submit *service.SubmitRequest
	var members []*corev1.Pod
	if j.submitted != "ok" && len(j.pods) >= pj.Size {
		members = specMembers(j.pods, pj.Size)
		spec, err := specOf(pj, members)
		if err != nil {
			if j.submitted != err.Error() {
				j.submitted = err.Error()
				b.mu.Unlock()
				b.log.Warn("job not submitted", "job", pj.ID, "error", err)
				b.podEvent(ctx, p, corev1.EventTypeWarning, "PrescientInvalid", err.Error())
				return
			}
		} else {
			submit = &service.SubmitRequest{ID: pj.ID, Spec: spec}
		}
	}
	svc := b.svc
	b.mu.Unlock()
	if submit == nil {
		return
	}
	st, err := svc.Submit(ctx, *submit)
	b.mu.Lock()
	defer b.mu.Unlock()
	if errors.Is(err, service.ErrConflict) {
		// The store has the job already, from another spec (another
		// replica's view of its pods): it is the same job.
		b.log.Info("job known already", "job", pj.ID, "note", err)
		j.submitted = "ok"
		return
	}
	if err != nil {
		b.log.Warn("job not submitted", "job", pj.ID, "error", err)
		if j.submitted != err.Error() {
			j.submitted = err.Error()
			go b.podEvent(ctx, p, corev1.EventTypeWarning, "PrescientRejected", err.Error())
		}
		return
	}
	j.submitted = "ok"
	b.log.Info("job submitted", "job", pj.ID, "state", st.State, "pods", len(members), "gpus", submit.Spec.GPUs)
}

// checkpointedLocked reports a new prescient.io/checkpointed-at on a
// member of a started attempt.
func (b *Backend) checkpointedLocked(j *kubeJob, p *corev1.Pod) {
	v, ok := p.Annotations[AnnotationCheckpointedAt]
	if !ok || v == j.ack || !j.started || j.ended {
		return
	}
	if ra, bound := boundAttempt(p); !bound || ra.Attempt != j.attempt {
		return // a pod of an earlier attempt (a Job's failed pod)
	}
	j.ack = v
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		b.log.Warn("checkpoint acknowledgement ignored", "pod", p.Namespace+"/"+p.Name,
			"error", fmt.Errorf("annotation %s=%q: want an RFC 3339 time: %w", AnnotationCheckpointedAt, v, err))
		return
	}
	cp := &cluster.Checkpoint{Time: t.UTC(), Path: p.Annotations[AnnotationCheckpointPath]}
	if s, ok := p.Annotations[AnnotationCheckpointStep]; ok {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			cp.Step = n
		}
	}
	b.emitLocked(executor.JobEvent{Type: executor.JobCheckpointed, Time: b.cfg.Clock(), Node: plannerNode(p),
		Job: j.pj.ID, Attempt: j.attempt, Checkpoint: cp})
}

// finishedLocked reports the exit of a started attempt whose pods ended
// on their own (a kubelet set their phase): failed at the first member
// that failed, succeeded once every member succeeded.
func (b *Backend) finishedLocked(j *kubeJob) {
	if !j.started || j.ended {
		return
	}
	done := 0
	for _, p := range j.pods {
		if ra, ok := boundAttempt(p); !ok || ra.Attempt != j.attempt {
			continue // an earlier attempt's pod, or one not bound
		}
		switch p.Status.Phase {
		case corev1.PodFailed:
			j.ended = true
			if b.retriedLocked(j) {
				// Its controller retries it with a new pod: the same job's
				// next attempt.
				b.emitLocked(executor.JobEvent{Type: executor.JobLost, Time: b.cfg.Clock(), Node: plannerNode(p), Job: j.pj.ID,
					Attempt: j.attempt, Message: fmt.Sprintf("pod %s failed (exit %d), Job %s retries it: %s", p.Name,
						exitCode(p), j.pj.Owner.Name, p.Status.Message)})
				return
			}
			b.emitLocked(executor.JobEvent{Type: executor.JobExited, Time: b.cfg.Clock(), Node: plannerNode(p), Job: j.pj.ID,
				Attempt: j.attempt, ExitCode: exitCode(p), Stopped: j.stopping, Message: "pod " + p.Name + " failed: " + p.Status.Message})
			return
		case corev1.PodSucceeded:
			done++
		}
	}
	if done == j.pj.Size {
		j.ended = true
		b.emitLocked(executor.JobEvent{Type: executor.JobExited, Time: b.cfg.Clock(), Job: j.pj.ID, Attempt: j.attempt, Stopped: j.stopping})
	}
}

// exitCode is the first non-zero exit code of a failed pod's containers;
// -1 when none says.
func exitCode(p *corev1.Pod) int {
	for _, s := range p.Status.ContainerStatuses {
		if t := s.State.Terminated; t != nil && t.ExitCode != 0 {
			return int(t.ExitCode)
		}
	}
	return -1
}

// podDeleted frees what the pod held: a started attempt whose pods are
// gone exited (stopped, when Prescient evicted them), and a gang that
// loses a member it did not lose on request is lost (its other members are
// deleted, for their controller to recreate).
func (b *Backend) podDeleted(ctx context.Context, o any) {
	p, ok := o.(*corev1.Pod)
	if !ok {
		return
	}
	key := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.gone[p.UID] = b.cfg.Clock()
	delete(b.ownMIG, key)
	if ref := metav1.GetControllerOf(p); ref != nil {
		jk := types.NamespacedName{Namespace: p.Namespace, Name: ref.Name}
		if delete(b.parked[jk], p.Name); len(b.parked[jk]) == 0 {
			delete(b.parked, jk)
		}
	}
	id, ok := b.byPod[key]
	if !ok {
		return
	}
	delete(b.byPod, key)
	j := b.jobs[id]
	if j == nil {
		return
	}
	delete(j.pods, p.Name)
	if len(j.pods) == 0 {
		j.empty = b.cfg.Clock()
	}
	ra, bound := boundAttempt(p)
	if !bound || ra.Attempt != j.attempt || !j.started || j.ended {
		return
	}
	now := b.cfg.Clock()
	switch {
	case j.stopping:
		for _, q := range j.pods {
			if qa, bound := boundAttempt(q); bound && qa.Attempt == j.attempt && !finished(q) {
				return // the others have yet to go
			}
		}
		j.ended = true
		b.emitLocked(executor.JobEvent{Type: executor.JobExited, Time: now, Node: plannerNode(p), Job: id, Attempt: j.attempt,
			Stopped: true, ExitCode: -1, Message: "pods evicted"})
	case p.Status.Phase == corev1.PodSucceeded && !j.pj.Gang:
		j.ended = true
		b.emitLocked(executor.JobEvent{Type: executor.JobExited, Time: now, Node: plannerNode(p), Job: id, Attempt: j.attempt})
	case !finished(p) && b.retriedLocked(j):
		j.ended = true
		b.emitLocked(executor.JobEvent{Type: executor.JobLost, Time: now, Node: plannerNode(p), Job: id, Attempt: j.attempt,
			Message: "pod " + p.Name + " was deleted; Job " + j.pj.Owner.Name + " recreates it"})
	case j.pj.Gang:
		j.ended = true
		b.emitLocked(executor.JobEvent{Type: executor.JobLost, Time: now, Node: plannerNode(p), Job: id, Attempt: j.attempt,
			Message: "gang member " + p.Name + " was deleted"})
		rest := sortedPods(j.pods)
		go b.deletePods(ctx, rest, "a member of its gang was deleted")
	default:
		j.ended = true
		b.emitLocked(executor.JobEvent{Type: executor.JobExited, Time: now, Node: plannerNode(p), Job: id, Attempt: j.attempt,
			ExitCode: exitCode(p), Message: "pod " + p.Name + " was deleted"})
	}
}

// sweep cancels the jobs that have had no pod for GoneAfter.
func (b *Backend) sweep(ctx context.Context) {
	every := min(b.cfg.GoneAfter/2, 5*time.Second)
	t := time.NewTicker(max(every, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := b.cfg.Clock()
		var gone []cluster.JobID
		b.mu.Lock()
		svc := b.svc
		for uid, at := range b.gone {
			if now.Sub(at) >= goneMemory {
				delete(b.gone, uid)
			}
		}
		for id, j := range b.jobs {
			// A Job's job waits for its controller's next pod (backoff,
			// suspension) as long as the Job lives: its failure or deletion
			// cancels it.
			if len(j.pods) == 0 && !j.empty.IsZero() && now.Sub(j.empty) >= b.cfg.GoneAfter && !b.ownerLivesLocked(j) {
				delete(b.jobs, id)
				if j.submitted == "ok" {
					gone = append(gone, id)
				}
			}
		}
		b.mu.Unlock()
		b.cancelJobs(ctx, svc, gone, "it has had no pod for "+b.cfg.GoneAfter.String())
	}
}

// Start binds the job's pods to the planned nodes: each pod takes its GPU
// count of the node's allocated GPUs. The attempt and job are written on
// each pod first, so that a restart knows what it bound. If a bind fails
// midway, the members already bound are deleted (their controller
// recreates them) and the attempt is reported lost, so the control plane
// requeues it. The same attempt again binds nothing.
func (b *Backend) Start(ctx context.Context, a executor.Assignment) error {
	b.mu.Lock()
	j := b.jobs[a.Job.ID]
	if j == nil || len(j.pods) == 0 {
		b.mu.Unlock()
		return fmt.Errorf("start %s attempt %d: %w", a.Job.ID, a.Attempt, ErrUnknownJob)
	}
	if a.Attempt < j.attempt || (a.Attempt == j.attempt && j.started) {
		b.mu.Unlock()
		return nil
	}
	var pods []*corev1.Pod
	for _, p := range sortedPods(j.pods) {
		if p.DeletionTimestamp == nil && !finished(p) {
			pods = append(pods, p)
		}
	}
	nodes, err := podNodes(a, len(pods), j.pj.Size)
	if err != nil {
		b.mu.Unlock()
		return fmt.Errorf("start %s attempt %d: %w: %w", a.Job.ID, a.Attempt, ErrInvalidAssignment, err)
	}
	for i, p := range pods {
		if ra, ok := boundAttempt(p); p.Spec.NodeName != "" && (!ok || ra.Job != a.Job.ID || ra.Attempt != a.Attempt || plannerNode(p) != nodes[i]) {
			b.mu.Unlock()
			return fmt.Errorf("start %s attempt %d: %w: pod %s/%s is bound to node %s already", a.Job.ID, a.Attempt,
				ErrInvalidAssignment, p.Namespace, p.Name, p.Spec.NodeName)
		}
	}
	j.attempt, j.started, j.ended, j.stopping = a.Attempt, false, false, false
	b.mu.Unlock()

	var bound []*corev1.Pod
	for i, p := range pods {
		if p.Spec.NodeName == "" {
			if err := b.bind(ctx, p, a, parentNode(nodes[i])); err != nil {
				b.log.Warn("bind failed; deleting the members bound", "job", a.Job.ID, "attempt", a.Attempt, "pod", p.Name,
					"node", nodes[i], "bound", len(bound), "error", err)
				b.deletePods(ctx, bound, "its gang could not be bound whole")
				b.mu.Lock()
				if j.attempt == a.Attempt {
					j.ended = true
				}
				b.emitLocked(executor.JobEvent{Type: executor.JobLost, Time: b.cfg.Clock(), Node: nodes[i], Job: a.Job.ID,
					Attempt: a.Attempt, Message: fmt.Sprintf("bind of pod %s to node %s failed: %v", p.Name, nodes[i], err)})
				b.mu.Unlock()
				return nil
			}
		}
		bound = append(bound, p)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if j.attempt == a.Attempt && !j.ended {
		j.started = true
		b.emitLocked(executor.JobEvent{Type: executor.JobStarted, Time: b.cfg.Clock(), Node: nodes[0], Job: a.Job.ID, Attempt: a.Attempt})
	}
	return nil
}

// podNodes says which node each of n pods (sorted by name) goes to: the
// allocations' nodes in order of first appearance, each taking as many
// pods as it has GPUs for.
func podNodes(a executor.Assignment, n, size int) ([]string, error) {
	if n != size {
		return nil, fmt.Errorf("%d of the gang's %d pods exist", n, size)
	}
	if len(a.Allocations) == 0 {
		return nil, errors.New("no allocations")
	}
	perPod := a.Job.Spec.GPUs / size
	var order []string
	gpus := map[string]int{}
	for _, al := range a.Allocations {
		if _, ok := gpus[al.GPU.Node]; !ok {
			order = append(order, al.GPU.Node)
		}
		gpus[al.GPU.Node]++
	}
	if perPod == 0 {
		if len(order) != 1 && size != 1 {
			return nil, errors.New("GPU-less gang members spread over several nodes")
		}
		out := make([]string, n)
		for i := range out {
			out[i] = order[i%len(order)]
		}
		return out, nil
	}
	var out []string
	for _, node := range order {
		if gpus[node]%perPod != 0 {
			return nil, fmt.Errorf("node %s: %d GPUs do not split into pods of %d", node, gpus[node], perPod)
		}
		for k := 0; k < gpus[node]/perPod; k++ {
			out = append(out, node)
		}
	}
	if len(out) != n {
		return nil, fmt.Errorf("the allocations hold %d pods of %d GPUs, the job has %d", len(out), perPod, n)
	}
	return out, nil
}

// bind writes the job and attempt on the pod, then binds it to node.
func (b *Backend) bind(ctx context.Context, p *corev1.Pod, a executor.Assignment, node string) error {
	patch, err := annotationPatch(map[string]string{AnnotationJob: string(a.Job.ID), AnnotationAttempt: strconv.Itoa(a.Attempt)})
	if err != nil {
		return err
	}
	pods := b.cfg.Client.CoreV1().Pods(p.Namespace)
	if _, err := pods.Patch(ctx, p.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("annotate pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	binding := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID},
		Target: corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: node}}
	if err := pods.Bind(ctx, binding, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("bind pod %s/%s to node %s: %w", p.Namespace, p.Name, node, err)
	}
	return nil
}

// deletePods deletes pods (their controller recreates them); gone ones
// are no error.
func (b *Backend) deletePods(ctx context.Context, pods []*corev1.Pod, why string) {
	for _, p := range pods {
		err := b.cfg.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			b.log.Error("pod not deleted", "pod", p.Namespace+"/"+p.Name, "why", why, "error", err)
			continue
		}
		b.log.Info("pod deleted", "pod", p.Namespace+"/"+p.Name, "why", why)
	}
}

// Checkpoint implements executor.Backend: it sets
// prescient.io/checkpoint-requested on every member; the workload answers
// with prescient.io/checkpointed-at.
func (b *Backend) Checkpoint(ctx context.Context, id cluster.JobID) error {
	pods, err := b.members(id, "checkpoint")
	if err != nil {
		return err
	}
	patch, err := annotationPatch(map[string]string{AnnotationCheckpointRequested: b.cfg.Clock().UTC().Format(time.RFC3339)})
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range pods {
		if _, err := b.cfg.Client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("checkpoint %s: annotate pod %s/%s: %w", id, p.Namespace, p.Name, err))
		}
	}
	return errors.Join(errs...)
}

// Stop implements executor.Backend: it evicts every member through the
// Eviction API with the grace period. A job whose pods are gone is
// stopped already.
func (b *Backend) Stop(ctx context.Context, id cluster.JobID, grace time.Duration) error {
	b.mu.Lock()
	j := b.jobs[id]
	if j == nil || len(j.pods) == 0 || j.ended {
		b.mu.Unlock()
		return nil
	}
	j.stopping = true
	pods := sortedPods(j.pods)
	b.mu.Unlock()
	secs := int64(grace.Round(time.Second) / time.Second)
	var errs []error
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace},
			DeleteOptions: &metav1.DeleteOptions{GracePeriodSeconds: &secs, Preconditions: &metav1.Preconditions{UID: &p.UID}}}
		if err := b.cfg.Client.PolicyV1().Evictions(p.Namespace).Evict(ctx, ev); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("stop %s: evict pod %s/%s: %w", id, p.Namespace, p.Name, err))
		}
	}
	return errors.Join(errs...)
}

// members returns the pods of a job.
func (b *Backend) members(id cluster.JobID, what string) ([]*corev1.Pod, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	j := b.jobs[id]
	if j == nil || len(j.pods) == 0 {
		return nil, fmt.Errorf("%s %s: %w", what, id, ErrUnknownJob)
	}
	var out []*corev1.Pod
	for _, p := range sortedPods(j.pods) {
		if !finished(p) { // a Job's failed pods of earlier attempts are history
			out = append(out, p)
		}
	}
	return out, nil
}

// Recommended implements service.RecommendationSink: the recommendation is
// written on the job's pods (annotation and Event) in the background.
func (b *Backend) Recommended(_ context.Context, r service.Recommendation) {
	select {
	case b.recs <- r:
	default:
		b.log.Warn("recommendation not written on the pods: too many waiting", "job", r.Job, "kind", r.Kind)
	}
}

// recommendationNote is the JSON of the prescient.io/recommendation
// annotation.
type recommendationNote struct {
	ID      int64          `json:"id"`
	Time    time.Time      `json:"time"`
	Kind    string         `json:"kind"`
	Reason  string         `json:"reason"`
	Details map[string]any `json:"details,omitempty"`
}

// annotate writes the recommendations on the pods until ctx ends.
func (b *Backend) annotate(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case r := <-b.recs:
			if err := b.writeRecommendation(ctx, r); err != nil {
				b.log.Warn("recommendation not written on the pods", "job", r.Job, "kind", r.Kind, "error", err)
			}
		}
	}
}

func (b *Backend) writeRecommendation(ctx context.Context, r service.Recommendation) error {
	if r.Job == "" {
		return nil
	}
	pods, err := b.members(r.Job, "recommend")
	if err != nil {
		return err
	}
	note, err := json.Marshal(recommendationNote{ID: r.ID, Time: r.Time.UTC(), Kind: r.Kind, Reason: r.Reason, Details: r.Details})
	if err != nil {
		return err
	}
	patch, err := annotationPatch(map[string]string{AnnotationRecommendation: string(note)})
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range pods {
		if _, err := b.cfg.Client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("annotate pod %s/%s: %w", p.Namespace, p.Name, err))
			continue
		}
		msg := r.Kind + ": " + r.Reason
		if nodes, ok := r.Details["placement"].([]any); ok && len(nodes) > 0 {
			msg += fmt.Sprintf(" (GPUs %v)", nodes)
		}
		b.podEvent(ctx, p, corev1.EventTypeNormal, "PrescientRecommendation", msg)
	}
	return errors.Join(errs...)
}

// podEvent records an Event on a pod; failures are logged.
func (b *Backend) podEvent(ctx context.Context, p *corev1.Pod, typ, reason, msg string) {
	recordEvent(ctx, b.cfg.Client, p, corev1.EventSource{Component: SchedulerName}, b.cfg.Clock(), typ, reason, msg, b.log)
}

// recordEvent records an Event about a pod; a failure is logged, never
// returned (Events are advice).
func recordEvent(ctx context.Context, client kubernetes.Interface, p *corev1.Pod, src corev1.EventSource, at time.Time,
	typ, reason, msg string, log *slog.Logger) {
	const maxMessage = 1024
	if len(msg) > maxMessage {
		msg = msg[:maxMessage]
	}
	now := metav1.NewTime(at)
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: p.Name + ".", Namespace: p.Namespace},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: p.Namespace, Name: p.Name, UID: p.UID},
		Reason:         reason, Message: msg, Type: typ, Count: 1, FirstTimestamp: now, LastTimestamp: now, Source: src,
	}
	if _, err := client.CoreV1().Events(p.Namespace).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		log.Warn("event not recorded", "pod", p.Namespace+"/"+p.Name, "reason", reason, "error", err)
	}
}

// annotationPatch is a JSON merge patch that sets annotations.
func annotationPatch(ann map[string]string) ([]byte, error) {
	return json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
}

// retriedLocked reports whether the owning Job of a job's pods will
// replace a pod that failed or was deleted: the job is a Job's unit of
// work, Prescient did not stop it, and the Job has not failed.
func (b *Backend) retriedLocked(j *kubeJob) bool {
	return !j.stopping && b.ownerLivesLocked(j)
}

// ownerLivesLocked reports whether a job is a Job's unit of work and that
// Job still exists, has not failed (nor is about to: FailureTarget) and
// has not completed.
func (b *Backend) ownerLivesLocked(j *kubeJob) bool {
	owner := j.pj.Owner
	if owner == nil || b.failedJobs[owner.UID] {
		return false
	}
	current := b.batchJobs[types.NamespacedName{Namespace: owner.Namespace, Name: owner.Name}]
	if current == nil || current.UID != owner.UID {
		return false
	}
	if _, failed := jobFailed(current); failed {
		return false
	}
	for _, c := range current.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailureTarget) && c.Status == corev1.ConditionTrue {
			return false
		}
	}
	return true
}

// batchJob is the Job of that name as last seen; nil when none is.
func (b *Backend) batchJob(ns, name string) *batchv1.Job {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.batchJobs[types.NamespacedName{Namespace: ns, Name: name}]
}

// park keeps a pod until its owning Job is seen; it reports false, parking
// nothing, when the Job was seen meanwhile (the pod is to be filed again)
// or the pod is gone.
func (b *Backend) park(p *corev1.Pod) bool {
	ref := metav1.GetControllerOf(p)
	if ref == nil {
		return true
	}
	jk := types.NamespacedName{Namespace: p.Namespace, Name: ref.Name}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, deleted := b.gone[p.UID]; deleted {
		return true
	}
	if kj := b.batchJobs[jk]; kj != nil && kj.UID == ref.UID {
		return false
	}
	if b.parked[jk] == nil {
		b.parked[jk] = map[string]*corev1.Pod{}
	}
	b.parked[jk][p.Name] = p
	return true
}

// batchJobChanged records a Job, files the pods that waited for it, and,
// once its controller has given up on it (condition Failed), cancels the
// Prescient jobs of its pods that are still queued or running.
func (b *Backend) batchJobChanged(ctx context.Context, o any) {
	kj, ok := o.(*batchv1.Job)
	if !ok {
		return
	}
	jk := types.NamespacedName{Namespace: kj.Namespace, Name: kj.Name}
	b.mu.Lock()
	b.batchJobs[jk] = kj
	var waiting []*corev1.Pod
	for _, p := range b.parked[jk] {
		waiting = append(waiting, p)
	}
	delete(b.parked, jk)
	var cancel []cluster.JobID
	why, failed := jobFailed(kj)
	if failed && !b.failedJobs[kj.UID] {
		b.failedJobs[kj.UID] = true
		cancel = b.jobsOfLocked(kj.UID, false)
	}
	svc := b.svc
	b.mu.Unlock()
	for _, p := range waiting {
		b.podChanged(ctx, p)
	}
	b.cancelJobs(ctx, svc, cancel, "its Job "+kj.Namespace+"/"+kj.Name+" failed: "+why)
}

func (b *Backend) batchJobDeleted(ctx context.Context, o any) {
	kj, ok := o.(*batchv1.Job)
	if !ok {
		return
	}
	b.mu.Lock()
	delete(b.batchJobs, types.NamespacedName{Namespace: kj.Namespace, Name: kj.Name})
	delete(b.failedJobs, kj.UID)
	// Its pods go with it (the garbage collector deletes them); the jobs
	// of its pods that are not running are cancelled now, those that run
	// when their pods go (the sweep).
	cancel := b.jobsOfLocked(kj.UID, true)
	svc := b.svc
	b.mu.Unlock()
	b.cancelJobs(ctx, svc, cancel, "its Job "+kj.Namespace+"/"+kj.Name+" was deleted")
}

// jobsOfLocked are the submitted jobs of a batch Job's pods; with idle,
// only those not running.
func (b *Backend) jobsOfLocked(uid types.UID, idle bool) []cluster.JobID {
	var out []cluster.JobID
	for id, j := range b.jobs {
		if j.pj.Owner != nil && j.pj.Owner.UID == uid && j.submitted == "ok" && !(idle && j.started && !j.ended) {
			out = append(out, id)
		}
	}
	return out
}

// cancelJobs cancels jobs through svc, saying why in the log; a job that
// ended already (ErrConflict) is no error.
func (b *Backend) cancelJobs(ctx context.Context, svc Service, ids []cluster.JobID, why string) {
	for _, id := range ids {
		if _, err := svc.Cancel(ctx, id); err != nil && !errors.Is(err, service.ErrConflict) {
			b.log.Warn("job not cancelled", "job", id, "why", why, "error", err)
			continue
		}
		b.log.Info("job cancelled", "job", id, "why", why)
	}
}

// Waiting implements executor.Waiter: a job whose pods do not all exist
// (a gang's missing member, a Job's pod that its controller has yet to
// replace) cannot be bound. Pods that finished or are being deleted do
// not count.
func (b *Backend) Waiting(id cluster.JobID) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	j := b.jobs[id]
	if j == nil {
		return false
	}
	live := 0
	for _, p := range j.pods {
		if p.DeletionTimestamp == nil && !finished(p) {
			live++
		}
	}
	return live < j.pj.Size
}

// InitialEvents implements executor.InitialSyncer: the events Watch queued
// before it returned, NodeSynced for every node first.
func (b *Backend) InitialEvents() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.initial
}
