package kubernetes

import (
	"iter"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"
)

// podIndex holds the bound pods of every scheduler (placedPod) by
// namespace and by label, so that a term's pods are found without a walk
// of every pod bound: on a 10,000-GPU fleet a plan asks it for each
// queued pod with pod affinity or spread.
type podIndex struct {
	all        map[types.NamespacedName]*placedPod
	byNS       map[string]map[types.NamespacedName]*placedPod
	byLabel    map[nsLabel]map[types.NamespacedName]*placedPod
	repellers  map[types.NamespacedName]*placedPod // with required anti-affinity
	attractors map[types.NamespacedName]*placedPod // whose terms score a newcomer (prefer.go)
	ported     map[types.NamespacedName]*placedPod // that take host ports
	// used sums, by node, the requests of the pods bound there;
	// usedOther their otherResources, on the nodes where some pod asks any.
	used      map[string]requests
	usedOther map[string]otherResources
	// version changes with every pod set.
	version uint64
}

// requests are what a pod asks of its node, or what pods bound there ask
// together: CPU, memory and one pod each (NodeResourcesFit's resources
// besides GPUs, which the planner places, and besides the others below).
type requests struct{ cpuMilli, memBytes, pods int64 }

// otherResources are the rest of NodeResourcesFit's resources a pod asks
// for (ephemeral storage, hugepages, extended resources other than
// NVIDIA's, which the planner places), in milli-units; nil for none,
// which most pods are.
type otherResources map[corev1.ResourceName]int64

// otherRequests are a pod's requests of otherResources.
func otherRequests(p *corev1.Pod) otherResources {
	return otherResourcesOf(resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{}))
}

// otherResourcesOf are the otherResources of a list (a pod's requests, a
// node's allocatable); nil when it has none.
func otherResourcesOf(list corev1.ResourceList) otherResources {
	var out otherResources
	for name, q := range list {
		if isOtherResource(name) && !q.IsZero() {
			if out == nil {
				out = otherResources{}
			}
			out[name] = q.MilliValue()
		}
	}
	return out
}

// isOtherResource reports whether NodeResourcesFit counts the resource
// and requests does not: not CPU, memory or pods, and not NVIDIA's.
func isOtherResource(name corev1.ResourceName) bool {
	switch name {
	case corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods:
		return false
	}
	return !strings.HasPrefix(string(name), "nvidia.com/")
}

// lacking is the first of want that alloc, with used taken, has no room
// for, as NodeResourcesFit names it ("Insufficient ephemeral-storage"), or
// "". A resource the node does not offer has no room.
func (want otherResources) lacking(alloc, used otherResources) string {
	for _, name := range slices.Sorted(maps.Keys(want)) {
		if used[name]+want[name] > alloc[name] {
			return "Insufficient " + string(name)
		}
	}
	return ""
}

func (r requests) plus(o requests) requests {
	return requests{r.cpuMilli + o.cpuMilli, r.memBytes + o.memBytes, r.pods + o.pods}
}

func (r requests) minus(o requests) requests {
	return requests{r.cpuMilli - o.cpuMilli, r.memBytes - o.memBytes, r.pods - o.pods}
}

type nsLabel struct{ ns, key, value string }

// set records a pod under key (nil: none now).
func (x *podIndex) set(key types.NamespacedName, p *placedPod) {
	x.version++
	if old, ok := x.all[key]; ok {
		delete(x.all, key)
		delete(x.repellers, key)
		delete(x.attractors, key)
		delete(x.ported, key)
		removeFrom(x.byNS, key.Namespace, key)
		if x.used[old.node] = x.used[old.node].minus(old.req); x.used[old.node] == (requests{}) {
			delete(x.used, old.node)
		}
		for name, v := range old.other {
			if u := x.usedOther[old.node]; u != nil {
				if u[name] -= v; u[name] == 0 {
					delete(u, name)
				}
				if len(u) == 0 {
					delete(x.usedOther, old.node)
				}
			}
		}
		for k, v := range old.labels {
			removeFrom(x.byLabel, nsLabel{key.Namespace, k, v}, key)
		}
	}
	if p == nil {
		return
	}
	if x.all == nil {
		x.all, x.byNS, x.byLabel = map[types.NamespacedName]*placedPod{}, map[string]map[types.NamespacedName]*placedPod{}, map[nsLabel]map[types.NamespacedName]*placedPod{}
		x.repellers, x.attractors = map[types.NamespacedName]*placedPod{}, map[types.NamespacedName]*placedPod{}
		x.ported = map[types.NamespacedName]*placedPod{}
		x.used, x.usedOther = map[string]requests{}, map[string]otherResources{}
	}
	x.all[key] = p
	x.used[p.node] = x.used[p.node].plus(p.req)
	for name, v := range p.other {
		if x.usedOther[p.node] == nil {
			x.usedOther[p.node] = otherResources{}
		}
		x.usedOther[p.node][name] += v
	}
	addTo(x.byNS, key.Namespace, key, p)
	for k, v := range p.labels {
		addTo(x.byLabel, nsLabel{key.Namespace, k, v}, key, p)
	}
	if len(p.anti) > 0 {
		x.repellers[key] = p
	}
	if len(p.affinity) > 0 || len(p.preferred) > 0 {
		x.attractors[key] = p
	}
	if len(p.ports) > 0 {
		x.ported[key] = p
	}
}

