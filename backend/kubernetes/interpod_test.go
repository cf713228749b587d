package kubernetes

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
)

// hostNode is a GPU node with its hostname label and more.
func hostNode(name string, labels map[string]string) *corev1.Node {
	l := map[string]string{corev1.LabelHostname: name}
	for k, v := range labels {
		l[k] = v
	}
	return gpuNode(name, 8, l)
}

// otherPod is another scheduler's pod, bound to node and running.
func otherPod(ns, name, node string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec:   corev1.PodSpec{SchedulerName: "default-scheduler", NodeName: node, Containers: []corev1.Container{{Name: "main", Image: "svc"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
}

// withSpread gives the pod a DoNotSchedule zone spread constraint.
func withSpread(p *corev1.Pod, maxSkew int32, sel *metav1.LabelSelector) *corev1.Pod {
	p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: maxSkew, TopologyKey: zone,
		WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: sel}}
	return p
}

// term is a required pod (anti-)affinity term selecting label k=v.
func term(k, v, topologyKey string) corev1.PodAffinityTerm {
	return corev1.PodAffinityTerm{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{k: v}}, TopologyKey: topologyKey}
}

func withAffinity(p *corev1.Pod, affinity, anti []corev1.PodAffinityTerm) *corev1.Pod {
	p.Spec.Affinity = &corev1.Affinity{}
	if affinity != nil {
		p.Spec.Affinity.PodAffinity = &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: affinity}
	}
	if anti != nil {
		p.Spec.Affinity.PodAntiAffinity = &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: anti}
	}
	return p
}

const zone = "topology.kubernetes.io/zone"

// jobsOfPods waits until each named pod has a job and bound pods are
// indexed, and returns the jobs by pod name.
func (e *fakeEnv) jobsOfPods(names []string, bound int) map[string]cluster.JobID {
	e.t.Helper()
	ids := map[string]cluster.JobID{}
	eventually(e.t, "the pods' jobs and the pods bound", func() bool {
		for _, name := range names {
			if ids[name] = e.jobOfPod(name); ids[name] == "" {
				return false
			}
		}
		e.backend.mu.Lock()
		defer e.backend.mu.Unlock()
		return len(e.backend.constraints.pods.all) == bound
	})
	return ids
}

// runtimeObjects are nodes and pods for the fake client.
func runtimeObjects(nodes []*corev1.Node, pods []*corev1.Pod, more ...map[string]*corev1.Pod) []runtime.Object {
	var out []runtime.Object
	for _, n := range nodes {
		out = append(out, n)
	}
	for _, p := range pods {
		out = append(out, p)
	}
	for _, m := range more {
		for _, name := range slices.Sorted(maps.Keys(m)) {
			out = append(out, m[name])
		}
	}
	return out
}

