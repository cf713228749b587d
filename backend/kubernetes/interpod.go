package kubernetes

import (
	"fmt"
	"math"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	schedcorev1 "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"github.com/prescient-sched/prescient/cluster"
)

// The filters here depend on the pods already bound, of every scheduler:
// required pod affinity and anti-affinity (kube-scheduler's InterPodAffinity
// plugin) and topology spread constraints that must hold (PodTopologySpread,
// DoNotSchedule). Their rules are kube-scheduler's, which has no library
// for them outside its framework; test/kubernetes checks them against the
// framework's plugins. As kube-scheduler, they see each pod alone: a gang's
// members constrain each other only through Start's check
// (checkPlacementLocked) and TaskLimits.

// Reasons, in kube-scheduler's words.
const (
	reasonAffinity         = "node(s) didn't match pod affinity rules"
	reasonAntiAffinity     = "node(s) didn't match pod anti-affinity rules"
	reasonExistingAnti     = "node(s) didn't satisfy existing pods anti-affinity rules"
	reasonSpread           = "node(s) didn't match pod topology spread constraints"
	reasonSpreadLabel      = reasonSpread + " (missing required label)"
	reasonAffinityNotValid = "pod's affinity or topology spread is not valid: "
)

// placedPod is a bound, unfinished pod, of Prescient or another scheduler,
// as the filters read it.
type placedPod struct {
	namespace   string
	labels      labels.Set
	node        string
	terminating bool
	anti        []affinityTerm // its required anti-affinity, which a newcomer must respect
	// affinity (required) and preferred are its terms that score a
	// newcomer (prefer.go).
	affinity  []affinityTerm
	preferred []weightedTerm
	req       requests
	other     otherResources
	ports     []hostPort
}

// affinityTerm is a parsed PodAffinityTerm: pods in namespaces (or in the
// namespaces nsSelector picks) whose labels selector matches, counted by
// the value of topologyKey on their nodes.
type affinityTerm struct {
	namespaces  []string
	nsSelector  labels.Selector
	selector    labels.Selector
	topologyKey string
}

// matches reports whether a pod of the namespace (whose labels are
// nsLabels) with the labels l is one the term counts.
func (t *affinityTerm) matches(ns string, l, nsLabels labels.Set) bool {
	return (slices.Contains(t.namespaces, ns) || t.nsSelector.Matches(nsLabels)) && t.selector.Matches(l)
}

// parseTerms parses a pod's affinity terms as kube-scheduler does: no
// namespaces and no namespace selector mean the pod's own namespace; a
// nil selector matches nothing.
func parseTerms(p *corev1.Pod, terms []corev1.PodAffinityTerm) ([]affinityTerm, error) {
	out := make([]affinityTerm, 0, len(terms))
	for _, t := range terms {
		sel, err := metav1.LabelSelectorAsSelector(t.LabelSelector)
		if err != nil {
			return nil, fmt.Errorf("labelSelector: %w", err)
		}
		ns, err := metav1.LabelSelectorAsSelector(t.NamespaceSelector)
		if err != nil {
			return nil, fmt.Errorf("namespaceSelector: %w", err)
		}
		names := t.Namespaces
		if len(names) == 0 && t.NamespaceSelector == nil {
			names = []string{p.Namespace}
		}
		out = append(out, affinityTerm{namespaces: names, nsSelector: ns, selector: sel, topologyKey: t.TopologyKey})
	}
	return out, nil
}

// requiredTerms are a pod's required pod affinity and anti-affinity terms.
func requiredTerms(p *corev1.Pod) (affinity, anti []affinityTerm, err error) {
	a := p.Spec.Affinity
	if a == nil {
		return nil, nil, nil
	}
	if a.PodAffinity != nil {
		if affinity, err = parseTerms(p, a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution); err != nil {
			return nil, nil, fmt.Errorf("podAffinity: %w", err)
		}
	}
	if a.PodAntiAffinity != nil {
		if anti, err = parseTerms(p, a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution); err != nil {
			return nil, nil, fmt.Errorf("podAntiAffinity: %w", err)
		}
	}
	return affinity, anti, nil
}

// newPlacedPod is a bound pod as the filters read it; a pod whose
// anti-affinity does not parse repels nothing (the API server validates
// selectors, so only a client that skips validation gets there).
func newPlacedPod(p *corev1.Pod, node string) *placedPod {
	affinity, anti, _ := requiredTerms(p)
	return &placedPod{req: requestsOf(p), other: otherRequests(p), ports: hostPorts(p), namespace: p.Namespace, labels: labels.Set(p.Labels),
		node: node, terminating: p.DeletionTimestamp != nil, anti: anti, affinity: affinity, preferred: preferredTerms(p)}
}