func addTo[K comparable](m map[K]map[types.NamespacedName]*placedPod, k K, key types.NamespacedName, p *placedPod) {
	if m[k] == nil {
		m[k] = map[types.NamespacedName]*placedPod{}
	}
	m[k][key] = p
}

func removeFrom[K comparable](m map[K]map[types.NamespacedName]*placedPod, k K, key types.NamespacedName) {
	if delete(m[k], key); len(m[k]) == 0 {
		delete(m, k)
	}
}

// selected yields every bound pod of the namespaces in (in says which)
// that sel may select: where sel requires a label to have one of some
// values, only the pods with one of them. The caller matches each fully.
func (x *podIndex) selected(in func(ns string) bool, sel labels.Selector) iter.Seq[*placedPod] {
	return func(yield func(*placedPod) bool) {
		key, values := narrowest(sel)
		for ns, pods := range x.byNS {
			if !in(ns) {
				continue
			}
			if values == nil {
				for _, p := range pods {
					if !yield(p) {
						return
					}
				}
				continue
			}
			for _, v := range values {
				for _, p := range x.byLabel[nsLabel{ns, key, v}] {
					if !yield(p) {
						return
					}
				}
			}
		}
	}
}

// narrowest is a label the selector requires to have one of values, the
// fewest values of its requirements; nil values when it requires none.
func narrowest(sel labels.Selector) (string, []string) {
	reqs, ok := sel.Requirements()
	if !ok || len(reqs) == 0 {
		return "", nil
	}
	var key string
	var values []string
	for _, r := range reqs {
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
			vs := slices.Compact(slices.Sorted(slices.Values(r.ValuesUnsorted()))) // In [a, a] yields each pod once
			if values == nil || len(vs) < len(values) {
				key, values = r.Key(), vs
			}
		}
	}
	return key, values
}

// podLister is what the filters and scores read: the pods bound, as
// indexed, and besides them extra (a gang's members as Start places
// them, not in the index); the nodes by name and each namespace's labels.
type podLister struct {
	index    *podIndex
	extra    []*placedPod
	nodes    map[string]*corev1.Node
	nsLabels func(ns string) labels.Set
}

// termPods yields the bound pods that the term may count (t.matches
// decides).
func (l podLister) termPods(t *affinityTerm) iter.Seq[*placedPod] {
	in := func(ns string) bool { return slices.Contains(t.namespaces, ns) || t.nsSelector.Matches(l.nsLabels(ns)) }
	return l.withExtra(l.index.selected(in, t.selector))
}

// namespacePods yields the bound pods of the namespace that sel may
// select.
func (l podLister) namespacePods(ns string, sel labels.Selector) iter.Seq[*placedPod] {
	return l.withExtra(l.index.selected(func(n string) bool { return n == ns }, sel))
}

// repellers yields the bound pods with required anti-affinity.
func (l podLister) repellers() iter.Seq[*placedPod] {
	return l.withExtra(maps.Values(l.index.repellers))
}

func (l podLister) withExtra(s iter.Seq[*placedPod]) iter.Seq[*placedPod] {
	return func(yield func(*placedPod) bool) {
		for p := range s {
			if !yield(p) {
				return
			}
		}
		for _, p := range l.extra {
			if !yield(p) {
				return
			}
		}
	}
}