// The filters that read the pods bound: a pod goes where the pods it must
// join are, away from those it repels and those that repel it, and where
// its spread keeps within maxSkew; a node without a term's key is turned
// away. A node that a pod bound after the plan rules out makes Start say
// the plan is stale, and a pod Start binds counts at once.
func TestPodAffinityAntiAffinityAndSpreadReadThePodsBound(t *testing.T) {
	nodes := []*corev1.Node{
		hostNode("a", map[string]string{zone: "z1"}), hostNode("b", map[string]string{zone: "z1"}),
		hostNode("c", map[string]string{zone: "z2"}), hostNode("d", map[string]string{zone: "z2"}),
		hostNode("e", nil), // no zone
	}
	db := withAffinity(otherPod("ml", "db", "c", map[string]string{"app": "db"}), nil,
		[]corev1.PodAffinityTerm{term("role", "noisy", corev1.LabelHostname)})
	spread := func(name string) *corev1.Pod {
		p := gpuPod("ml", name, 1, map[string]string{"app": "spread"})
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: zone,
			WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "spread"}}}}
		return p
	}
	pods := map[string]*corev1.Pod{
		"near-cache": withAffinity(gpuPod("ml", "near-cache", 1, nil), []corev1.PodAffinityTerm{term("app", "cache", zone)}, nil),
		"away-cache": withAffinity(gpuPod("ml", "away-cache", 1, nil), nil, []corev1.PodAffinityTerm{term("app", "cache", corev1.LabelHostname)}),
		"noisy":      gpuPod("ml", "noisy", 1, map[string]string{"role": "noisy"}),
		"first":      withAffinity(gpuPod("ml", "first", 1, map[string]string{"app": "web"}), []corev1.PodAffinityTerm{term("app", "web", zone)}, nil),
		"orphan":     withAffinity(gpuPod("ml", "orphan", 1, nil), []corev1.PodAffinityTerm{term("app", "web", zone)}, nil),
		"spread":     spread("spread"),
		// The review's cases: an empty spread selector counts no pod; a
		// value named twice counts each pod once (maxSkew 3: z1's 2 + 1
		// fit, 4 + 1 would not); a namespace selector that picks the pod's
		// own namespace makes it the first of its kind.
		"spread-all": withSpread(gpuPod("ml", "spread-all", 1, map[string]string{"app": "spread"}), 1, &metav1.LabelSelector{}),
		"spread-dup": withSpread(gpuPod("ml", "spread-dup", 1, map[string]string{"app": "spread"}), 3, &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"spread", "spread"}}}}),
		"first-ns": withAffinity(gpuPod("ml", "first-ns", 1, map[string]string{"app": "web2"}), []corev1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web2"}}, TopologyKey: zone,
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "ml"}}}}, nil),
	}
	objs := []*corev1.Pod{otherPod("ml", "cache", "a", map[string]string{"app": "cache"}), db,
		otherPod("ml", "s1", "a", map[string]string{"app": "spread"}), otherPod("ml", "s2", "b", map[string]string{"app": "spread"}),
		otherPod("other", "s3", "c", map[string]string{"app": "spread"})} // another namespace: not counted
	ml := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ml", Labels: map[string]string{"team": "ml"}}}
	e := newFakeEnv(t, append(runtimeObjects(nodes, objs, pods), ml)...)
	e.watch()
	want := map[string][]string{
		"near-cache": {"a", "b"},
		"away-cache": {"b", "c", "d", "e"},
		"noisy":      {"a", "b", "d", "e"},
		"first":      {"a", "b", "c", "d"}, // no web pod anywhere, and it is one: any node with a zone
		"orphan":     {},
		"spread":     {"c", "d"}, // z1 has 2, z2 none
		"spread-all": {"a", "b", "c", "d"},
		"spread-dup": {"a", "b", "c", "d"},
		"first-ns":   {"a", "b", "c", "d"},
	}
	ids := e.jobsOfPods(slices.Collect(maps.Keys(want)), 5)
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range want {
			yield(k)
		}
	}) {
		got, why, constrained := e.backend.AllowedNodes(ids[name])
		if !constrained || !slices.Equal(got, want[name]) && len(got)+len(want[name]) > 0 {
			t.Errorf("%s: nodes %v (constrained %v, %q), want %v", name, got, constrained, why, want[name])
		}
	}
	if _, why, _ := e.backend.AllowedNodes(ids["orphan"]); why != "0/5 nodes are available: 5 node(s) didn't match pod affinity rules." {
		t.Errorf("orphan: why %q", why)
	}

	// A cache pod lands on b after the plan: away-cache's start there is stale.
	e.create(otherPod("ml", "cache-2", "b", map[string]string{"app": "cache"}))
	eventually(t, "cache-2 seen", func() bool {
		got, _, _ := e.backend.AllowedNodes(ids["away-cache"])
		return !slices.Contains(got, "b")
	})
	err := e.backend.Start(e.ctx, assignment(ids["away-cache"], 1, 1, []string{"b"}, []int{1}))
	if !errors.Is(err, executor.ErrPlanStale) {
		t.Fatalf("start on a node a pod bound since rules out: %v, want ErrPlanStale", err)
	}
	// The noisy pod starts on d: from the moment Start returns, a second
	// pod that repels noisy ones may not go there.
	if err := e.backend.Start(e.ctx, assignment(ids["noisy"], 1, 1, []string{"d"}, []int{1})); err != nil {
		t.Fatal(err)
	}
	quiet := withAffinity(gpuPod("ml", "quiet", 1, nil), nil, []corev1.PodAffinityTerm{term("role", "noisy", corev1.LabelHostname)})
	e.create(quiet)
	var id cluster.JobID
	eventually(t, "quiet's job", func() bool { id = e.jobOfPod("quiet"); return id != "" })
	if got, _, _ := e.backend.AllowedNodes(id); slices.Contains(got, "d") {
		t.Errorf("quiet may go to d, where noisy was just bound: %v", got)
	}
}

