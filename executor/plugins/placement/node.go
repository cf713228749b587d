package placement

import "github.com/prescient-sched/prescient/cluster"

// Request is what one job (pod) asks of a node: host CPU and memory, and
// GPUs GPUs of Milli milli-GPUs each (Milli < 1000 only with GPUs == 1).
type Request struct {
	CPUMilli    int64
	MemoryBytes int64
	GPUs        int
	Milli       int
	// Models are the GPU models allowed; empty means any.
	Models []string
	// Nodes are the nodes allowed, sorted (JobSpec.Nodes); nil means any.
	Nodes []string
}

// RequestOf is a job's request.
func RequestOf(s *cluster.JobSpec) Request {
	return Request{CPUMilli: s.CPUMilli, MemoryBytes: s.MemoryBytes, GPUs: s.GPUs, Milli: s.GPUMilli, Models: s.GPUModels, Nodes: s.Nodes}
}

// TotalMilli is the request's GPU demand in milli-GPUs.
func (r *Request) TotalMilli() int { return r.GPUs * r.Milli }

// Share reports whether the request asks for a share of one GPU.
func (r *Request) Share() bool { return r.GPUs == 1 && r.Milli < cluster.MilliGPU }

// affinity is the kind of a request that gpu-clustering groups by: 0 for a
// share of a GPU, k for k whole GPUs, -1 for none.
func (r *Request) affinity() int {
	switch {
	case r.GPUs == 0 || r.Milli == 0:
		return -1
	case r.Share():
		return 0
	}
	return min(r.GPUs, maxAffinity-1)
}

// allows reports whether a node of the model may take the request
// (cluster.ModelAllowed); a node of no known model takes only requests
// that name none.
func (r *Request) allows(model string) bool {
	return (len(r.Models) == 0 || model != "") && cluster.ModelAllowed(r.Models, model)
}

// allowsOn reports whether the request may take a node: its model and its
// name (Nodes).
func (r *Request) allowsOn(n *cluster.Node) bool {
	return len(n.GPUs) > 0 && r.allows(n.GPUs[0].Model) && cluster.NodeAllowed(r.Nodes, n.Name)
}

// maxAffinity bounds the affinity kinds a node counts.
const maxAffinity = 65

// Unlimited marks a host resource (CPU, memory) the scorers do not track.
const Unlimited = int64(1) << 62

// Node is one node's free resources as the scorers see them.
type Node struct {
	Index int // position in the fleet
	Name  string
	Model string // GPU model; "" for a node without GPUs
	// CPUMilliLeft and CPUMilliCap are free and total host CPU; MemoryLeft
	// free host memory. Unlimited where the caller does not track them.
	CPUMilliLeft, CPUMilliCap int64
	MemoryLeft                int64
	// MilliLeft is the free share of each GPU, in GPU index order.
	MilliLeft []int
	// affinity counts the GPU jobs placed on the node by kind (gpu-clustering).
	affinity [maxAffinity]int32
	kinds    int
	mig      bool // the planner's view of a node whose GPUs are MIG-enabled
}

// NewNode returns the free state of an empty node of the fleet.
func NewNode(i int, n *cluster.Node) *Node {
	nd := &Node{Index: i, Name: n.Name, CPUMilliLeft: n.CPUMilli, CPUMilliCap: n.CPUMilli, MemoryLeft: n.MemoryBytes}
	if n.CPUMilli == 0 {
		nd.CPUMilliLeft, nd.CPUMilliCap = Unlimited, Unlimited
	}
	if n.MemoryBytes == 0 {
		nd.MemoryLeft = Unlimited
	}
	if len(n.GPUs) > 0 {
		nd.Model = n.GPUs[0].Model
	}
	nd.MilliLeft = make([]int, len(n.GPUs))
	for g := range nd.MilliLeft {
		nd.MilliLeft[g] = cluster.MilliGPU
	}
	return nd
}

// MilliLeftTotal is the node's free GPU share in milli-GPUs.
func (n *Node) MilliLeftTotal() int {
	t := 0
	for _, m := range n.MilliLeft {
		t += m
	}
	return t
}

// WholeFree counts the wholly free GPUs.
func (n *Node) WholeFree() int {
	k := 0
	for _, m := range n.MilliLeft {
		if m == cluster.MilliGPU {
			k++
		}
	}
	return k
}

// canHostGPUs reports whether at least gpus GPUs have milli free each.
func canHostGPUs(left []int, milli, gpus int) bool {
	for _, m := range left {
		if m >= milli {
			if gpus--; gpus <= 0 {
				return true
			}
		}
	}
	return gpus <= 0
}

// Fits reports whether the node can take the request: GPU model, host CPU
// and memory, and enough GPUs with the share free. A request without GPUs
// needs only CPU and memory.
func (n *Node) Fits(r *Request) bool {
	if n.CPUMilliLeft < r.CPUMilli || n.MemoryLeft < r.MemoryBytes {
		return false
	}
	if r.GPUs == 0 || r.Milli == 0 {
		return true
	}
	return r.allows(n.Model) && cluster.NodeAllowed(r.Nodes, n.Name) && canHostGPUs(n.MilliLeft, r.Milli, r.GPUs)
}

// Take allocates the request on the listed GPUs. The caller checked Fits
// and that gpus have the share free.
func (n *Node) Take(r *Request, gpus []int) {
	n.CPUMilliLeft -= r.CPUMilli
	n.MemoryLeft -= r.MemoryBytes
	for _, g := range gpus {
		n.MilliLeft[g] -= r.Milli
	}
	if k := r.affinity(); k >= 0 {
		if n.affinity[k] == 0 {
			n.kinds++
		}
		n.affinity[k]++
	}
}

// wholeGPUs picks the lowest-numbered wholly free GPUs for a whole-GPU
// request (the simulator's AllocateExclusiveGpuId).
func wholeGPUs(left []int, count int, buf []int) []int {
	out := buf[:0]
	for g, m := range left {
		if len(out) == count {
			break
		}
		if m == cluster.MilliGPU {
			out = append(out, g)
		}
	}
	return out
}

// bestFitGPU is the GPU with the least share free that still fits milli,
// the lowest-numbered among equals; -1 if none.
func bestFitGPU(left []int, milli int) int {
	best := -1
	for g, m := range left {
		if m >= milli && (best < 0 || m < left[best]) {
			best = g
		}
	}
	return best
}

// gpusBestFit is the "best" GPU selection of the FGD simulator: the
// best-fitting GPU for a share, the lowest-numbered free GPUs otherwise.
func gpusBestFit(n *Node, r *Request, buf []int) []int {
	switch {
	case r.GPUs == 0 || r.Milli == 0:
		return buf[:0]
	case r.Share():
		return append(buf[:0], bestFitGPU(n.MilliLeft, r.Milli))
	}
	return wholeGPUs(n.MilliLeft, r.GPUs, buf)
}
