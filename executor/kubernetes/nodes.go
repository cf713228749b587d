package kubernetes

import (
	"fmt"
	"maps"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/prescient-sched/prescient/cluster"
)

// Labels, annotations and resources the backend reads and writes (DESIGN.md
// section 6).
const (
	SchedulerName = "prescient"

	ResourceGPU = corev1.ResourceName("nvidia.com/gpu")

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
)

// nodeFromKube turns a Node object into the domain's node. Its GPU count is
// the allocatable nvidia.com/gpu (the label nvidia.com/gpu.count when the
// device plugin has not reported yet); a node that is not Ready, or is
// cordoned, takes nothing new (drained). Malformed labels are errors that
// name the node and the label.
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
	if n.Spec.Unschedulable || !nodeReady(n) {
		out.State = cluster.NodeDrained
	}
	return out, nil
}

// maxGPUsPerNode bounds what a node may claim, against typos and hostile
// labels.
const maxGPUsPerNode = 1024

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
func podGPUs(p *corev1.Pod) int64 {
	get := func(c corev1.Container) int64 {
		if q, ok := c.Resources.Limits[ResourceGPU]; ok {
			return q.Value()
		}
		if q, ok := c.Resources.Requests[ResourceGPU]; ok {
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

// podRequests sums the containers' CPU and memory requests.
func podRequests(p *corev1.Pod) (cpuMilli, memBytes int64) {
	var cpu, mem resource.Quantity
	for _, c := range p.Spec.Containers {
		if q, ok := c.Resources.Requests[corev1.ResourceCPU]; ok {
			cpu.Add(q)
		}
		if q, ok := c.Resources.Requests[corev1.ResourceMemory]; ok {
			mem.Add(q)
		}
	}
	return cpu.MilliValue(), mem.Value()
}
