package kubernetes

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	schedcorev1 "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
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
	nodes   map[string]*corev1.Node // by name: labels, taints and fields only
	version uint64
	// allowed caches each job's answer at a version.
	allowed map[cluster.JobID]allowedNodes
}

type allowedNodes struct {
	version     uint64
	nodes       []string
	why         string
	constrained bool
}

// setNodeLocked records a node's labels and taints, bumping the version
// when they changed (a status update changes neither).
func (b *Backend) setNodeLocked(kn *corev1.Node) {
	c := &b.constraints
	if c.nodes == nil {
		c.nodes = map[string]*corev1.Node{}
	}
	old, ok := c.nodes[kn.Name]
	if ok && maps.Equal(old.Labels, kn.Labels) && equality.Semantic.DeepEqual(old.Spec.Taints, kn.Spec.Taints) {
		return
	}
	c.nodes[kn.Name] = &corev1.Node{ObjectMeta: *kn.ObjectMeta.DeepCopy(), Spec: corev1.NodeSpec{Taints: slices.Clone(kn.Spec.Taints)}}
	c.version++
}

func (b *Backend) forgetNodeLocked(name string) {
	if _, ok := b.constraints.nodes[name]; ok {
		delete(b.constraints.nodes, name)
		b.constraints.version++
	}
}

// AllowedNodes are the nodes (and their MIG instances' nodes) on which
// every pod of a queued job passes kube-scheduler's own filters for node
// selection, by k8s.io/component-helpers: the nodeSelector and required
// node affinity (nodeaffinity.GetRequiredNodeAffinity), and the taints
// with effect NoSchedule or NoExecute (FindMatchingUntoleratedTaint, as
// the TaintToleration plugin filters). constrained is false when every
// node passes. With none, why counts the nodes each rule turns away, as
// kube-scheduler's FailedScheduling message does.
func (b *Backend) AllowedNodes(id cluster.JobID) ([]string, string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	j := b.jobs[id]
	if j == nil || len(j.pods) == 0 || len(b.constraints.nodes) == 0 {
		return nil, "", false
	}
	c := &b.constraints
	if a, ok := c.allowed[id]; ok && a.version == c.version {
		return a.nodes, a.why, a.constrained
	}
	pods := make([]*corev1.Pod, 0, len(j.pods))
	for _, p := range sortedPods(j.pods) {
		if p.DeletionTimestamp == nil {
			pods = append(pods, p)
		}
	}
	a := allowedNodes{version: c.version}
	turnedAway := map[string]int{}
	names := slices.Sorted(maps.Keys(c.nodes))
	for _, name := range names {
		if why := refuses(pods, c.nodes[name]); why != "" {
			turnedAway[why]++
			a.constrained = true
			continue
		}
		a.nodes = append(a.nodes, name)
		a.nodes = append(a.nodes, b.migNodes[name]...)
	}
	slices.Sort(a.nodes)
	if !a.constrained {
		a.nodes = nil
	} else if len(a.nodes) == 0 {
		a.why = fmt.Sprintf("0/%d nodes are available: %s", len(names), countReasons(turnedAway))
	}
	if c.allowed == nil {
		c.allowed = map[cluster.JobID]allowedNodes{}
	}
	c.allowed[id] = a
	return a.nodes, a.why, a.constrained
}

// forgetJobLocked drops a job's cached answer.
func (b *Backend) forgetJobLocked(id cluster.JobID) { delete(b.constraints.allowed, id) }

// refuses is why the node takes not every pod, in kube-scheduler's words
// for its filters, or "" when it takes them all.
func refuses(pods []*corev1.Pod, n *corev1.Node) string {
	for _, p := range pods {
		if ok, err := nodeaffinity.GetRequiredNodeAffinity(p).Match(n); err != nil {
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
