package kubernetes

import (
	"fmt"
	"iter"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	schedcorev1 "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/component-helpers/storage/volume"
	"k8s.io/klog/v2"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
)

var _ executor.NodeConstrainer = (*Backend)(nil)

// nodeConstraints are what a node offers a pod's constraints: its labels
// and taints (kept apart from the planner's view of it, cluster.Node),
// and a version that changes only when those do, so that a job's allowed
// nodes are worked out again only then.
type nodeConstraints struct {
	nodes      map[string]*corev1.Node // by name: labels, taints and fields only
	storage    storageListers          // set once Watch has listed them
	namespaces corelisters.NamespaceLister
	version    uint64
	// allowed caches each job's answer at a version.
	allowed map[cluster.JobID]allowedNodes
	// allocatable is each node's allocatable CPU, memory and pods (0: not
	// reported), kept apart from the version: the fit is worked out each
	// plan anyway.
	allocatable  map[string]requests
	allocOther   map[string]otherResources // the rest of it (otherResources)
	allocVersion uint64
	// room memoizes, by request, the nodes without room for it, until a
	// pod is set or a node's allocatable changes (withRoomLocked).
	room map[requests]roomAnswer
	// names are the nodes' names, sorted, and candidates those with their
	// MIG instances' nodes, at namesVersion (sortedLocked).
	names, candidates []string
	namesVersion      uint64
	// pods are the bound, unfinished pods of every scheduler (Prescient's
	// also as soon as it binds them), indexed (podindex.go).
	pods podIndex
	// preferred caches each job's preferences by nodes' labels and taints;
	// untolerant is the answer for the many pods that have no preferred
	// node affinity and tolerate no PreferNoSchedule taint.
	preferred  map[cluster.JobID]cachedPreferences
	untolerant cachedPreferences
}

type allowedNodes struct {
	version     uint64
	nodes       []string
	why         string
	constrained bool
	// turnedAway counts the nodes each rule turned away, in
	// kube-scheduler's words.
	turnedAway map[string]int
	// want is the largest of the pods' requests, wantOther their other
	// resources (withRoomLocked).
	want      requests
	wantOther otherResources
}

// setNodeLocked records a node's labels and taints, bumping the version
// when they changed (a status update changes neither).
func (b *Backend) setNodeLocked(kn *corev1.Node) {
	c := &b.constraints
	if c.nodes == nil {
		c.nodes = map[string]*corev1.Node{}
	}
	if c.allocatable == nil {
		c.allocatable = map[string]requests{}
	}
	a := kn.Status.Allocatable
	if r := (requests{cpuMilli: a.Cpu().MilliValue(), memBytes: a.Memory().Value(), pods: a.Pods().Value()}); c.allocatable[kn.Name] != r {
		c.allocatable[kn.Name] = r
		c.allocVersion++
	}
	if c.allocOther == nil {
		c.allocOther = map[string]otherResources{}
	}
	c.allocOther[kn.Name] = otherResourcesOf(a)
	old, ok := c.nodes[kn.Name]
	if ok && maps.Equal(old.Labels, kn.Labels) && equality.Semantic.DeepEqual(old.Spec.Taints, kn.Spec.Taints) {
		return
	}
	c.nodes[kn.Name] = &corev1.Node{ObjectMeta: *kn.ObjectMeta.DeepCopy(), Spec: corev1.NodeSpec{Taints: slices.Clone(kn.Spec.Taints)}}
	c.version++
}

// storageListers read the claims, volumes and classes pods' volumes name.
type storageListers struct {
	claims  corelisters.PersistentVolumeClaimLister
	volumes corelisters.PersistentVolumeLister
	classes storagelisters.StorageClassLister
}

// storageChanged makes every job's allowed nodes be worked out again: a
// claim bound, a volume or class changed.
func (b *Backend) storageChanged(any) {
	b.mu.Lock()
	b.constraints.version++
	b.mu.Unlock()
}

func (b *Backend) forgetNodeLocked(name string) {
	delete(b.constraints.allocatable, name)
	delete(b.constraints.allocOther, name)
	b.constraints.allocVersion++
	if _, ok := b.constraints.nodes[name]; ok {
		delete(b.constraints.nodes, name)
		b.constraints.version++
	}
}