// A gang whose members repel each other by host, or take the same host
// port, is planned one member per node (TaskLimits' apart); Start refuses two
// members on one node, naming the rule, and binds members on nodes apart.
func TestAGangWhoseMembersRepelEachOtherGoesApart(t *testing.T) {
	nodes := []*corev1.Node{hostNode("a", nil), hostNode("b", nil)}
	pods := map[string]*corev1.Pod{}
	for _, name := range []string{"w-0", "w-1"} {
		l := gang("w", 2)
		l["role"] = "worker"
		pods[name] = withAffinity(gpuPod("ml", name, 2, l), nil, []corev1.PodAffinityTerm{term("role", "worker", corev1.LabelHostname)})
	}
	plain := map[string]*corev1.Pod{}
	for _, name := range []string{"p-0", "p-1"} {
		plain[name] = gpuPod("ml", name, 2, gang("p", 2))
	}
	for _, name := range []string{"h-0", "h-1"} {
		plain[name] = gpuPod("ml", name, 2, gang("h", 2))
		plain[name].Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 7000, HostPort: 7000}}
	}
	e := newFakeEnv(t, runtimeObjects(nodes, nil, pods, plain)...)
	e.watch()
	var w, p, h cluster.JobID
	eventually(t, "the gangs' jobs", func() bool {
		w, p, h = e.jobOfPod("w-0"), e.jobOfPod("p-0"), e.jobOfPod("h-0")
		return w != "" && p != "" && h != ""
	})
	apart := func(id cluster.JobID) bool { a, _ := e.backend.TaskLimits(id); return a }
	if !apart(w) || apart(p) || !apart(h) {
		t.Errorf("apart: repelling gang %v, plain gang %v, ported gang %v", apart(w), apart(p), apart(h))
	}
	if err := e.backend.Start(e.ctx, assignment(h, 1, 4, []string{"a"}, []int{4})); !errors.Is(err, ErrInvalidAssignment) ||
		!strings.Contains(err.Error(), "free ports") {
		t.Errorf("both ported members on a: %v", err)
	}
	err := e.backend.Start(e.ctx, assignment(w, 1, 4, []string{"a"}, []int{4}))
	if !errors.Is(err, ErrInvalidAssignment) || errors.Is(err, executor.ErrPlanStale) {
		t.Fatalf("both members on a: %v, want ErrInvalidAssignment", err)
	}
	if err := e.backend.Start(e.ctx, assignment(w, 2, 4, []string{"a", "b"}, []int{2, 2})); err != nil {
		t.Fatal(err)
	}
	e.next(executor.JobStarted)
}

// Preferences score nodes as kube-scheduler's plugins would, relative to
// a node that nothing concerns: preferred node affinity (+2×100 on the
// preferred nodes), an untolerated PreferNoSchedule taint (−3×100),
// preferred pod affinity (+2×100 on the domain of the pod it likes), and
// ScheduleAnyway spread (−2×100 on the fuller zone). A pod that tolerates
// the taint and prefers nothing has no preference.
func TestPreferencesScoreNodesAsKubeSchedulerWeighsThem(t *testing.T) {
	nodes := []*corev1.Node{
		hostNode("a", map[string]string{zone: "z1"}),
		tainted(hostNode("b", map[string]string{zone: "z1"}), "spot", "", corev1.TaintEffectPreferNoSchedule),
		hostNode("c", map[string]string{zone: "z2"}), hostNode("d", map[string]string{zone: "z2"}),
	}
	likesZ2 := gpuPod("ml", "likes-z2", 1, nil)
	likesZ2.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{
		{Weight: 10, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: zone, Operator: corev1.NodeSelectorOpIn, Values: []string{"z2"}}}}}}}}
	tolerant := gpuPod("ml", "tolerant", 1, nil)
	tolerant.Spec.Tolerations = []corev1.Toleration{{Key: "spot", Operator: corev1.TolerationOpExists}}
	nearCache := gpuPod("ml", "near-cache", 1, nil)
	nearCache.Spec.Tolerations = tolerant.Spec.Tolerations
	nearCache.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{
		{Weight: 5, PodAffinityTerm: term("app", "cache", zone)}}}}
	soft := gpuPod("ml", "soft", 1, map[string]string{"app": "spread"})
	soft.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: zone,
		WhenUnsatisfiable: corev1.ScheduleAnyway, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "spread"}}}}
	pods := map[string]*corev1.Pod{"likes-z2": likesZ2, "tolerant": tolerant, "near-cache": nearCache, "soft": soft}
	e := newFakeEnv(t, runtimeObjects(nodes, []*corev1.Pod{otherPod("ml", "cache", "a", map[string]string{"app": "cache"}),
		otherPod("ml", "s1", "a", map[string]string{"app": "spread"})}, pods)...)
	e.watch()
	want := map[string]map[string]float64{
		"likes-z2":   {"b": -300, "c": 200, "d": 200},
		"tolerant":   nil,
		"near-cache": {"a": 200, "b": 200},
		"soft":       {"a": -200, "b": -500},
	}
	ids := e.jobsOfPods(slices.Collect(maps.Keys(want)), 2)
	for name, w := range want {
		if got := e.backend.NodePreferences(ids[name]); !maps.Equal(got, w) {
			t.Errorf("%s: preferences %v, want %v", name, got, w)
		}
	}
}

