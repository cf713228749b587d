package kubernetes

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/prescient-sched/prescient/cluster"
)

// Labels, annotations and resources the backend reads and writes (DESIGN.md
// section 6).
const (
	SchedulerName = "prescient"

	ResourceGPU = corev1.ResourceName("nvidia.com/gpu")
	// ResourceMIGPrefix starts the resources of MIG instances that NVIDIA's
	// device plugin offers under its mixed strategy: nvidia.com/mig-1g.10gb.
	ResourceMIGPrefix = "nvidia.com/mig-"

	LabelGPUProduct   = "nvidia.com/gpu.product"
	LabelGPUCount     = "nvidia.com/gpu.count"
	LabelGPUMemory    = "nvidia.com/gpu.memory" // MiB, as GPU feature discovery writes it
	LabelRack         = "prescient.io/rack"
	LabelLeaf         = "prescient.io/leaf"
	LabelNVLinkDomain = "prescient.io/nvlink-domain"

	LabelGang     = "prescient.io/gang"
	LabelGangSize = "prescient.io/gang-size"
	LabelTier     = "prescient.io/tier"
	LabelTenant   = "prescient.io/tenant"

	AnnotationCheckpointable      = "prescient.io/checkpointable"
	AnnotationCheckpointRequested = "prescient.io/checkpoint-requested"
	AnnotationCheckpointedAt      = "prescient.io/checkpointed-at"
	AnnotationCheckpointPath      = "prescient.io/checkpoint-path"
	AnnotationCheckpointStep      = "prescient.io/checkpoint-step"
	AnnotationRecommendation      = "prescient.io/recommendation"
	AnnotationJob                 = "prescient.io/job"
	AnnotationAttempt             = "prescient.io/attempt"
	// AnnotationParked marks a node Prescient cordoned to park it (its
	// value the time, RFC 3339): see Backend.Cordon.
	AnnotationParked = "prescient.io/parked"
)

// nodeFromKube turns a Node object into the domain's node. Its GPU count is
// the allocatable nvidia.com/gpu (the label nvidia.com/gpu.count when the
// device plugin has not reported yet); a node that is not Ready, or is
// cordoned, takes nothing new (drained), except that a node Prescient
// cordoned to park it is as its readiness says (the control plane keeps
// it out of the plan while it is parked, and tells it is down by it).
// Malformed labels are errors that name the node and the label.
func nodeFromKube(n *corev1.Node) (cluster.Node, error) {
	out := cluster.Node{Name: n.Name, State: cluster.NodeReady, Labels: maps.Clone(n.Labels),
		Topology: cluster.Topology{Rack: n.Labels[LabelRack], Leaf: n.Labels[LabelLeaf]}}
	if q, ok := n.Status.Allocatable[corev1.ResourceCPU]; ok {
		out.CPUMilli = q.MilliValue()
	}
	if q, ok := n.Status.Allocatable[corev1.ResourceMemory]; ok {
		out.MemoryBytes = q.Value()
	}
	count := -1
	if q, ok := n.Status.Allocatable[ResourceGPU]; ok {
		count = int(q.Value())
	} else if hasMIG(n) {
		count = 0 // GPU feature discovery's count includes the partitioned GPUs
	} else if s, ok := n.Labels[LabelGPUCount]; ok {
		c, err := strconv.Atoi(s)
		if err != nil || c < 0 {
			return cluster.Node{}, fmt.Errorf("node %s: label %s=%q: want a GPU count", n.Name, LabelGPUCount, s)
		}
		count = c
	}
	if count > maxGPUsPerNode {
		return cluster.Node{}, fmt.Errorf("node %s: %d GPUs: more than %d", n.Name, count, maxGPUsPerNode)
	}
	var memBytes int64
	if s, ok := n.Labels[LabelGPUMemory]; ok {
		mib, err := strconv.ParseInt(s, 10, 64)
		if err != nil || mib <= 0 || mib > 1<<24 {
			return cluster.Node{}, fmt.Errorf("node %s: label %s=%q: want the GPU's memory in MiB", n.Name, LabelGPUMemory, s)
		}
		memBytes = mib << 20
	}
	model := n.Labels[LabelGPUProduct]
	for i := 0; i < count; i++ {
		g := cluster.NewGPU(i, model)
		if spec, ok := cluster.LookupGPUModel(model); ok {
			g.Model = spec.Model // the catalog's name, as jobs ask for it
		}
		if memBytes > 0 {
			g.MemoryBytes = memBytes
		}
		g.NVLinkDomain = n.Labels[LabelNVLinkDomain]
		out.GPUs = append(out.GPUs, g)
	}
	if n.Spec.Unschedulable && !parkedMark(n) || !nodeReady(n) {
		out.State = cluster.NodeDrained
	}
	return out, nil
}