// AllowedNodes are the nodes (and their MIG instances' nodes) on which
// every pod of a queued job passes kube-scheduler's own filters for node
// selection, by k8s.io/component-helpers where it has them: its claims'
// volumes (as VolumeBinding filters, storageListers), the nodeSelector and
// required node affinity (NodeAffinity), the NoSchedule and NoExecute
// taints it does not tolerate (TaintToleration), its host ports
// (NodePorts), and, against the pods bound, its pod affinity and
// anti-affinity, theirs, and its topology spread (interpod.go).
// constrained is false when every node passes. With none, why counts the
// nodes each rule turns away, as kube-scheduler's FailedScheduling
// message does.
func (b *Backend) AllowedNodes(id cluster.JobID) ([]string, string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	j := b.jobs[id]
	if j == nil || len(j.pods) == 0 || len(b.constraints.nodes) == 0 {
		return nil, "", false
	}
	pods := make([]*corev1.Pod, 0, len(j.pods))
	for _, p := range sortedPods(j.pods) {
		if p.DeletionTimestamp == nil {
			pods = append(pods, p)
		}
	}
	a := b.allowedLocked(id, pods)
	if a.why != "" {
		return a.nodes, a.why, true
	}
	turnedAway := maps.Clone(a.turnedAway)
	nodes, constrained := b.withRoomLocked(a.want, a.nodes, a.constrained, turnedAway)
	if a.wantOther != nil { // few pods: not memoized
		c := &b.constraints
		nodes, constrained = b.keepNodesLocked(nodes, constrained, turnedAway, func(n *corev1.Node) string {
			return a.wantOther.lacking(c.allocOther[n.Name], c.pods.usedOther[n.Name])
		})
	}
	nodes, constrained = b.withFreePortsLocked(pods, nodes, constrained, turnedAway)
	nodes, constrained = b.withPodsLocked(pods, nodes, constrained, turnedAway)
	if !constrained || len(nodes) > 0 {
		return nodes, "", constrained
	}
	return nodes, fmt.Sprintf("0/%d nodes are available: %s", len(b.constraints.nodes), countReasons(turnedAway)), true
}

// allowedLocked is AllowedNodes by what changes seldom (nodes' labels and
// taints, claims, volumes, classes), cached until one of those changes.
// Its why is set only when the pods' claims rule out every node.
func (b *Backend) allowedLocked(id cluster.JobID, pods []*corev1.Pod) allowedNodes {
	c := &b.constraints
	if a, ok := c.allowed[id]; ok && a.version == c.version {
		return a
	}
	a := allowedNodes{version: c.version, turnedAway: map[string]int{}}
	a.want, a.wantOther = largestRequest(pods)
	names, _ := b.sortedLocked()
	for _, p := range pods {
		if why := c.storage.podRefuses(p); why != "" { // no node will do, whichever
			a.constrained, a.nodes, a.why = true, []string{}, fmt.Sprintf("0/%d nodes are available: %s.", len(names), why)
			c.remember(id, a)
			return a
		}
	}
	affinity := make([]nodeaffinity.RequiredNodeAffinity, len(pods)) // parsed once, matched on every node
	for i, p := range pods {
		affinity[i] = nodeaffinity.GetRequiredNodeAffinity(p)
	}
	for _, name := range names {
		if why := c.refuses(pods, affinity, c.nodes[name]); why != "" {
			a.turnedAway[why]++
			a.constrained = true
			continue
		}
		a.nodes = append(a.nodes, name)
		a.nodes = append(a.nodes, b.migNodes[name]...)
	}
	slices.Sort(a.nodes)
	if !a.constrained {
		a.nodes = nil
	} else if a.nodes == nil {
		a.nodes = []string{}
	}
	c.remember(id, a)
	return a
}

// sortedLocked are the nodes' names, sorted, and the same with their MIG
// instances' nodes, worked out again only when the nodes change.
func (b *Backend) sortedLocked() (names, candidates []string) {
	c := &b.constraints
	if c.names == nil || c.namesVersion != c.version {
		c.names = slices.Sorted(maps.Keys(c.nodes))
		c.candidates = c.candidates[:0]
		for _, name := range c.names {
			c.candidates = append(c.candidates, name)
			c.candidates = append(c.candidates, b.migNodes[name]...)
		}
		slices.Sort(c.candidates)
		c.namesVersion = c.version
	}
	return c.names, c.candidates
}