// CPU, memory and the pod count limit nodes as kube-scheduler's
// NodeResourcesFit does, counting every pod bound there (another
// scheduler's, and Prescient's from the moment Start binds it); a plan
// that a later bind left without room is stale.
func TestCPUAndMemoryRequestsNeedRoomOnTheNode(t *testing.T) {
	nodes := []*corev1.Node{hostNode("a", nil), hostNode("b", nil)} // 64 CPUs, 512Gi each
	asking := func(name, cpu, mem string) *corev1.Pod {
		p := gpuPod("ml", name, 1, nil)
		p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}
		return p
	}
	busy := otherPod("ml", "busy", "a", nil)
	busy.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("60")}
	pods := map[string]*corev1.Pod{"small": asking("small", "8", "1Gi"), "huge": asking("huge", "100", "1Gi"),
		"hungry": asking("hungry", "1", "600Gi"), "big": asking("big", "60", "1Gi")}
	e := newFakeEnv(t, runtimeObjects(nodes, []*corev1.Pod{busy}, pods)...)
	e.watch()
	ids := e.jobsOfPods(slices.Collect(maps.Keys(pods)), 1)
	for name, want := range map[string]struct {
		nodes []string
		why   string
	}{
		"small":  {[]string{"b"}, ""},
		"huge":   {nil, "0/2 nodes are available: 2 Insufficient cpu."},
		"hungry": {nil, "0/2 nodes are available: 2 Insufficient memory."},
	} {
		got, why, constrained := e.backend.AllowedNodes(ids[name])
		if !constrained || !slices.Equal(got, want.nodes) && len(got)+len(want.nodes) > 0 || why != want.why {
			t.Errorf("%s: nodes %v (constrained %v), why %q; want %v, %q", name, got, constrained, why, want.nodes, want.why)
		}
	}
	if err := e.backend.Start(e.ctx, assignment(ids["small"], 1, 1, []string{"b"}, []int{1})); err != nil {
		t.Fatal(err)
	}
	// big (60 CPUs) was planned on b before small took 8 of its 64.
	if err := e.backend.Start(e.ctx, assignment(ids["big"], 1, 1, []string{"b"}, []int{1})); !errors.Is(err, executor.ErrPlanStale) ||
		!strings.Contains(err.Error(), "Insufficient cpu") {
		t.Errorf("big on b after small: %v, want a stale plan for cpu", err)
	}
}