// requestsOf is what the pod asks of its node besides GPUs.
func requestsOf(p *corev1.Pod) requests {
	cpu, mem := podRequests(p)
	return requests{cpuMilli: cpu, memBytes: mem, pods: 1}
}

// largestRequest is the most that any one of the pods asks of a node,
// resource by resource: what a node must have room for to take any of
// them.
func largestRequest(pods []*corev1.Pod) (requests, otherResources) {
	var want requests
	var other otherResources
	for _, p := range pods {
		r := requestsOf(p)
		want = requests{max(want.cpuMilli, r.cpuMilli), max(want.memBytes, r.memBytes), 1}
		for name, v := range otherRequests(p) {
			if other == nil {
				other = otherResources{}
			}
			other[name] = max(other[name], v)
		}
	}
	return want, other
}

// setPlacedLocked records a pod bound to node ("" or p nil: it holds no
// node now, unbound, finished or gone).
func (b *Backend) setPlacedLocked(key types.NamespacedName, p *corev1.Pod, node string) {
	if node == "" || p == nil {
		b.constraints.pods.set(key, nil)
		return
	}
	b.constraints.pods.set(key, newPlacedPod(p, node))
}

// TaskLimits says how a gang's pods may share nodes
// (executor.NodeConstrainer). apart: its members repel each other by host
// (a member's required anti-affinity on kubernetes.io/hostname matches
// another) or take the same host port, so each needs a node of its own.
// perNode: the nodes that have room for fewer of its members than it has,
// by their free CPU, memory and pod count beside the pods bound there
// (withRoomLocked's rule), each with how many.
func (b *Backend) TaskLimits(id cluster.JobID) (apart bool, perNode map[string]int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	j := b.jobs[id]
	if j == nil || !j.pj.Gang || len(j.pods) < 2 {
		return false, nil
	}
	pods := sortedPods(j.pods)
	return b.apartLocked(pods), b.roomForMembersLocked(pods)
}

func (b *Backend) apartLocked(pods []*corev1.Pod) bool {
	l := b.podListerLocked(nil)
	for i, p := range pods {
		for _, q := range pods[i+1:] {
			if portsConflict(hostPorts(p), hostPorts(q)) {
				return true
			}
		}
		_, anti, err := requiredTerms(p)
		if err != nil {
			continue
		}
		for i := range anti {
			if anti[i].topologyKey != corev1.LabelHostname {
				continue
			}
			for _, q := range pods {
				if q != p && anti[i].matches(q.Namespace, q.Labels, l.nsLabels(q.Namespace)) {
					return true
				}
			}
		}
	}
	return false
}

// roomForMembersLocked is TaskLimits' perNode.
func (b *Backend) roomForMembersLocked(pods []*corev1.Pod) map[string]int {
	want, _ := largestRequest(pods)
	c := &b.constraints
	var out map[string]int
	for name, alloc := range c.allocatable {
		used := c.pods.used[name]
		k := len(pods)
		for _, r := range []struct{ alloc, used, want int64 }{
			{alloc.cpuMilli, used.cpuMilli, want.cpuMilli}, {alloc.memBytes, used.memBytes, want.memBytes}, {alloc.pods, used.pods, want.pods},
		} {
			if r.alloc > 0 && r.want > 0 {
				k = min(k, int(max(r.alloc-r.used, 0)/r.want))
			}
		}
		if k < len(pods) {
			if out == nil {
				out = map[string]int{}
			}
			out[name] = k
			for _, m := range b.migNodes[name] {
				out[m] = k
			}
		}
	}
	return out
}

// spreadConstraint is a parsed TopologySpreadConstraint that must hold.
type spreadConstraint struct {
	maxSkew       int
	topologyKey   string
	selector      labels.Selector
	minDomains    int
	honorAffinity bool // count only nodes that pass the pod's node affinity (the default)
	honorTaints   bool // count only nodes whose taints the pod tolerates
}