func (c *nodeConstraints) remember(id cluster.JobID, a allowedNodes) {
	if c.allowed == nil {
		c.allowed = map[cluster.JobID]allowedNodes{}
	}
	c.allowed[id] = a
}

// keepNodesLocked keeps, of nodes (all when not constrained), those whose
// Kubernetes node refuse passes (refuse says why not, or ""), counting
// the Kubernetes nodes turned away by reason. It returns nodes itself
// when it keeps them all, and never changes them.
func (b *Backend) keepNodesLocked(nodes []string, constrained bool, turnedAway map[string]int, refuse func(*corev1.Node) string) ([]string, bool) {
	if constrained && len(nodes) == 0 {
		return nodes, constrained
	}
	candidates := nodes
	if !constrained {
		_, candidates = b.sortedLocked()
	}
	why := make(map[string]string, len(b.constraints.nodes)) // by Kubernetes node: a MIG instance's node is its node's answer
	out := make([]string, 0, len(candidates))
	for _, name := range candidates {
		base := parentNode(name)
		w, ok := why[base]
		if !ok {
			if n := b.constraints.nodes[base]; n != nil {
				w = refuse(n)
			}
			why[base] = w
			if w != "" {
				turnedAway[w]++
			}
		}
		if w == "" {
			out = append(out, name)
		}
	}
	if len(out) == len(candidates) {
		return nodes, constrained
	}
	return out, true
}

// withRoomLocked keeps, of nodes, those with room for want (the largest
// of the pods' CPU and memory requests) and for one more pod (AllowedNodes
// checks the other resources beside it), beside the requests
// of every pod bound there, as kube-scheduler's NodeResourcesFit filters
// (GPUs are the planner's). A node that reports no allocatable resource
// is not limited by it.
func (b *Backend) withRoomLocked(want requests, nodes []string, constrained bool, turnedAway map[string]int) ([]string, bool) {
	c := &b.constraints
	ans, ok := c.room[want]
	if !ok || ans.pods != c.pods.version || ans.alloc != c.allocVersion {
		ans = roomAnswer{pods: c.pods.version, alloc: c.allocVersion, refused: map[string]string{}}
		for name, a := range c.allocatable {
			if why := insufficient(a, c.pods.used[name], want); why != "" {
				ans.refused[name] = why
			}
		}
		if c.room == nil || len(c.room) > 1024 { // requests of many sizes: start again
			c.room = map[requests]roomAnswer{}
		}
		c.room[want] = ans
	}
	if len(ans.refused) == 0 {
		return nodes, constrained
	}
	return b.keepNodesLocked(nodes, constrained, turnedAway, func(n *corev1.Node) string { return ans.refused[n.Name] })
}

// roomAnswer is withRoomLocked's answer for one request: the nodes
// without room, and why, at versions of the pods and the nodes.
type roomAnswer struct {
	pods, alloc uint64
	refused     map[string]string
}

// insufficient is why a node whose allocatable resources are alloc, with
// used taken, has no room for want, in NodeResourcesFit's words, or "".
func insufficient(alloc, used, want requests) string {
	switch {
	case alloc.pods > 0 && used.pods+want.pods > alloc.pods:
		return "Too many pods"
	case alloc.cpuMilli > 0 && want.cpuMilli > 0 && used.cpuMilli+want.cpuMilli > alloc.cpuMilli:
		return "Insufficient cpu"
	case alloc.memBytes > 0 && want.memBytes > 0 && used.memBytes+want.memBytes > alloc.memBytes:
		return "Insufficient memory"
	}
	return ""
}

// withFreePortsLocked keeps, of nodes, those where the pods' host ports
// are free, as kube-scheduler's NodePorts plugin filters: no pod bound
// there (the index's, of any scheduler, terminating and just bound ones
// too), takes the same port and protocol on the same or the wildcard
// address. Pods that ask for none pay nothing.
func (b *Backend) withFreePortsLocked(pods []*corev1.Pod, nodes []string, constrained bool, turnedAway map[string]int) ([]string, bool) {
	var want []hostPort
	for _, p := range pods {
		want = append(want, hostPorts(p)...)
	}
	if len(want) == 0 {
		return nodes, constrained
	}
	used := map[string][]hostPort{}
	for _, e := range b.constraints.pods.ported {
		used[e.node] = append(used[e.node], e.ports...)
	}
	return b.keepNodesLocked(nodes, constrained, turnedAway, func(n *corev1.Node) string {
		if portsConflict(want, used[n.Name]) {
			return "node(s) didn't have free ports for the requested pod ports"
		}
		return ""
	})
}