// A gang whose members' CPU requests do not all fit on one node says how
// many each node has room for, beside what is bound there; Start refuses
// more members on a node than its room.
func TestAGangSaysHowManyOfItsMembersEachNodeHasRoomFor(t *testing.T) {
	nodes := []*corev1.Node{hostNode("a", nil), hostNode("b", nil)} // 64 CPUs each
	busy := otherPod("ml", "busy", "b", nil)
	busy.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("30")}
	pods := map[string]*corev1.Pod{}
	for _, name := range []string{"g-0", "g-1", "g-2", "g-3"} {
		pods[name] = gpuPod("ml", name, 1, gang("g", 4))
		pods[name].Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("20")}
	}
	e := newFakeEnv(t, runtimeObjects(nodes, []*corev1.Pod{busy}, pods)...)
	e.watch()
	var id cluster.JobID
	eventually(t, "the gang's job and the pod bound", func() bool {
		id = e.jobOfPod("g-0")
		e.backend.mu.Lock()
		defer e.backend.mu.Unlock()
		return id != "" && len(e.backend.constraints.pods.all) == 1
	})
	apart, perNode := e.backend.TaskLimits(id)
	if apart || !maps.Equal(perNode, map[string]int{"a": 3, "b": 1}) {
		t.Errorf("apart %v, per node %v; want a 3 (64/20), b 1 (34/20)", apart, perNode)
	}
	err := e.backend.Start(e.ctx, assignment(id, 1, 4, []string{"a"}, []int{4}))
	if !errors.Is(err, ErrInvalidAssignment) || !strings.Contains(err.Error(), "Insufficient cpu") {
		t.Errorf("four members on a: %v, want the room named", err)
	}
	if err := e.backend.Start(e.ctx, assignment(id, 2, 4, []string{"a", "b"}, []int{3, 1})); err != nil {
		t.Fatal(err)
	}
}

// Ephemeral storage and extended resources other than NVIDIA's need room
// as CPU does: a node that offers none of a resource has no room for it.
func TestOtherResourcesNeedRoomOnTheNode(t *testing.T) {
	a, b := hostNode("a", nil), hostNode("b", nil)
	a.Status.Allocatable[corev1.ResourceEphemeralStorage] = resource.MustParse("100Gi")
	b.Status.Allocatable[corev1.ResourceEphemeralStorage] = resource.MustParse("100Gi")
	b.Status.Allocatable["example.com/fpga"] = resource.MustParse("2")
	scratch := otherPod("ml", "scratch", "a", nil)
	scratch.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse("80Gi")}
	asking := func(name string, r corev1.ResourceList) *corev1.Pod {
		p := gpuPod("ml", name, 1, nil)
		p.Spec.Containers[0].Resources.Requests = r
		return p
	}
	pods := map[string]*corev1.Pod{
		"disk":  asking("disk", corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse("50Gi")}),
		"fpga":  asking("fpga", corev1.ResourceList{"example.com/fpga": resource.MustParse("1")}),
		"fpgas": asking("fpgas", corev1.ResourceList{"example.com/fpga": resource.MustParse("3")}),
	}
	e := newFakeEnv(t, runtimeObjects([]*corev1.Node{a, b}, []*corev1.Pod{scratch}, pods)...)
	e.watch()
	ids := e.jobsOfPods(slices.Collect(maps.Keys(pods)), 1)
	for name, want := range map[string]struct {
		nodes []string
		why   string
	}{
		"disk":  {[]string{"b"}, ""}, // a's 100Gi hold 80Gi already
		"fpga":  {[]string{"b"}, ""},
		"fpgas": {nil, "0/2 nodes are available: 2 Insufficient example.com/fpga."},
	} {
		got, why, constrained := e.backend.AllowedNodes(ids[name])
		if !constrained || !slices.Equal(got, want.nodes) && len(got)+len(want.nodes) > 0 || why != want.why {
			t.Errorf("%s: nodes %v (constrained %v), why %q; want %v, %q", name, got, constrained, why, want.nodes, want.why)
		}
	}
}

// A host port counts from the moment Start binds its pod, before the
// informer shows the bind: a second pod asking for it in the same plan
// may not go there.
func TestAHostPortIsTakenOnceStartBindsItsPod(t *testing.T) {
	ported := func(name string) *corev1.Pod {
		p := gpuPod("ml", name, 1, nil)
		p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 7000, HostPort: 7000}}
		return p
	}
	pods := map[string]*corev1.Pod{"first": ported("first"), "second": ported("second")}
	e := newFakeEnv(t, runtimeObjects([]*corev1.Node{hostNode("a", nil), hostNode("b", nil)}, nil, pods)...)
	e.watch()
	ids := e.jobsOfPods([]string{"first", "second"}, 0)
	if err := e.backend.Start(e.ctx, assignment(ids["first"], 1, 1, []string{"a"}, []int{1})); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := e.backend.AllowedNodes(ids["second"]); !slices.Equal(got, []string{"b"}) {
		t.Errorf("second may go to %v, want b only: a's port 7000 is first's", got)
	}
}