// spreadConstraints are a pod's spread constraints of the action
// (DoNotSchedule: filters; ScheduleAnyway: scores), with matchLabelKeys
// merged into their selectors as kube-scheduler does.
func spreadConstraints(p *corev1.Pod, action corev1.UnsatisfiableConstraintAction) ([]spreadConstraint, error) {
	var out []spreadConstraint
	for _, c := range p.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable != action {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(c.LabelSelector)
		if err != nil {
			return nil, fmt.Errorf("topologySpreadConstraints: labelSelector: %w", err)
		}
		match := labels.Set{}
		for _, k := range c.MatchLabelKeys {
			if v, ok := p.Labels[k]; ok {
				match[k] = v
			}
		}
		if len(match) > 0 {
			if reqs, ok := sel.Requirements(); ok {
				merged := labels.SelectorFromSet(match)
				sel = merged.Add(reqs...)
			}
		}
		sc := spreadConstraint{maxSkew: int(c.MaxSkew), topologyKey: c.TopologyKey, selector: sel, minDomains: 1, honorAffinity: true}
		if c.MinDomains != nil {
			sc.minDomains = int(*c.MinDomains)
		}
		if c.NodeAffinityPolicy != nil {
			sc.honorAffinity = *c.NodeAffinityPolicy == corev1.NodeInclusionPolicyHonor
		}
		if c.NodeTaintsPolicy != nil {
			sc.honorTaints = *c.NodeTaintsPolicy == corev1.NodeInclusionPolicyHonor
		}
		out = append(out, sc)
	}
	return out, nil
}

// topologyPair is a topology key and one of its values: a domain.
type topologyPair struct{ key, value string }

// podsFilter is, for one pod, what the pods already bound mean for each
// node: kube-scheduler's PreFilter state of InterPodAffinity and
// PodTopologySpread, computed once and read per node by refuses.
type podsFilter struct {
	affinity, anti []affinityTerm
	spread         []spreadConstraint
	podMatchesSelf bool // the pod matches all its own affinity terms
	// affinityCounts counts, by domain, the pods that match all the
	// affinity terms; antiCounts those that match any anti-affinity term;
	// existingAnti the domains of pods whose anti-affinity repels this pod.
	affinityCounts, antiCounts, existingAnti map[topologyPair]int
	// spreadCounts[i] counts, by the value of constraint i's key, the
	// pods it selects on the nodes it counts; spreadMin[i] is the
	// smallest count (0 when fewer domains than minDomains).
	spreadCounts []map[string]int
	spreadMin    []int
	selfSpread   []int // 1 where constraint i selects the pod itself
}

// newPodsFilter computes what the bound pods mean for p, or nil when
// nothing can turn a node away (no terms of its own, no spread
// constraint, no pod bound that repels it).
func newPodsFilter(p *corev1.Pod, l podLister) (*podsFilter, error) {
	affinity, anti, err := requiredTerms(p)
	if err != nil {
		return nil, err
	}
	spread, err := spreadConstraints(p, corev1.DoNotSchedule)
	if err != nil {
		return nil, err
	}
	f := &podsFilter{affinity: affinity, anti: anti, spread: spread,
		affinityCounts: map[topologyPair]int{}, antiCounts: map[topologyPair]int{}, existingAnti: map[topologyPair]int{}}
	own, myNS := labels.Set(p.Labels), l.nsLabels(p.Namespace)
	f.podMatchesSelf = len(affinity) > 0
	for i := range affinity { // its own namespace is one a namespaceSelector may pick
		if !affinity[i].matches(p.Namespace, own, myNS) {
			f.podMatchesSelf = false
		}
	}
	countOn := func(m map[topologyPair]int, n *corev1.Node, key string) {
		if v, ok := n.Labels[key]; ok {
			m[topologyPair{key, v}]++
		}
	}
	// Spread counts every node that has all the constraints' keys and
	// passes their inclusion policies, with zero where nothing runs.
	f.spreadCounts = make([]map[string]int, len(spread))
	f.spreadMin = make([]int, len(spread))
	f.selfSpread = make([]int, len(spread))
	counted := make([]map[string]bool, len(spread)) // node names each constraint counts
	if len(spread) > 0 {
		required := nodeaffinity.GetRequiredNodeAffinity(p)
		for i, sc := range spread {
			f.spreadCounts[i] = map[string]int{}
			counted[i] = make(map[string]bool, len(l.nodes))
			if sc.selector.Matches(own) {
				f.selfSpread[i] = 1
			}
		}
		for name, n := range l.nodes {
			if !hasSpreadKeys(n.Labels, spread) {
				continue
			}
			for i, sc := range spread {
				if sc.includes(p, n, required) {
					counted[i][name] = true
					f.spreadCounts[i][n.Labels[sc.topologyKey]] += 0
				}
			}
		}
	}
	for e := range l.repellers() {
		if n := l.nodes[e.node]; n != nil {
			for i := range e.anti {
				if e.anti[i].matches(p.Namespace, own, myNS) {
					countOn(f.existingAnti, n, e.anti[i].topologyKey)
				}
			}
		}
	}
	if len(affinity) > 0 { // the pods that match every term: among the first's
		for e := range l.termPods(&affinity[0]) {
			n := l.nodes[e.node]
			if n == nil {
				continue // on a node not (yet) seen: kube-scheduler's snapshot has it nowhere either
			}
			all := true
			for i := range affinity {
				if !affinity[i].matches(e.namespace, e.labels, l.nsLabels(e.namespace)) {
					all = false
					break
				}
			}
			if all {
				for i := range affinity {
					countOn(f.affinityCounts, n, affinity[i].topologyKey)
				}
			}
		}
	}
	for i := range anti {
		for e := range l.termPods(&anti[i]) {
			if n := l.nodes[e.node]; n != nil && anti[i].matches(e.namespace, e.labels, l.nsLabels(e.namespace)) {
				countOn(f.antiCounts, n, anti[i].topologyKey)
			}
		}
	}
	for i, sc := range spread {
		if sc.selector.Empty() {
			continue // an empty selector counts no pod, as kube-scheduler's countPodsMatchSelector
		}
		for e := range l.namespacePods(p.Namespace, sc.selector) {
			if n := l.nodes[e.node]; n != nil && counted[i][e.node] && !e.terminating && e.namespace == p.Namespace && sc.selector.Matches(e.labels) {
				f.spreadCounts[i][n.Labels[sc.topologyKey]]++
			}
		}
	}
	if len(affinity) == 0 && len(anti) == 0 && len(spread) == 0 && len(f.existingAnti) == 0 {
		return nil, nil
	}
	for i, sc := range spread {
		m := math.MaxInt32
		for _, k := range f.spreadCounts[i] {
			m = min(m, k)
		}
		if len(f.spreadCounts[i]) < sc.minDomains {
			m = 0
		}
		f.spreadMin[i] = m
	}
	return f, nil
}