// maxGPUsPerNode bounds what a node may claim, against typos and hostile
// labels; it bounds the MIG instances of each profile too.
const maxGPUsPerNode = 1024

// nodesFromKube is the node of a Node object followed by one node for
// each MIG profile it offers (see migNode), in profile order.
func nodesFromKube(n *corev1.Node) ([]cluster.Node, error) {
	parent, err := nodeFromKube(n)
	if err != nil {
		return nil, err
	}
	out := []cluster.Node{parent}
	var profiles []string
	for r := range n.Status.Allocatable {
		if p, ok := strings.CutPrefix(string(r), ResourceMIGPrefix); ok {
			profiles = append(profiles, p)
		}
	}
	slices.Sort(profiles)
	for _, p := range profiles {
		m, err := migNode(n, parent, p)
		if err != nil {
			return nil, err
		}
		if len(m.GPUs) > 0 {
			out = append(out, m)
		}
	}
	return out, nil
}

// MIGNodeSeparator joins a node's name and a MIG profile into the name of
// the node that stands for the node's instances of that profile
// ("gpu-7:mig-1g.10gb"). Kubernetes' node names hold no ':', so the two
// kinds of names cannot collide.
const MIGNodeSeparator = ":mig-"

// migNode stands for a node's MIG instances of one profile: under the
// device plugin's mixed strategy the partition is made on the node (by
// NVIDIA's MIG manager), and a pod asks nvidia.com/mig-PROFILE for whole
// instances, so each instance is a GPU of model MIGInstanceModel(profile)
// that only pods asking for it take. Its memory is the profile's: GPU
// feature discovery's nvidia.com/mig-PROFILE.memory label (MiB), else the
// profile's name. Host CPU and memory stay with the parent node (this one
// tracks none); its state, labels and topology are the parent's.
func migNode(n *corev1.Node, parent cluster.Node, profile string) (cluster.Node, error) {
	resource := ResourceMIGPrefix + profile
	if err := validProfile(profile); err != nil {
		return cluster.Node{}, fmt.Errorf("node %s: resource %s: %w", n.Name, resource, err)
	}
	q := n.Status.Allocatable[corev1.ResourceName(resource)]
	count := q.Value()
	if count < 0 || count > maxGPUsPerNode {
		return cluster.Node{}, fmt.Errorf("node %s: resource %s: %d instances: want 0 to %d", n.Name, resource, count, maxGPUsPerNode)
	}
	mem := profileMemory(profile)
	label := resource + ".memory"
	if s, ok := n.Labels[label]; ok {
		mib, err := strconv.ParseInt(s, 10, 64)
		if err != nil || mib <= 0 || mib > 1<<24 {
			return cluster.Node{}, fmt.Errorf("node %s: label %s=%q: want the instance's memory in MiB", n.Name, label, s)
		}
		mem = mib << 20
	}
	out := cluster.Node{Name: n.Name + MIGNodeSeparator + profile, State: parent.State, Labels: maps.Clone(parent.Labels),
		Topology: parent.Topology}
	model := cluster.MIGInstanceModel(profile)
	for i := 0; i < int(count); i++ {
		g := cluster.NewGPU(i, model)
		g.MemoryBytes = mem
		out.GPUs = append(out.GPUs, g)
	}
	return out, nil
}

// validProfile accepts the profile names NVIDIA's device plugin makes:
// lower-case letters, digits, '.', '+' and '-' ("1g.10gb", "1g.10gb+me",
// "1c.3g.20gb"), at most 63 characters.
func validProfile(p string) error {
	if p == "" || len(p) > 63 {
		return fmt.Errorf("profile %q: want 1 to 63 characters", p)
	}
	for _, c := range p {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '+' || c == '-') {
			return fmt.Errorf("profile %q: want lower-case letters, digits, '.', '+' or '-'", p)
		}
	}
	return nil
}

// profileMemory reads the memory a profile's name gives ("3g.40gb": 40
// GiB); 0 when it gives none.
func profileMemory(p string) int64 {
	p, _, _ = strings.Cut(p, "+")
	for _, part := range strings.Split(p, ".") {
		if gb, ok := strings.CutSuffix(part, "gb"); ok {
			if n, err := strconv.ParseInt(gb, 10, 64); err == nil && n > 0 && n < 1<<20 {
				return n << 30
			}
		}
	}
	return 0
}

