package kubernetes

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodeaffinity"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/tainttoleration"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/service"
)

// label sets labels and taints on a node, as an administrator would.
func (c *testCluster) label(name string, labels map[string]string, taints ...corev1.Taint) *corev1.Node {
	c.t.Helper()
	n, err := c.admin.CoreV1().Nodes().Get(c.ctx, name, metav1.GetOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	for k, v := range labels {
		n.Labels[k] = v
	}
	n.Spec.Taints = append(n.Spec.Taints, taints...)
	if n, err = c.admin.CoreV1().Nodes().Update(c.ctx, n, metav1.UpdateOptions{}); err != nil {
		c.t.Fatal(err)
	}
	return n
}

// staysPending waits until the named pod's job waits with why as its
// reason, and checks it is queued and its pod unbound.
func (c *testCluster) staysPending(p *prescient, name, why string) {
	c.t.Helper()
	id := c.jobOf(p, "k8s_pod", name).ID
	var st service.JobStatus
	eventually(c.t, name+"'s reason", func() bool {
		var err error
		st, err = p.plane.Job(c.ctx, id)
		return err == nil && st.Reason == why
	})
	if n := c.pod(name).Spec.NodeName; n != "" || st.State != cluster.StateQueued {
		c.t.Errorf("%s bound to %q, state %s", name, n, st.State)
	}
}

// Pods that may land only on some nodes (node selector, required node
// affinity, tolerations of a taint) land only there, and a pod no node may
// take stays pending with a reason that names the constraint, as
// kube-scheduler's would. kube-scheduler's own NodeAffinity and
// TaintToleration filter plugins, given the same pods and nodes, find the
// same nodes feasible for every pod as the backend allows.
func TestPodsLandOnlyWhereTheirConstraintsAllow(t *testing.T) {
	c := newTestCluster(t)
	for _, n := range []string{"a", "b", "c", "d"} {
		c.addNode(n, 8, "r1")
	}
	nodes := []*corev1.Node{
		c.label("a", map[string]string{"pool": "train", "zone": "z1"}),
		c.label("b", map[string]string{"pool": "train", "zone": "z2"}),
		c.label("c", map[string]string{"pool": "infer", "zone": "z1"}, corev1.Taint{Key: "dedicated", Value: "infer", Effect: corev1.TaintEffectNoSchedule}),
		c.label("d", map[string]string{"pool": "infer"}, corev1.Taint{Key: "maintenance", Effect: corev1.TaintEffectNoExecute}),
	}
	p := c.startPrescient(tempDB(t), service.ModeAutopilot)

	pods := map[string]func(*corev1.Pod){
		"selector": func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"pool": "train"} },
		"affinity": func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
					{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"z2"}}}}}}}}
		},
		"tolerant": func(p *corev1.Pod) {
			p.Spec.NodeSelector = map[string]string{"pool": "infer"}
			p.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "infer", Effect: corev1.TaintEffectNoSchedule}}
		},
		"nowhere": func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"pool": "infer", "zone": "z2"} },
		"untolerated": func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{ // c or d (a field's In takes one value)
					{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"c"}}}},
					{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"d"}}}}}}}}
		},
	}
	// kube-scheduler's filters, as its framework runs them.
	ctx := context.Background()
	na, err := nodeaffinity.New(ctx, &config.NodeAffinityArgs{}, nil, feature.Features{})
	if err != nil {
		t.Fatal(err)
	}
	tt, err := tainttoleration.New(ctx, nil, nil, feature.Features{})
	if err != nil {
		t.Fatal(err)
	}
	feasible := func(pod *corev1.Pod) []string {
		var out []string
		for _, n := range nodes {
			ni := framework.NewNodeInfo()
			ni.SetNode(n)
			ok := true
			for _, pl := range []fwk.Plugin{na, tt} {
				if st := pl.(fwk.FilterPlugin).Filter(ctx, framework.NewCycleState(), pod, ni); !st.IsSuccess() {
					ok = false
				}
			}
			if ok {
				out = append(out, n.Name)
			}
		}
		return out
	}
	want := map[string][]string{"selector": {"a", "b"}, "affinity": {"b"}, "tolerant": {"c"}, "nowhere": nil, "untolerated": nil}
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range pods {
			if !yield(k) {
				return
			}
		}
	}) {
		pod := c.createPodWith(name, podOpts{gpus: 2}, pods[name])
		sched := feasible(pod)
		if !slices.Equal(sched, want[name]) {
			t.Fatalf("%s: kube-scheduler's filters find %v feasible; the test expects %v", name, sched, want[name])
		}
		id := c.jobOf(p, "k8s_pod", name).ID
		var allowed []string
		eventually(t, "the backend's nodes for "+name, func() bool {
			var constrained bool
			allowed, _, constrained = p.backend.AllowedNodes(cluster.JobID(id))
			return constrained
		})
		if !slices.Equal(allowed, sched) && !(len(allowed) == 0 && len(sched) == 0) {
			t.Errorf("%s: the backend allows %v, kube-scheduler's filters %v", name, allowed, sched)
		}
		if len(sched) > 0 {
			if node := c.bound(name); !slices.Contains(sched, node) {
				t.Errorf("%s bound to %s, outside %v", name, node, sched)
			}
		}
	}
	// A pod whose claim is bound to a local volume on b lands on b; one
	// whose claim is unbound and binds at once (no provisioner here) waits.
	fs := corev1.PersistentVolumeFilesystem
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "local-b"}, Spec: corev1.PersistentVolumeSpec{
		Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		VolumeMode: &fs, PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: "/mnt/data"}},
		NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"z2"}}}}}}}}}
	if _, err := c.admin.CoreV1().PersistentVolumes().Create(c.ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	none := ""
	for name, volume := range map[string]string{"data-b": "local-b", "data-now": ""} {
		pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ml"}, Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: &none, VolumeName: volume,
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}}}}
		if _, err := c.admin.CoreV1().PersistentVolumeClaims("ml").Create(c.ctx, pvc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	withClaim := func(claim string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}
		}
	}
	c.createPodWith("local", podOpts{gpus: 2}, withClaim("data-b"))
	if node := c.bound("local"); node != "b" {
		t.Errorf("the pod of a volume on b bound to %s", node)
	}
	c.createPodWith("unbound", podOpts{gpus: 2}, withClaim("data-now"))

	// Host ports: another scheduler's pod on b takes 7000, so a pod of the
	// train pool asking for it goes to a.
	web := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ml"}, Spec: corev1.PodSpec{NodeName: "b",
		Containers: []corev1.Container{{Name: "web", Image: "nginx", Ports: []corev1.ContainerPort{{ContainerPort: 7000, HostPort: 7000}}}}}}
	if _, err := c.admin.CoreV1().Pods("ml").Create(c.ctx, web, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.createPodWith("ported", podOpts{gpus: 2}, func(p *corev1.Pod) {
		p.Spec.NodeSelector = map[string]string{"pool": "train"}
		p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 7000, HostPort: 7000}}
	})
	if node := c.bound("ported"); node != "a" {
		t.Errorf("the pod asking for host port 7000 bound to %s, where it is taken", node)
	}

	// A WaitForFirstConsumer claim of a class limited to zone z1: the pod
	// may go to a only (c is tainted); the backend writes a on the claim,
	// the test plays the provisioner, and the pod is bound once the claim
	// is.
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "zonal"}, Provisioner: "example.com/zonal", VolumeBindingMode: &wffc,
		AllowedTopologies: []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: "zone", Values: []string{"z1"}}}}}}
	if _, err := c.admin.StorageV1().StorageClasses().Create(c.ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	zonal := "zonal"
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "scratch", Namespace: "ml"}, Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: &zonal,
		Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}}}}
	if _, err := c.admin.CoreV1().PersistentVolumeClaims("ml").Create(c.ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.createPodWith("provisioned", podOpts{gpus: 2}, withClaim("scratch"))
	var selected string
	eventually(t, "the claim's selected node", func() bool {
		got, err := c.admin.CoreV1().PersistentVolumeClaims("ml").Get(c.ctx, "scratch", metav1.GetOptions{})
		if err != nil {
			return false
		}
		selected, pvc = got.Annotations["volume.kubernetes.io/selected-node"], got
		return selected != ""
	})
	if selected != "a" || c.pod("provisioned").Spec.NodeName != "" {
		t.Fatalf("selected node %q, pod on %q; want a, and the pod not bound before its claim", selected, c.pod("provisioned").Spec.NodeName)
	}
	made := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "scratch-a"}, Spec: corev1.PersistentVolumeSpec{
		Capacity: pv.Spec.Capacity, AccessModes: pv.Spec.AccessModes, VolumeMode: &fs, StorageClassName: "zonal",
		PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: "/mnt/scratch"}},
		ClaimRef:               &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: "ml", Name: "scratch", UID: pvc.UID},
		NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{selected}}}}}}}}}
	if _, err := c.admin.CoreV1().PersistentVolumes().Create(c.ctx, made, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pvc.Spec.VolumeName = made.Name
	if _, err := c.admin.CoreV1().PersistentVolumeClaims("ml").Update(c.ctx, pvc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if node := c.bound("provisioned"); node != "a" {
		t.Errorf("the provisioned pod bound to %s, want a", node)
	}

	// The pods that fit nowhere stay pending, saying why.
	for name, why := range map[string]string{
		"nowhere": "0/4 nodes are available: 4 node(s) didn't match Pod's node affinity/selector.",
		"untolerated": "0/4 nodes are available: 2 node(s) didn't match Pod's node affinity/selector, " +
			"1 node(s) had untolerated taint {dedicated: infer}, 1 node(s) had untolerated taint {maintenance: }.",
		"unbound": "0/4 nodes are available: pod has unbound immediate PersistentVolumeClaims.",
	} {
		c.staysPending(p, name, why)
	}
}
