package kubernetes

import (
	"context"
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
	// ProvisionTimeout bounds the wait, once a job's node is chosen, for
	// its WaitForFirstConsumer claims to be bound before its pods are;
	// default 10m (kube-scheduler's bind timeout).
	ProvisionTimeout time.Duration
	// PriorityTiers map PriorityClass names to tiers, for pods without the
	// prescient.io/tier label (the label wins); the system classes
	// (system-cluster-critical, system-node-critical) are production
	// unless named here, other classes the default tier.
	PriorityTiers map[string]cluster.Tier
	Logger        *slog.Logger
	Clock         func() time.Time
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
	// constraints are the nodes' labels and taints, and each queued job's
	// nodes by them (constraints.go).
	constraints nodeConstraints
	// runCtx is Watch's context: binds that wait for claims to be
	// provisioned outlive the Start that began them.
	runCtx context.Context
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
	// provisioning is the attempt whose bind waits for its claims to be
	// provisioned (0: none).
	provisioning int
	ended        bool // exited or lost reported for attempt
	stopping     bool
	ack          string    // the checkpointed-at value last reported
	empty        time.Time // when its last pod went; zero while it has pods
	cancelled    bool
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
	if cfg.ProvisionTimeout <= 0 {
		cfg.ProvisionTimeout = 10 * time.Minute
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

// preflight lists one object of each kind the informers watch, so that a
// role without a right fails Watch at once, naming it, instead of leaving
// an informer retrying unseen while Watch waits for it (an upgrade whose
// new rights were not applied, for one). Other errors are left to the
// informers, which retry.
func (b *Backend) preflight(ctx context.Context) error {
	c, ns := b.cfg.Client, b.cfg.Namespace
	one := metav1.ListOptions{Limit: 1}
	for _, k := range []struct {
		what string
		list func() error
	}{
		{"nodes", func() error { _, err := c.CoreV1().Nodes().List(ctx, one); return err }},
		{"jobs (batch)", func() error { _, err := c.BatchV1().Jobs(ns).List(ctx, one); return err }},
		{"pods", func() error { _, err := c.CoreV1().Pods(metav1.NamespaceAll).List(ctx, one); return err }},
		{"persistentvolumeclaims", func() error {
			_, err := c.CoreV1().PersistentVolumeClaims(metav1.NamespaceAll).List(ctx, one)
			return err
		}},
		{"persistentvolumes", func() error { _, err := c.CoreV1().PersistentVolumes().List(ctx, one); return err }},
		{"storageclasses (storage.k8s.io)", func() error { _, err := c.StorageV1().StorageClasses().List(ctx, one); return err }},
		{"namespaces", func() error { _, err := c.CoreV1().Namespaces().List(ctx, one); return err }},
	} {
		if err := k.list(); apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
			return fmt.Errorf("list %s: %w (the scheduler's role needs list and watch on %s: deploy/kubernetes/base/rbac.yaml)", k.what, err, k.what)
		}
	}
	return nil
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

	if err := b.preflight(ctx); err != nil {
		return nil, fmt.Errorf("kubernetes backend: %w", err)
	}
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
	// The claims, volumes and classes a pod's volumes name: they limit its
	// nodes (constraints.go); any change is a new answer.
	storageFactory := informers.NewSharedInformerFactory(b.cfg.Client, b.cfg.Resync)
	claims := storageFactory.Core().V1().PersistentVolumeClaims()
	volumes := storageFactory.Core().V1().PersistentVolumes()
	classes := storageFactory.Storage().V1().StorageClasses()
	for _, s := range []struct {
		inf  cache.SharedIndexInformer
		what string
	}{{claims.Informer(), "persistent volume claims"}, {volumes.Informer(), "persistent volumes"}, {classes.Informer(), "storage classes"}} {
		if err := startInformer(ctx, storageFactory, s.inf, b.storageChanged, b.storageChanged, s.what); err != nil {
			return nil, fmt.Errorf("kubernetes backend: %w", err)
		}
	}
	// Namespaces' labels: a pod affinity term's namespaceSelector reads
	// them when a plan is made (interpod.go), so a change needs no event.
	namespaces := storageFactory.Core().V1().Namespaces()
	if err := startInformer(ctx, storageFactory, namespaces.Informer(), func(any) {}, func(any) {}, "namespaces"); err != nil {
		return nil, fmt.Errorf("kubernetes backend: %w", err)
	}
	b.mu.Lock()
	b.constraints.storage = storageListers{claims: claims.Lister(), volumes: volumes.Lister(), classes: classes.Lister()}
	b.constraints.namespaces = namespaces.Lister()
	b.mu.Unlock()
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
	b.mu.Lock()
	b.runCtx = ctx
	b.mu.Unlock()
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
