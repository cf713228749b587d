package kubernetes

import (
	"context"
	"maps"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/interpodaffinity"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodeaffinity"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/noderesources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/podtopologyspread"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/tainttoleration"
	plugintesting "k8s.io/kubernetes/pkg/scheduler/framework/plugins/testing"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/metrics"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/service"
)

const zoneKey = "topology.kubernetes.io/zone"

// term is a required pod (anti-)affinity term selecting label k=v.
func term(k, v, topologyKey string) corev1.PodAffinityTerm {
	return corev1.PodAffinityTerm{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{k: v}}, TopologyKey: topologyKey}
}

// newZonedCluster is a test cluster of four 8-GPU nodes with their
// hostname labels, a and b in zone z1, c and d in z2, with the taints
// given by node.
func newZonedCluster(t *testing.T, taints map[string][]corev1.Taint) *testCluster {
	c := newTestCluster(t)
	for _, n := range []string{"a", "b", "c", "d"} {
		c.addNode(n, 8, "r1")
		zone := map[string]string{"a": "z1", "b": "z1", "c": "z2", "d": "z2"}[n]
		c.label(n, map[string]string{corev1.LabelHostname: n, zoneKey: zone}, taints[n]...)
	}
	return c
}

// otherPod creates another scheduler's pod, bound to node.
func (c *testCluster) otherPod(name, node string, labels map[string]string, mod func(*corev1.Pod)) {
	c.t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ml", Labels: labels},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "svc", Image: "example/svc:1"}}}}
	if mod != nil {
		mod(p)
	}
	if _, err := c.admin.CoreV1().Pods("ml").Create(c.ctx, p, metav1.CreateOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

// schedulerView is the cluster as kube-scheduler's framework sees it when
// it schedules pod: a snapshot of the nodes and of the pods bound (pod
// aside), its node infos, and the namespaces for the plugins' informers.
func (c *testCluster) schedulerView(pod *corev1.Pod) (*cache.Snapshot, []fwk.NodeInfo, []runtime.Object) {
	c.t.Helper()
	nodes, err := c.admin.CoreV1().Nodes().List(c.ctx, metav1.ListOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	pods, err := c.admin.CoreV1().Pods("").List(c.ctx, metav1.ListOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	namespaces, err := c.admin.CoreV1().Namespaces().List(c.ctx, metav1.ListOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	var ns []*corev1.Node
	for i := range nodes.Items {
		ns = append(ns, &nodes.Items[i])
	}
	var bound []*corev1.Pod
	for i := range pods.Items {
		if p := &pods.Items[i]; p.Spec.NodeName != "" && p.Name != pod.Name {
			bound = append(bound, p)
		}
	}
	var objs []runtime.Object
	for i := range namespaces.Items {
		objs = append(objs, &namespaces.Items[i])
	}
	metrics.Register() // the plugins' parallel loops count themselves
	snapshot := cache.NewSnapshot(bound, ns)
	infos, err := snapshot.NodeInfos().List()
	if err != nil {
		c.t.Fatal(err)
	}
	return snapshot, infos, objs
}

// schedulerFeasible are the nodes kube-scheduler's NodeResourcesFit,
// InterPodAffinity and PodTopologySpread plugins let the pod take, with the pods bound now,
// as its framework runs them (PreFilter, then Filter on every node), the
// feature gates at their defaults.
func (c *testCluster) schedulerFeasible(pod *corev1.Pod) []string {
	c.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	snapshot, infos, objs := c.schedulerView(pod)
	fts := feature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate)
	fit := &config.NodeResourcesFitArgs{ScoringStrategy: &config.ScoringStrategy{Type: config.LeastAllocated,
		Resources: []config.ResourceSpec{{Name: "cpu", Weight: 1}, {Name: "memory", Weight: 1}}}}
	plugins := []fwk.Plugin{
		plugintesting.SetupPluginWithInformers(ctx, c.t, frameworkruntime.FactoryAdapter(fts, noderesources.NewFit), fit, snapshot, objs),
		plugintesting.SetupPluginWithInformers(ctx, c.t, frameworkruntime.FactoryAdapter(fts, interpodaffinity.New), &config.InterPodAffinityArgs{}, snapshot, objs),
		plugintesting.SetupPluginWithInformers(ctx, c.t, frameworkruntime.FactoryAdapter(fts, podtopologyspread.New),
			&config.PodTopologySpreadArgs{DefaultingType: config.ListDefaulting}, snapshot, objs),
	}
	ok := map[string]bool{}
	for _, info := range infos {
		ok[info.Node().Name] = true
	}
	for _, pl := range plugins {
		state := framework.NewCycleState()
		_, st := pl.(fwk.PreFilterPlugin).PreFilter(ctx, state, pod, infos)
		if st.IsSkip() {
			continue
		}
		for _, info := range infos {
			if !st.IsSuccess() || !pl.(fwk.FilterPlugin).Filter(ctx, state, pod, info).IsSuccess() {
				ok[info.Node().Name] = false
			}
		}
	}
	var out []string
	for _, name := range slices.Sorted(maps.Keys(ok)) {
		if ok[name] {
			out = append(out, name)
		}
	}
	return out
}

// Pods whose CPU request, pod affinity, anti-affinity or topology spread
// meets the pods already bound (another scheduler's here) are allowed
// exactly the nodes kube-scheduler's NodeResourcesFit, InterPodAffinity
// and PodTopologySpread plugins find feasible and bind only there; those
// that fit nowhere stay pending saying why. A gang whose members repel
// each other by host lands on as many nodes as it has members.
func TestPodsKeepTheirRoomAffinityAntiAffinityAndSpread(t *testing.T) {
	c := newZonedCluster(t, nil)
	c.otherPod("cache", "a", map[string]string{"app": "cache"}, nil)
	c.otherPod("db", "c", map[string]string{"app": "db"}, func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term("role", "noisy", corev1.LabelHostname)}}}
	})
	c.otherPod("s1", "a", map[string]string{"app": "spread"}, nil)
	c.otherPod("s2", "b", map[string]string{"app": "spread"}, nil)
	c.otherPod("busy", "d", nil, func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("60")}
	})
	cpu := func(q string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(q)}
		}
	}

	affinity := func(terms ...corev1.PodAffinityTerm) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: terms}}
		}
	}
	labelled := func(k, v string, then func(*corev1.Pod)) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Labels[k] = v
			if then != nil {
				then(p)
			}
		}
	}
	pods := map[string]func(*corev1.Pod){
		"cpu-8":   cpu("8"),
		"cpu-100": cpu("100"),
		"disk": func(p *corev1.Pod) { // no node here reports ephemeral storage
			p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse("1Gi")}
		},
		"near-cache": affinity(term("app", "cache", zoneKey)),
		"away-cache": func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term("app", "cache", corev1.LabelHostname)}}}
		},
		"noisy":  labelled("role", "noisy", nil),
		"first":  labelled("app", "web", affinity(term("app", "web", zoneKey))),
		"orphan": affinity(term("app", "web", zoneKey), term("app", "cache", zoneKey)),
		"spread": labelled("app", "spread", func(p *corev1.Pod) {
			p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: zoneKey,
				WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "spread"}}}}
		}),
	}
	want := map[string][]string{
		"near-cache": {"a", "b"}, "away-cache": {"b", "c", "d"}, "noisy": {"a", "b", "d"},
		"first": {"a", "b", "c", "d"}, "orphan": nil, "spread": {"c", "d"}, "cpu-8": {"a", "b", "c"}, "cpu-100": nil, "disk": nil,
	}
	// An advisor plans and binds nothing: every pod sees the same pods bound.
	db := tempDB(t)
	advisor := c.startPrescient(db, service.ModeAdvisor)
	for _, name := range slices.Sorted(maps.Keys(pods)) {
		pod := c.createPodWith(name, podOpts{gpus: 2}, pods[name])
		sched := c.schedulerFeasible(pod)
		if !slices.Equal(sched, want[name]) {
			t.Fatalf("%s: kube-scheduler's filters find %v feasible; the test expects %v", name, sched, want[name])
		}
		id := cluster.JobID(c.jobOf(advisor, "k8s_pod", name).ID)
		allowed, why, constrained := advisor.backend.AllowedNodes(id)
		if !constrained {
			allowed = []string{"a", "b", "c", "d"}
		}
		if !slices.Equal(allowed, sched) && len(allowed)+len(sched) > 0 {
			t.Errorf("%s: the backend allows %v (constrained %v, %q), kube-scheduler's filters %v", name, allowed, constrained, why, sched)
		}
	}
	advisor.stop()

	// On autopilot each pod binds within its nodes; none of them changes
	// another's.
	p := c.startPrescient(db, service.ModeAutopilot)
	for name, nodes := range want {
		if len(nodes) == 0 {
			continue
		}
		if node := c.bound(name); !slices.Contains(nodes, node) {
			t.Errorf("%s bound to %s, outside %v", name, node, nodes)
		}
	}
	for name, why := range map[string]string{
		"orphan":  "0/4 nodes are available: 4 node(s) didn't match pod affinity rules.",
		"cpu-100": "0/4 nodes are available: 4 Insufficient cpu.",
		"disk":    "0/4 nodes are available: 4 Insufficient ephemeral-storage.",
	} {
		c.staysPending(p, name, why)
	}

	// Two workers that repel each other by host, 2 GPUs each: best fit
	// would pack them on one node; they land on two.
	for _, name := range []string{"w-0", "w-1"} {
		c.createPodWith(name, podOpts{gpus: 2, gang: "w", gangSize: 2}, labelled("role", "worker", func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term("role", "worker", corev1.LabelHostname)}}}
		}))
	}
	if a, b := c.bound("w-0"), c.bound("w-1"); a == b {
		t.Errorf("the workers that repel each other share node %s", a)
	}
}

