package kubernetes

import (
	"maps"
	"math"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	schedcorev1 "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"github.com/prescient-sched/prescient/cluster"
)

// A pod's preferences score nodes as kube-scheduler's default profile
// scores them: each plugin's score normalized to 0-100 over the nodes, times
// the plugin's weight. The placement's own score (0-100) stands in for
// kube-scheduler's resource scorers, which weigh 1, so a preference outweighs
// packing as it does there.
const (
	weightNodeAffinity    = 2
	weightTaintToleration = 3
	weightInterPod        = 2
	weightSpread          = 2
	hardPodAffinityWeight = 1 // InterPodAffinityArgs' default
	maxNodeScore          = 100
)

// weightedTerm is a preferred pod (anti-)affinity term: weight is negative
// for anti-affinity.
type weightedTerm struct {
	affinityTerm
	weight int64
}

// preferredTerms are a pod's preferred pod affinity (positive weights) and
// anti-affinity (negative) terms; ones that do not parse are left out.
func preferredTerms(p *corev1.Pod) []weightedTerm {
	a := p.Spec.Affinity
	if a == nil {
		return nil
	}
	var out []weightedTerm
	add := func(terms []corev1.WeightedPodAffinityTerm, sign int64) {
		for _, w := range terms {
			t, err := parseTerms(p, []corev1.PodAffinityTerm{w.PodAffinityTerm})
			if err == nil {
				out = append(out, weightedTerm{affinityTerm: t[0], weight: sign * int64(w.Weight)})
			}
		}
	}
	if a.PodAffinity != nil {
		add(a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution, 1)
	}
	if a.PodAntiAffinity != nil {
		add(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution, -1)
	}
	return out
}

// NodePreferences are how much more than an unnamed node each node
// suits a queued job by its pods' preferences, in kube-scheduler's score
// units (executor.NodeConstrainer): preferred node affinity
// (NodeAffinity), PreferNoSchedule taints it does not tolerate
// (TaintToleration), preferred pod affinity and anti-affinity, its own and
// the pods bound's, with their required affinity at weight 1
// (InterPodAffinity), and ScheduleAnyway spread (PodTopologySpread). A
// gang's first member speaks for all. nil: no preference. The map may be
// shared: read it only.
func (b *Backend) NodePreferences(id cluster.JobID) map[string]float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	j := b.jobs[id]
	if j == nil || len(b.constraints.nodes) == 0 {
		return nil
	}
	var p *corev1.Pod
	for _, q := range sortedPods(j.pods) {
		if q.DeletionTimestamp == nil && !finished(q) {
			p = q
			break
		}
	}
	if p == nil {
		return nil
	}
	static := b.staticPreferencesLocked(id, p)
	dynamic := map[string]float64{}
	b.podPreferencesLocked(p, dynamic)
	if len(dynamic) == 0 && len(b.migNodes) == 0 { // the cached map, shared: no copy per job and cycle
		if len(static) == 0 {
			return nil
		}
		return static
	}
	out := maps.Clone(static)
	if out == nil {
		out = map[string]float64{}
	}
	for name, v := range dynamic {
		out[name] += v
	}
	if len(out) == 0 {
		return nil
	}
	for name, v := range out {
		for _, m := range b.migNodes[name] {
			out[m] = v
		}
	}
	return out
}

