package kubernetes

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
)

// tainted is n with a taint.
func tainted(n *corev1.Node, key, value string, effect corev1.TaintEffect) *corev1.Node {
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Value: value, Effect: effect})
	return n
}

func TestAPodsNodeSelectorAffinityAndTolerationsChooseItsNodes(t *testing.T) {
	a := gpuNode("a", 8, map[string]string{"pool": "train", "zone": "z1"})
	b := gpuNode("b", 8, map[string]string{"pool": "train", "zone": "z2"})
	c := tainted(gpuNode("c", 8, map[string]string{"pool": "train", "zone": "z1"}), "dedicated", "infer", corev1.TaintEffectNoSchedule)
	d := tainted(gpuNode("d", 8, map[string]string{"pool": "infer"}), "maint", "", corev1.TaintEffectPreferNoSchedule) // a preference only

	free := gpuPod("ml", "free", 1, nil)
	selector := gpuPod("ml", "selector", 1, nil)
	selector.Spec.NodeSelector = map[string]string{"pool": "train"}
	affinity := gpuPod("ml", "affinity", 1, nil)
	affinity.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"z1"}}}}}}}}
	tolerant := gpuPod("ml", "tolerant", 1, nil)
	tolerant.Spec.NodeSelector = map[string]string{"zone": "z1"}
	tolerant.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "infer", Effect: corev1.TaintEffectNoSchedule}}
	nowhere := gpuPod("ml", "nowhere", 1, nil)
	nowhere.Spec.NodeSelector = map[string]string{"pool": "none"}

	e := newFakeEnv(t, a, b, c, d, free, selector, affinity, tolerant, nowhere)
	e.watch()
	want := map[string][]string{
		"free":     {"a", "b", "d"}, // c's NoSchedule taint turns it away
		"selector": {"a", "b"},
		"affinity": {"a"}, // z1 without the taint
		"tolerant": {"a", "c"},
		"nowhere":  {},
	}
	for name, nodes := range want {
		var id cluster.JobID
		eventually(t, "the job of pod "+name, func() bool { id = e.jobOfPod(name); return id != "" })
		got, why, constrained := e.backend.AllowedNodes(id)
		if !constrained || !slices.Equal(got, nodes) && !(len(got) == 0 && len(nodes) == 0) {
			t.Errorf("%s: nodes %v (constrained %v), want %v", name, got, constrained, nodes)
		}
		if name == "nowhere" && why != "0/4 nodes are available: 4 node(s) didn't match Pod's node affinity/selector." {
			t.Errorf("why %q", why)
		}
	}

	// The taint goes: the answers follow the node.
	c2 := c.DeepCopy()
	c2.Spec.Taints = nil
	if _, err := e.client.CoreV1().Nodes().Update(e.ctx, c2, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the untainted node allowed", func() bool {
		got, _, constrained := e.backend.AllowedNodes(e.jobOfPod("free"))
		return !constrained && got == nil
	})
	// A pod that tolerates nothing, on tainted nodes only: the taint named.
	_, why, _ := e.backend.AllowedNodes(e.jobOfPod("affinity"))
	if why != "" {
		t.Errorf("affinity: why %q with a node left", why)
	}
}

func TestTheTaintIsNamedWhenItTurnsEveryNodeAway(t *testing.T) {
	n := tainted(gpuNode("a", 8, nil), "nvidia.com/gpu", "present", corev1.TaintEffectNoExecute)
	e := newFakeEnv(t, n, gpuPod("ml", "p", 1, nil))
	e.watch()
	var id cluster.JobID
	eventually(t, "the pod's job", func() bool { id = e.jobOfPod("p"); return id != "" })
	nodes, why, constrained := e.backend.AllowedNodes(id)
	if !constrained || len(nodes) != 0 || why != "0/1 nodes are available: 1 node(s) had untolerated taint {nvidia.com/gpu: present}." {
		t.Errorf("nodes %v, constrained %v, why %q", nodes, constrained, why)
	}
}

// jobOfPod is the job of the named pod, "" before it has one.
func (e *fakeEnv) jobOfPod(name string) cluster.JobID {
	e.backend.mu.Lock()
	defer e.backend.mu.Unlock()
	for id, j := range e.backend.jobs {
		if _, ok := j.pods[name]; ok {
			return id
		}
	}
	return ""
}

