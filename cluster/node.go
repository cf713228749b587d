package cluster

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// GPU is one accelerator. Vendor and Model are separate so that other
// accelerators fit the same type later.
type GPU struct {
	UUID        string
	Index       int // index on its node, as the driver numbers it
	Vendor      string
	Model       string
	MemoryBytes int64

	// Power limits in watts: the default limit and the range it may be set in.
	PowerLimitW    float64
	MinPowerLimitW float64
	MaxPowerLimitW float64

	MIGCapable bool
	MIGEnabled bool

	// NVLinkDomain names the NVLink/NVSwitch domain the GPU belongs to;
	// GPUs of one node with the same domain talk over NVLink. Empty means
	// the GPU talks to its peers over PCIe only.
	NVLinkDomain string
}

// NodeState says whether a node takes work.
type NodeState string

// The node states.
const (
	NodeReady   NodeState = "ready"
	NodeDrained NodeState = "drained" // runs what it has, takes nothing new
	NodeFailed  NodeState = "failed"  // its jobs go back to the queue
)

// Topology is where a node sits in the network.
type Topology struct {
	Rack string
	Leaf string // network leaf (top-of-rack or leaf switch group)
}

// PoolLabel is the node label naming its pool: a virtual cluster whose
// GPUs an idle forecast counts together, or an inference pool that may
// lend its nodes to training. A node without it is a pool of its own.
const PoolLabel = "prescient.io/pool"

// Node is a host with GPUs.
type Node struct {
	Name        string
	GPUs        []GPU
	CPUMilli    int64
	MemoryBytes int64
	Topology    Topology
	State       NodeState
	Labels      map[string]string
}

// GPURef names one GPU of the fleet.
type GPURef struct {
	Node  string
	Index int
}

func (r GPURef) String() string { return fmt.Sprintf("%s/gpu%d", r.Node, r.Index) }

// Tenant is a team or account that shares the fleet.
type Tenant struct {
	Name string
	// Weight is the tenant's fair share relative to the others' (default 1).
	Weight float64
	// QuotaGPUs caps the GPUs the tenant may hold at once; 0 means no cap.
	QuotaGPUs int
}

// Fleet is a description of a cluster: its nodes and tenants.
type Fleet struct {
	Name    string
	Nodes   []Node
	Tenants []Tenant
	// AllowCrossTenantSharing lets jobs of different tenants share a GPU
	// without hardware isolation (MPS, time-slicing). Off by default.
	AllowCrossTenantSharing bool
}

// GPUCount is the number of GPUs in the fleet.
func (f *Fleet) GPUCount() int {
	n := 0
	for i := range f.Nodes {
		n += len(f.Nodes[i].GPUs)
	}
	return n
}

// Validate checks that names are unique and values are sane.
func (f *Fleet) Validate() error {
	var errs []error
	seen := make(map[string]bool, len(f.Nodes))
	uuids := make(map[string]string)
	for i := range f.Nodes {
		n := &f.Nodes[i]
		if n.Name == "" {
			errs = append(errs, fmt.Errorf("nodes[%d].name: empty", i))
			continue
		}
		if seen[n.Name] {
			errs = append(errs, fmt.Errorf("nodes[%d].name: %q appears twice", i, n.Name))
		}
		seen[n.Name] = true
		if n.MemoryBytes < 0 || n.CPUMilli < 0 {
			errs = append(errs, fmt.Errorf("node %s: memory (%d) and cpu_milli (%d) must not be negative", n.Name, n.MemoryBytes, n.CPUMilli))
		}
		for gi, g := range n.GPUs {
			if g.Index != gi {
				errs = append(errs, fmt.Errorf("node %s: gpu %d has index %d", n.Name, gi, g.Index))
			}
			if g.MemoryBytes < 0 {
				errs = append(errs, fmt.Errorf("node %s gpu %d: memory is negative", n.Name, gi))
			}
			if g.UUID != "" {
				if other, dup := uuids[g.UUID]; dup {
					errs = append(errs, fmt.Errorf("node %s gpu %d: uuid %s already used on %s", n.Name, gi, g.UUID, other))
				}
				uuids[g.UUID] = n.Name
			}
		}
	}
	tenants := make(map[string]bool)
	for i, t := range f.Tenants {
		if t.Name == "" {
			errs = append(errs, fmt.Errorf("tenants[%d].name: empty", i))
		}
		if tenants[t.Name] {
			errs = append(errs, fmt.Errorf("tenants[%d].name: %q appears twice", i, t.Name))
		}
		tenants[t.Name] = true
		if t.Weight <= 0 {
			errs = append(errs, fmt.Errorf("tenant %s: weight %g must be positive", t.Name, t.Weight))
		}
		if t.QuotaGPUs < 0 {
			errs = append(errs, fmt.Errorf("tenant %s: quota_gpus %d is negative", t.Name, t.QuotaGPUs))
		}
	}
	return errors.Join(errs...)
}

// FitsFleet refuses a job the nodes could not run were they all free:
// GPU models they have none of, or more GPUs than they have of those
// models; the error names the field (gpu_models, gpus). No nodes (a fleet
// whose agents are still to register) refuse nothing.
func FitsFleet(nodes []Node, s JobSpec) error {
	total, usable := 0, 0
	models := map[string]bool{}
	for i := range nodes {
		for _, g := range nodes[i].GPUs {
			total++
			models[g.Model] = true
			if s.AllowsModel(g.Model) {
				usable++
			}
		}
	}
	switch {
	case total == 0:
		return nil
	case usable == 0 && len(s.GPUModels) > 0:
		return fmt.Errorf("gpu_models: the fleet has no GPU of %s (it has %s)",
			strings.Join(s.GPUModels, ", "), strings.Join(slices.Sorted(maps.Keys(models)), ", "))
	case s.GPUs > usable:
		return fmt.Errorf("gpus: %d is more than the fleet's %d GPUs it may use", s.GPUs, usable)
	}
	return nil
}