// includes reports whether a spread constraint counts the node: its node
// inclusion policies.
func (sc *spreadConstraint) includes(p *corev1.Pod, n *corev1.Node, required nodeaffinity.RequiredNodeAffinity) bool {
	if sc.honorAffinity {
		if ok, _ := required.Match(n); !ok {
			return false
		}
	}
	if sc.honorTaints {
		_, untolerated := schedcorev1.FindMatchingUntoleratedTaint(klog.Background(), n.Spec.Taints, p.Spec.Tolerations,
			func(t *corev1.Taint) bool {
				return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
			}, false)
		if untolerated {
			return false
		}
	}
	return true
}

func hasSpreadKeys(l map[string]string, spread []spreadConstraint) bool {
	for _, sc := range spread {
		if _, ok := l[sc.topologyKey]; !ok {
			return false
		}
	}
	return true
}

// refuses is why the node may not take the pod, in kube-scheduler's
// words, or "": its affinity (some pod it must join in the node's domain
// of every term, unless no pod anywhere matches and it matches its own
// terms), its anti-affinity, the anti-affinity of the pods bound, and its
// spread constraints (the node's domain would exceed the least populated
// by more than maxSkew). f nil refuses nothing.
func (f *podsFilter) refuses(n *corev1.Node) string {
	if f == nil {
		return ""
	}
	if len(f.affinity) > 0 {
		exist := true
		for i := range f.affinity {
			v, ok := n.Labels[f.affinity[i].topologyKey]
			if !ok {
				return reasonAffinity
			}
			if f.affinityCounts[topologyPair{f.affinity[i].topologyKey, v}] <= 0 {
				exist = false
			}
		}
		if !exist && !(len(f.affinityCounts) == 0 && f.podMatchesSelf) {
			return reasonAffinity
		}
	}
	for i := range f.anti {
		if v, ok := n.Labels[f.anti[i].topologyKey]; ok && f.antiCounts[topologyPair{f.anti[i].topologyKey, v}] > 0 {
			return reasonAntiAffinity
		}
	}
	if len(f.existingAnti) > 0 {
		for k, v := range n.Labels {
			if f.existingAnti[topologyPair{k, v}] > 0 {
				return reasonExistingAnti
			}
		}
	}
	for i, sc := range f.spread {
		v, ok := n.Labels[sc.topologyKey]
		if !ok {
			return reasonSpreadLabel
		}
		if f.spreadCounts[i][v]+f.selfSpread[i]-f.spreadMin[i] > sc.maxSkew {
			return reasonSpread
		}
	}
	return ""
}