// staticPreferencesLocked is the part of NodePreferences that only nodes'
// labels and taints change, cached per job until they do.
func (b *Backend) staticPreferencesLocked(id cluster.JobID, p *corev1.Pod) map[string]float64 {
	c := &b.constraints
	if s, ok := c.preferred[id]; ok && s.version == c.version {
		return s.scores
	}
	out := map[string]float64{}
	if a := p.Spec.Affinity; a != nil && a.NodeAffinity != nil && len(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution) > 0 {
		if terms, err := nodeaffinity.NewPreferredSchedulingTerms(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution); err == nil {
			raw := map[string]int64{}
			var top int64
			for name, n := range c.nodes {
				if s := terms.Score(n); s > 0 {
					raw[name], top = s, max(top, s)
				}
			}
			for name, s := range raw { // DefaultNormalizeScore: unmatched nodes score 0
				out[name] += weightNodeAffinity * float64(maxNodeScore*s/top)
			}
		}
	}
	var tolerations []corev1.Toleration
	for _, t := range p.Spec.Tolerations {
		if t.Effect == "" || t.Effect == corev1.TaintEffectPreferNoSchedule {
			tolerations = append(tolerations, t)
		}
	}
	if len(out) == 0 && len(tolerations) == 0 { // most pods: one answer for all
		if c.untolerant.version != c.version || c.untolerant.scores == nil {
			c.untolerant = cachedPreferences{version: c.version, scores: c.taintScores(nil)}
		}
		return c.untolerant.scores
	}
	for name, v := range c.taintScores(tolerations) {
		out[name] += v
	}
	if c.preferred == nil {
		c.preferred = map[cluster.JobID]cachedPreferences{}
	}
	c.preferred[id] = cachedPreferences{version: c.version, scores: out}
	return out
}

// taintScores are TaintToleration's scores, less an untainted node's:
// each node's PreferNoSchedule taints the tolerations do not tolerate,
// normalized reversed over the nodes (an untainted node scores 100).
func (c *nodeConstraints) taintScores(tolerations []corev1.Toleration) map[string]float64 {
	out := map[string]float64{}
	raw := map[string]int64{}
	var top int64
	for name, n := range c.nodes {
		for i := range n.Spec.Taints {
			t := &n.Spec.Taints[i]
			if t.Effect == corev1.TaintEffectPreferNoSchedule && !schedcorev1.TolerationsTolerateTaint(klog.Background(), tolerations, t, false) {
				raw[name]++
			}
		}
		top = max(top, raw[name])
	}
	for name, k := range raw {
		if k > 0 {
			out[name] -= weightTaintToleration * float64(maxNodeScore*k/top)
		}
	}
	return out
}

type cachedPreferences struct {
	version uint64
	scores  map[string]float64
}

// podPreferencesLocked adds to out the part of NodePreferences that the
// pods bound change: InterPodAffinity's and PodTopologySpread's scores,
// each less what a node with no pod of interest scores.
func (b *Backend) podPreferencesLocked(p *corev1.Pod, out map[string]float64) {
	c := &b.constraints
	l := b.podListerLocked(nil)
	own, myNS := labels.Set(p.Labels), l.nsLabels(p.Namespace)
	// InterPodAffinity: weights summed by domain.
	mine := preferredTerms(p)
	domains := map[string]map[string]int64{}
	add := func(key, value string, w int64) {
		if domains[key] == nil {
			domains[key] = map[string]int64{}
		}
		domains[key][value] += w
	}
	for _, t := range mine {
		for e := range l.termPods(&t.affinityTerm) {
			if n := c.nodes[e.node]; n != nil {
				if v, ok := n.Labels[t.topologyKey]; ok && t.matches(e.namespace, e.labels, l.nsLabels(e.namespace)) {
					add(t.topologyKey, v, t.weight)
				}
			}
		}
	}
	for _, e := range c.pods.attractors {
		n := c.nodes[e.node]
		if n == nil {
			continue
		}
		for _, t := range e.affinity {
			if v, ok := n.Labels[t.topologyKey]; ok && t.matches(p.Namespace, own, myNS) {
				add(t.topologyKey, v, hardPodAffinityWeight)
			}
		}
		for _, t := range e.preferred {
			if v, ok := n.Labels[t.topologyKey]; ok && t.matches(p.Namespace, own, myNS) {
				add(t.topologyKey, v, t.weight)
			}
		}
	}
	if len(domains) > 0 {
		raw := map[string]int64{}
		lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
		for name, n := range c.nodes {
			var s int64
			for key, values := range domains {
				if v, ok := n.Labels[key]; ok {
					s += values[v]
				}
			}
			if s != 0 {
				raw[name] = s
			}
			lo, hi = min(lo, s), max(hi, s)
		}
		if hi > lo {
			base := int64(maxNodeScore * float64(-lo) / float64(hi-lo)) // a node in no domain
			for name, s := range raw {
				out[name] += weightInterPod * float64(int64(maxNodeScore*float64(s-lo)/float64(hi-lo))-base)
			}
		}
	}
	b.spreadPreferencesLocked(p, out)
}