// schedulerScores are kube-scheduler's scores of every node for the pod
// by its default profile's preference plugins (NodeAffinity 2,
// TaintToleration 3, InterPodAffinity 2, PodTopologySpread 2), each
// normalized by the plugin over the nodes and weighted, with the pods
// bound now.
func (c *testCluster) schedulerScores(pod *corev1.Pod) map[string]int64 {
	c.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	snapshot, infos, objs := c.schedulerView(pod)
	fts := feature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate)
	setup := func(f frameworkruntime.PluginFactory, args runtime.Object) fwk.Plugin {
		return plugintesting.SetupPluginWithInformers(ctx, c.t, f, args, snapshot, objs)
	}
	plugins := []struct {
		pl     fwk.Plugin
		weight int64
	}{
		{setup(frameworkruntime.FactoryAdapter(fts, nodeaffinity.New), &config.NodeAffinityArgs{}), 2},
		{setup(frameworkruntime.FactoryAdapter(fts, tainttoleration.New), nil), 3},
		{setup(frameworkruntime.FactoryAdapter(fts, interpodaffinity.New), &config.InterPodAffinityArgs{HardPodAffinityWeight: 1}), 2},
		{setup(frameworkruntime.FactoryAdapter(fts, podtopologyspread.New), &config.PodTopologySpreadArgs{DefaultingType: config.ListDefaulting}), 2},
	}
	total := map[string]int64{}
	for _, p := range plugins {
		state := framework.NewCycleState()
		if st := p.pl.(fwk.PreScorePlugin).PreScore(ctx, state, pod, infos); st.IsSkip() {
			continue
		} else if !st.IsSuccess() {
			c.t.Fatalf("%s PreScore: %v", p.pl.Name(), st.AsError())
		}
		scores := make(fwk.NodeScoreList, len(infos))
		for i, info := range infos {
			s, st := p.pl.(fwk.ScorePlugin).Score(ctx, state, pod, info)
			if !st.IsSuccess() {
				c.t.Fatalf("%s Score: %v", p.pl.Name(), st.AsError())
			}
			scores[i] = fwk.NodeScore{Name: info.Node().Name, Score: s}
		}
		if ext := p.pl.(fwk.ScorePlugin).ScoreExtensions(); ext != nil {
			if st := ext.NormalizeScore(ctx, state, pod, scores); !st.IsSuccess() {
				c.t.Fatalf("%s NormalizeScore: %v", p.pl.Name(), st.AsError())
			}
		}
		for _, s := range scores {
			total[s.Name] += p.weight * s.Score
		}
	}
	return total
}