// The taints of a node's state (cordoned, not ready) are the backend's own
// business, read from the node: they turn no pod away here, so parking may
// plan on the nodes it cordoned.
func TestNodeStateTaintsAreLeftToTheNodesState(t *testing.T) {
	n := tainted(gpuNode("a", 8, nil), corev1.TaintNodeUnschedulable, "", corev1.TaintEffectNoSchedule)
	e := newFakeEnv(t, n, gpuPod("ml", "p", 1, nil))
	e.watch()
	var id cluster.JobID
	eventually(t, "the pod's job", func() bool { id = e.jobOfPod("p"); return id != "" })
	if nodes, why, constrained := e.backend.AllowedNodes(id); constrained {
		t.Errorf("a cordon's taint constrains the pod: %v %q", nodes, why)
	}
}

// A pod's PriorityClass gives its tier where it has no prescient.io/tier
// label: as the backend's map says, production for the system classes;
// the label wins.
func TestAPriorityClassGivesTheTierTheLabelDoesNot(t *testing.T) {
	pod := func(name, class string, labels map[string]string) *corev1.Pod {
		p := gpuPod("ml", name, 1, labels)
		p.Spec.PriorityClassName = class
		return p
	}
	tiers := map[string]cluster.Tier{"research-high": cluster.TierProduction, "scavenger": cluster.TierOpportunistic}
	for _, tt := range []struct {
		pod  *corev1.Pod
		want cluster.Tier
	}{
		{pod("mapped", "scavenger", nil), cluster.TierOpportunistic},
		{pod("system", "system-cluster-critical", nil), cluster.TierProduction},
		{pod("unknown", "whatever", nil), cluster.DefaultTier},
		{pod("labelled", "research-high", map[string]string{LabelTier: "batch"}), cluster.TierBatch},
	} {
		pj, err := jobOfPod(tt.pod, noJobs)
		if err != nil {
			t.Fatal(err)
		}
		spec, err := specOf(pj, []*corev1.Pod{tt.pod}, tiers)
		if err != nil {
			t.Fatal(err)
		}
		if spec.Tier != tt.want {
			t.Errorf("%s (class %q): tier %s, want %s", tt.pod.Name, tt.pod.Spec.PriorityClassName, spec.Tier, tt.want)
		}
	}
}

// A pod's claims limit its nodes: a bound volume's node affinity, an
// unbound claim that binds at once (no node), a missing claim (no node),
// and a WaitForFirstConsumer class's allowed topologies.
func TestAPodsClaimsChooseItsNodes(t *testing.T) {
	local := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "local-b"},
		Spec: corev1.PersistentVolumeSpec{NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
			{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{"b"}}}}}}}}}
	immediate, wffc := storagev1.VolumeBindingImmediate, storagev1.VolumeBindingWaitForFirstConsumer
	fast := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "fast"}, Provisioner: "example.com/fast", VolumeBindingMode: &immediate}
	zonal := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "zonal"}, Provisioner: "example.com/zonal", VolumeBindingMode: &wffc,
		AllowedTopologies: []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: "zone", Values: []string{"z1"}}}}}}
	claim := func(name, class, volume string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name},
			Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &class, VolumeName: volume}}
	}
	withClaim := func(name, claimName string) *corev1.Pod {
		p := gpuPod("ml", name, 1, nil)
		p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claimName}}}}
		return p
	}
	e := newFakeEnv(t,
		gpuNode("a", 8, map[string]string{"kubernetes.io/hostname": "a", "zone": "z1"}),
		gpuNode("b", 8, map[string]string{"kubernetes.io/hostname": "b", "zone": "z2"}),
		local, fast, zonal, claim("bound", "", "local-b"), claim("now", "fast", ""), claim("later", "zonal", ""),
		withClaim("on-b", "bound"), withClaim("immediate", "now"), withClaim("missing", "gone"), withClaim("zonal", "later"))
	e.watch()
	for name, want := range map[string]struct {
		nodes []string
		why   string
	}{
		"on-b":      {[]string{"b"}, ""},
		"immediate": {[]string{}, "0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims."},
		"missing":   {[]string{}, `0/2 nodes are available: persistentvolumeclaim "gone" not found.`},
		"zonal":     {[]string{"a"}, ""},
	} {
		var id cluster.JobID
		eventually(t, "the job of pod "+name, func() bool { id = e.jobOfPod(name); return id != "" })
		nodes, why, constrained := e.backend.AllowedNodes(id)
		if !constrained || !slices.Equal(nodes, want.nodes) || why != want.why {
			t.Errorf("%s: nodes %v, why %q, constrained %v; want %v, %q", name, nodes, why, constrained, want.nodes, want.why)
		}
	}
}