// withPodsLocked keeps, of nodes, those where every pod passes the
// filters that read the pods bound (podsFilter), each pod alone.
func (b *Backend) withPodsLocked(pods []*corev1.Pod, nodes []string, constrained bool, turnedAway map[string]int) ([]string, bool) {
	l := b.podListerLocked(nil)
	filters := make([]*podsFilter, 0, len(pods))
	for _, p := range pods {
		f, err := newPodsFilter(p, l)
		if err != nil {
			why := reasonAffinityNotValid + err.Error()
			return b.keepNodesLocked(nodes, constrained, turnedAway, func(*corev1.Node) string { return why })
		}
		if f != nil {
			filters = append(filters, f)
		}
	}
	if len(filters) == 0 {
		return nodes, constrained
	}
	return b.keepNodesLocked(nodes, constrained, turnedAway, func(n *corev1.Node) string {
		for _, f := range filters {
			if why := f.refuses(n); why != "" {
				return why
			}
		}
		return ""
	})
}

// podListerLocked reads the pods bound and, besides them, extra (a gang's
// members as Start places them).
func (b *Backend) podListerLocked(extra []*placedPod) podLister {
	c := &b.constraints
	return podLister{
		index: &c.pods,
		extra: extra,
		nodes: c.nodes,
		nsLabels: func(ns string) labels.Set {
			if c.namespaces == nil {
				return nil
			}
			n, err := c.namespaces.Get(ns)
			if err != nil {
				return nil
			}
			return n.Labels
		},
	}
}

// hostPort is a host port a container takes.
type hostPort struct {
	ip       string
	protocol corev1.Protocol
	port     int32
}

// hostPorts are the host ports of a pod's containers (init containers
// too), TCP on every address unless they say otherwise.
func hostPorts(p *corev1.Pod) []hostPort {
	var out []hostPort
	for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, c := range cs {
			for _, cp := range c.Ports {
				if cp.HostPort <= 0 {
					continue
				}
				hp := hostPort{ip: cp.HostIP, protocol: cp.Protocol, port: cp.HostPort}
				if hp.ip == "" {
					hp.ip = "0.0.0.0"
				}
				if hp.protocol == "" {
					hp.protocol = corev1.ProtocolTCP
				}
				out = append(out, hp)
			}
		}
	}
	return out
}

// portsConflict reports whether any of want is taken in used: the same
// port and protocol on the same address, or either on every address.
func portsConflict(want, used []hostPort) bool {
	for _, w := range want {
		for _, u := range used {
			if w.port == u.port && w.protocol == u.protocol && (w.ip == u.ip || w.ip == "0.0.0.0" || u.ip == "0.0.0.0") {
				return true
			}
		}
	}
	return false
}

// forgetJobLocked drops a job's cached answer.
func (b *Backend) forgetJobLocked(id cluster.JobID) {
	delete(b.constraints.allowed, id)
	delete(b.constraints.preferred, id)
}

// refuses is why the node takes not every pod, in kube-scheduler's words
// for its filters, or "" when it takes them all; affinity[i] is pods[i]'s
// required node affinity.
func (c *nodeConstraints) refuses(pods []*corev1.Pod, affinity []nodeaffinity.RequiredNodeAffinity, n *corev1.Node) string {
	for i, p := range pods {
		if why := c.storage.refuses(p, n); why != "" {
			return why
		}
		if ok, err := affinity[i].Match(n); err != nil {
			return "pod's node affinity is not valid: " + err.Error()
		} else if !ok {
			return "node(s) didn't match Pod's node affinity/selector"
		}
		taint, untolerated := schedcorev1.FindMatchingUntoleratedTaint(klog.Background(), n.Spec.Taints, p.Spec.Tolerations,
			func(t *corev1.Taint) bool {
				return (t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute) && !nodeStateTaint[t.Key]
			}, false)
		if untolerated {
			return fmt.Sprintf("node(s) had untolerated taint {%s: %s}", taint.Key, taint.Value)
		}
	}
	return ""
}