// spreadPreferencesLocked adds PodTopologySpread's score for the pod's
// ScheduleAnyway constraints: fewer matching pods in a node's domain is
// better, each constraint weighted by the log of its number of domains.
// Nodes without every key score 0. The domains are those of all nodes
// (kube-scheduler's, of the nodes that passed its filters).
func (b *Backend) spreadPreferencesLocked(p *corev1.Pod, out map[string]float64) {
	c := &b.constraints
	spread, err := spreadConstraints(p, corev1.ScheduleAnyway)
	if err != nil || len(spread) == 0 {
		return
	}
	required := nodeaffinity.GetRequiredNodeAffinity(p)
	counts := make([]map[string]int64, len(spread))
	weights := make([]float64, len(spread))
	onNode := make([]map[string]int64, len(spread)) // hostname constraints count by node
	keyed := 0
	for i := range spread {
		counts[i], onNode[i] = map[string]int64{}, map[string]int64{}
	}
	for _, n := range c.nodes {
		if !hasSpreadKeys(n.Labels, spread) {
			continue
		}
		keyed++
		for i, sc := range spread {
			if sc.topologyKey != corev1.LabelHostname {
				if _, ok := counts[i][n.Labels[sc.topologyKey]]; !ok {
					counts[i][n.Labels[sc.topologyKey]] = 0
				}
			}
		}
	}
	for i, sc := range spread {
		size := len(counts[i])
		if sc.topologyKey == corev1.LabelHostname {
			size = keyed
		}
		weights[i] = math.Log(float64(size + 2))
	}
	l := b.podListerLocked(nil)
	for i, sc := range spread {
		if sc.selector.Empty() {
			continue // an empty selector counts no pod, as kube-scheduler's countPodsMatchSelector
		}
		for e := range l.namespacePods(p.Namespace, sc.selector) {
			n := c.nodes[e.node]
			if n == nil || e.terminating || !hasSpreadKeys(n.Labels, spread) || !sc.selector.Matches(e.labels) || !sc.includes(p, n, required) {
				continue
			}
			if sc.topologyKey == corev1.LabelHostname {
				onNode[i][n.Name]++
			} else if _, ok := counts[i][n.Labels[sc.topologyKey]]; ok {
				counts[i][n.Labels[sc.topologyKey]]++
			}
		}
	}
	score := func(n *corev1.Node) (int64, bool) {
		if !hasSpreadKeys(n.Labels, spread) {
			return 0, false
		}
		var s float64
		for i, sc := range spread {
			cnt := counts[i][n.Labels[sc.topologyKey]]
			if sc.topologyKey == corev1.LabelHostname {
				cnt = onNode[i][n.Name]
			}
			s += float64(cnt)*weights[i] + float64(sc.maxSkew-1)
		}
		return int64(math.Round(s)), true
	}
	raw := map[string]int64{}
	ignored := map[string]bool{}
	lo, hi := int64(math.MaxInt64), int64(0)
	for name, n := range c.nodes {
		s, ok := score(n)
		if !ok {
			ignored[name] = true
			continue
		}
		raw[name] = s
		lo, hi = min(lo, s), max(hi, s)
	}
	normalize := func(s int64) int64 {
		if hi == 0 {
			return maxNodeScore
		}
		return maxNodeScore * (hi + lo - s) / hi
	}
	var empty float64 // what a node with no matching pod in its domains scores
	for _, sc := range spread {
		empty += float64(sc.maxSkew - 1)
	}
	base := normalize(int64(math.Round(empty)))
	for name := range c.nodes {
		v := -base // an ignored node scores 0
		if !ignored[name] {
			v = normalize(raw[name]) - base
		}
		if v != 0 {
			out[name] += weightSpread * float64(v)
		}
	}
}