// A WaitForFirstConsumer claim: Start writes the chosen node on the claim
// for its provisioner and binds the pod only once the claim is bound; a
// claim not bound in time loses the attempt.
func TestAWaitForFirstConsumerClaimIsProvisionedBeforeThePodIsBound(t *testing.T) {
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "local"}, Provisioner: "example.com/local", VolumeBindingMode: &wffc}
	claim := func(name string) *corev1.PersistentVolumeClaim {
		c := "local"
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name}, Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &c}}
	}
	withClaim := func(name, claimName string) *corev1.Pod {
		p := gpuPod("ml", name, 2, nil)
		p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claimName}}}}
		return p
	}
	e := newFakeEnv(t, gpuNode("a", 8, nil), class, claim("scratch"), claim("never"), withClaim("train", "scratch"), withClaim("stuck", "never"))
	e.backend.cfg.ProvisionTimeout = 300 * time.Millisecond
	e.watch()
	var id cluster.JobID
	eventually(t, "the job", func() bool { id = e.jobOfPod("train"); return id != "" })
	if err := e.backend.Start(e.ctx, assignment(id, 1, 2, []string{"a"}, []int{2})); err != nil {
		t.Fatal(err)
	}
	got, err := e.client.CoreV1().PersistentVolumeClaims("ml").Get(e.ctx, "scratch", metav1.GetOptions{})
	if err != nil || got.Annotations["volume.kubernetes.io/selected-node"] != "a" {
		t.Fatalf("claim annotations %v (%v); want the selected node a", got.Annotations, err)
	}
	time.Sleep(100 * time.Millisecond)
	if n := e.pod("ml", "train").Spec.NodeName; n != "" {
		t.Fatalf("pod bound to %s before its claim was", n)
	}
	got.Spec.VolumeName = "pv-a" // the provisioner made the volume and the claim is bound
	if _, err := e.client.CoreV1().PersistentVolumeClaims("ml").Update(e.ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if ev := e.next(executor.JobStarted); ev.Job != id {
		t.Fatalf("started %+v", ev)
	}
	if n := e.pod("ml", "train").Spec.NodeName; n != "a" {
		t.Errorf("pod bound to %q, want a", n)
	}

	eventually(t, "the stuck job", func() bool { id = e.jobOfPod("stuck"); return id != "" })
	if err := e.backend.Start(e.ctx, assignment(id, 1, 2, []string{"a"}, []int{2})); err != nil {
		t.Fatal(err)
	}
	ev := e.next(executor.JobLost)
	if ev.Job != id || !strings.Contains(ev.Message, "claim ml/never not bound within 300ms") {
		t.Errorf("lost %+v", ev)
	}
	if n := e.pod("ml", "stuck").Spec.NodeName; n != "" {
		t.Errorf("the pod of a claim never bound was bound to %s", n)
	}
}

// A pod's host ports keep it off the nodes where a bound pod, of any
// scheduler, takes them (NodePorts).
func TestHostPortsTakenKeepAPodOffANode(t *testing.T) {
	withPort := func(p *corev1.Pod, port int32, ip string) *corev1.Pod {
		p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, corev1.ContainerPort{ContainerPort: port, HostPort: port, HostIP: ip})
		return p
	}
	other := withPort(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "proxy", UID: "uid-proxy-0000"},
		Spec:   corev1.PodSpec{NodeName: "a", Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}, 8080, "")
	e := newFakeEnv(t, gpuNode("a", 8, nil), gpuNode("b", 8, nil), other,
		withPort(gpuPod("ml", "same", 1, nil), 8080, ""), withPort(gpuPod("ml", "other", 1, nil), 9090, ""),
		withPort(gpuPod("ml", "one-ip", 1, nil), 8080, "10.0.0.7"))
	e.watch()
	for name, want := range map[string][]string{"same": {"b"}, "one-ip": {"b"}, "other": nil} {
		var id cluster.JobID
		eventually(t, "the job of "+name, func() bool { id = e.jobOfPod(name); return id != "" })
		nodes, _, constrained := e.backend.AllowedNodes(id)
		if !slices.Equal(nodes, want) || constrained != (want != nil) {
			t.Errorf("%s: nodes %v (constrained %v), want %v", name, nodes, constrained, want)
		}
	}
	// Its own GPU pod bound on b with 8080 too: no node is left.
	if err := e.backend.Start(e.ctx, assignment(e.jobOfPod("same"), 1, 1, []string{"b"}, []int{1})); err != nil {
		t.Fatal(err)
	}
	e.next(executor.JobStarted)
	e.create(withPort(gpuPod("ml", "late", 1, nil), 8080, ""))
	var id cluster.JobID
	eventually(t, "the job of late", func() bool { id = e.jobOfPod("late"); return id != "" })
	eventually(t, "late's answer", func() bool {
		nodes, why, constrained := e.backend.AllowedNodes(id)
		return constrained && len(nodes) == 0 &&
			why == "0/2 nodes are available: 2 node(s) didn't have free ports for the requested pod ports."
	})
}