// nodeStateTaint are the taints Kubernetes puts on a node for its state:
// the backend reads readiness and cordons from the node itself (a node not
// Ready is down; a cordoned one is parked by Prescient or not offered),
// and parking plans the waiting jobs on the very nodes it cordoned.
var nodeStateTaint = map[string]bool{
	corev1.TaintNodeNotReady: true, corev1.TaintNodeUnreachable: true, corev1.TaintNodeUnschedulable: true,
}

// countReasons writes "3 node(s) didn't match ..., 2 node(s) had ...",
// the most common first.
func countReasons(m map[string]int) string {
	keys := slices.Sorted(maps.Keys(m))
	slices.SortStableFunc(keys, func(a, b string) int { return m[b] - m[a] })
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%d %s", m[k], k)
	}
	return strings.Join(parts, ", ") + "."
}

// podClaims yields the claims a pod's volumes name, by name, nil for one
// the lister does not have.
func (s storageListers) podClaims(p *corev1.Pod) iter.Seq2[string, *corev1.PersistentVolumeClaim] {
	return func(yield func(string, *corev1.PersistentVolumeClaim) bool) {
		for _, v := range p.Spec.Volumes {
			if v.PersistentVolumeClaim == nil {
				continue
			}
			name := v.PersistentVolumeClaim.ClaimName
			claim, err := s.claims.PersistentVolumeClaims(p.Namespace).Get(name)
			if err != nil {
				claim = nil
			}
			if !yield(name, claim) {
				return
			}
		}
	}
}

// podRefuses is why a pod's claims keep it off every node, in
// kube-scheduler's VolumeBinding words, or "": a claim that is not there or
// is being deleted, and an unbound claim that binds at once (only a bound
// one says where it may go). Without listers (before Watch) nothing.
func (s storageListers) podRefuses(p *corev1.Pod) string {
	if s.claims == nil {
		return ""
	}
	for name, claim := range s.podClaims(p) {
		if claim == nil {
			return fmt.Sprintf("persistentvolumeclaim %q not found", name)
		}
		if claim.DeletionTimestamp != nil {
			return fmt.Sprintf("persistentvolumeclaim %q is being deleted", name)
		}
		if claim.Spec.VolumeName == "" {
			if delay, err := volume.IsDelayBindingMode(claim, s.classes); err != nil || !delay {
				return "pod has unbound immediate PersistentVolumeClaims"
			}
		}
	}
	return ""
}

// refuses is why a pod's claims keep it off a node, or "": a bound volume
// whose node affinity the node does not meet (volume.CheckNodeAffinity),
// and an unbound WaitForFirstConsumer claim whose class's allowed
// topologies leave the node out. podRefuses has passed the pod.
func (s storageListers) refuses(p *corev1.Pod, n *corev1.Node) string {
	if s.claims == nil {
		return ""
	}
	for _, claim := range s.podClaims(p) {
		if claim == nil {
			continue
		}
		if claim.Spec.VolumeName != "" {
			pv, err := s.volumes.Get(claim.Spec.VolumeName)
			if err != nil {
				return "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
			}
			if volume.CheckNodeAffinity(pv, n.Labels) != nil {
				return "node(s) had volume node affinity conflict"
			}
			continue
		}
		class, err := s.classes.Get(volume.GetPersistentVolumeClaimClass(claim))
		if err == nil && len(class.AllowedTopologies) > 0 && !topologyAllows(class.AllowedTopologies, n.Labels) {
			return "node(s) didn't find available persistent volumes to bind"
		}
	}
	return ""
}

// topologyAllows reports whether node labels meet one of a class's
// allowed topology terms (every expression of it).
func topologyAllows(terms []corev1.TopologySelectorTerm, labels map[string]string) bool {
	for _, t := range terms {
		ok := true
		for _, e := range t.MatchLabelExpressions {
			if !slices.Contains(e.Values, labels[e.Key]) {
				ok = false
			}
		}
		if ok {
			return true
		}
	}
	return false
}