// Pods with preferences (preferred node and pod affinity, a
// PreferNoSchedule taint they do not tolerate, ScheduleAnyway spread) get
// the differences between nodes that kube-scheduler's own scoring plugins
// give, and bind to a node those plugins rank first.
func TestPodsGoWhereTheirPreferencesRankNodesFirst(t *testing.T) {
	c := newZonedCluster(t, map[string][]corev1.Taint{"b": {{Key: "spot", Effect: corev1.TaintEffectPreferNoSchedule}}})
	c.otherPod("cache", "a", map[string]string{"app": "cache"}, nil)
	c.otherPod("s1", "a", map[string]string{"app": "spread"}, nil)
	c.otherPod("web", "c", map[string]string{"app": "web"}, func(p *corev1.Pod) { // it likes batch pods near it
		p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{
			{Weight: 20, PodAffinityTerm: term("kind", "batch", corev1.LabelHostname)}}}}
	})
	pods := map[string]func(*corev1.Pod){
		"likes-z2": func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{
				{Weight: 10, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: zoneKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"z2"}}}}}}}}
		},
		"near-cache": func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{
				{Weight: 5, PodAffinityTerm: term("app", "cache", zoneKey)}}}}
		},
		"away-cache": func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{
				{Weight: 50, PodAffinityTerm: term("app", "cache", zoneKey)}}}}
		},
		"batch": func(p *corev1.Pod) { p.Labels["kind"] = "batch" },
		"soft": func(p *corev1.Pod) {
			p.Labels["app"] = "spread"
			p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: zoneKey,
				WhenUnsatisfiable: corev1.ScheduleAnyway, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "spread"}}}}
		},
	}
	db := tempDB(t)
	advisor := c.startPrescient(db, service.ModeAdvisor)
	best := map[string][]string{}
	for _, name := range slices.Sorted(maps.Keys(pods)) {
		pod := c.createPodWith(name, podOpts{gpus: 2}, pods[name])
		sched := c.schedulerScores(pod)
		top := slices.Max(slices.Collect(maps.Values(sched)))
		for _, n := range slices.Sorted(maps.Keys(sched)) {
			if sched[n] == top {
				best[name] = append(best[name], n)
			}
		}
		id := cluster.JobID(c.jobOf(advisor, "k8s_pod", name).ID)
		prefs := advisor.backend.NodePreferences(id)
		for _, x := range []string{"a", "b", "c", "d"} {
			for _, y := range []string{"a", "b", "c", "d"} {
				if got, want := prefs[x]-prefs[y], float64(sched[x]-sched[y]); got != want {
					t.Errorf("%s: the backend prefers %s to %s by %v, kube-scheduler by %v (backend %v, scheduler %v)",
						name, x, y, got, want, prefs, sched)
				}
			}
		}
	}
	if want := map[string][]string{"likes-z2": {"c", "d"}, "near-cache": {"a"}, "away-cache": {"c", "d"}, "batch": {"c"}, "soft": {"c", "d"}}; !maps.EqualFunc(best, want, slices.Equal) {
		t.Fatalf("kube-scheduler ranks first %v; the test expects %v", best, want)
	}
	advisor.stop()

	c.startPrescient(db, service.ModeAutopilot)
	for name, nodes := range best {
		if node := c.bound(name); !slices.Contains(nodes, node) {
			t.Errorf("%s bound to %s; kube-scheduler ranks %v first", name, node, nodes)
		}
	}
}