// hasMIG reports whether a node offers MIG instances.
func hasMIG(n *corev1.Node) bool {
	for r := range n.Status.Allocatable {
		if strings.HasPrefix(string(r), ResourceMIGPrefix) {
			return true
		}
	}
	return false
}

// parentNode is the Kubernetes node of a node name of the planner's: the
// name itself, or the part before MIGNodeSeparator.
func parentNode(name string) string {
	parent, _, _ := strings.Cut(name, MIGNodeSeparator)
	return parent
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podGPUs is what a pod asks of nvidia.com/gpu: the sum of its containers'
// limits (requests when no limit is set), or the largest init container's
// when that is more.
func podGPUs(p *corev1.Pod) int64 { return podResource(p, ResourceGPU) }

// podResource is what a pod asks of an extended resource, as podGPUs.
func podResource(p *corev1.Pod, r corev1.ResourceName) int64 {
	get := func(c corev1.Container) int64 {
		if q, ok := c.Resources.Limits[r]; ok {
			return q.Value()
		}
		if q, ok := c.Resources.Requests[r]; ok {
			return q.Value()
		}
		return 0
	}
	var sum, initMax int64
	for _, c := range p.Spec.Containers {
		sum += get(c)
	}
	for _, c := range p.Spec.InitContainers {
		initMax = max(initMax, get(c))
	}
	return max(sum, initMax)
}

// podMIG is the MIG profile a pod asks instances of (nvidia.com/mig-*),
// and how many; "" when it asks none. A pod that asks two profiles, or
// MIG instances and whole GPUs, is an error: its devices would lie on
// different planner nodes.
func podMIG(p *corev1.Pod) (profile string, count int64, err error) {
	if !asksMIG(p) {
		return "", 0, nil
	}
	seen := map[string]bool{}
	collect := func(cs []corev1.Container) {
		for _, c := range cs {
			for _, l := range []corev1.ResourceList{c.Resources.Limits, c.Resources.Requests} {
				for r := range l {
					if prof, ok := strings.CutPrefix(string(r), ResourceMIGPrefix); ok {
						seen[prof] = true
					}
				}
			}
		}
	}
	collect(p.Spec.Containers)
	collect(p.Spec.InitContainers)
	where := fmt.Sprintf("pod %s/%s", p.Namespace, p.Name)
	switch {
	case len(seen) == 0:
		return "", 0, nil
	case len(seen) > 1:
		return "", 0, fmt.Errorf("%s: asks for MIG instances of %d profiles (%s): want one", where, len(seen),
			strings.Join(slices.Sorted(maps.Keys(seen)), ", "))
	}
	for prof := range seen {
		profile = prof
	}
	if err := validProfile(profile); err != nil {
		return "", 0, fmt.Errorf("%s: resource %s%s: %w", where, ResourceMIGPrefix, profile, err)
	}
	if podGPUs(p) > 0 {
		return "", 0, fmt.Errorf("%s: asks for both %s and %s%s: want one kind of GPU", where, ResourceGPU, ResourceMIGPrefix, profile)
	}
	return profile, podResource(p, corev1.ResourceName(ResourceMIGPrefix+profile)), nil
}

// plannerNode is the planner's name of the node a bound pod runs on: the
// pod's node, or the node standing for its MIG instances there.
func plannerNode(p *corev1.Pod) string {
	if p.Spec.NodeName == "" {
		return ""
	}
	if prof, n, err := podMIG(p); err == nil && n > 0 {
		return p.Spec.NodeName + MIGNodeSeparator + prof
	}
	return p.Spec.NodeName
}

// podRequests is the pod's CPU and memory request as kube-scheduler
// counts it (component-helpers' PodRequests: the larger of the containers'
// sum and each init container, sidecars, overhead, pod-level resources).
func podRequests(p *corev1.Pod) (cpuMilli, memBytes int64) {
	r := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})
	return r.Cpu().MilliValue(), r.Memory().Value()
}

// asksMIG reports whether a pod's containers name a MIG resource; it
// allocates nothing, for the loops over every pod.
func asksMIG(p *corev1.Pod) bool {
	for _, cs := range [][]corev1.Container{p.Spec.Containers, p.Spec.InitContainers} {
		for i := range cs {
			for _, l := range []corev1.ResourceList{cs[i].Resources.Limits, cs[i].Resources.Requests} {
				for r := range l {
					if strings.HasPrefix(string(r), ResourceMIGPrefix) {
						return true
					}
				}
			}
		}
	}
	return false
}
