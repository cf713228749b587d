package cluster

import (
	"errors"
	"fmt"
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

// Tenant is a team or account that shares the fleet: its fair share, its
// quota and what its jobs may ask for (a tenants file, see tenantsfile.go).
type Tenant struct {
	Name string
	// Weight is the tenant's fair share relative to the others' (default 1).
	Weight float64
	// Cohort names the group whose members lend each other the quota they
	// do not use (Kueue's cohort); "" for none.
	Cohort string
	// Quota is the tenant's nominal GPUs by flavour. Empty: no quota, any
	// number of GPUs of any model. Otherwise its jobs use only the
	// flavours listed.
	Quota []Quota
	// Tiers are the priority tiers its jobs may ask for; empty: all.
	Tiers []Tier
	// MaxRunningJobs caps its jobs running at once; 0: no cap.
	MaxRunningJobs int
	// Reclaim says which borrowers' jobs the tenant may preempt to get its
	// nominal quota back (Kueue's reclaimWithinCohort); "" is ReclaimAny.
	Reclaim Reclaim
}

// Reclaim is a tenant's policy for taking lent quota back.
type Reclaim string

// The reclaim policies.
const (
	ReclaimAny       Reclaim = "any"        // any borrower's job, whatever its tier
	ReclaimLowerTier Reclaim = "lower_tier" // only jobs of a lower tier than the job that needs the quota
	ReclaimNever     Reclaim = "never"      // none: wait for the borrowers' jobs to end
)

// Reclaims reports whether a job of tier may preempt a borrower's job of
// victim's tier to take the tenant's quota back.
func (t *Tenant) Reclaims(tier, victim Tier) bool {
	switch t.Reclaim {
	case ReclaimNever:
		return false
	case ReclaimLowerTier:
		return victim < tier
	}
	return true
}

// Quota is a tenant's nominal GPUs of one flavour, as a Kueue
// ClusterQueue's nominal quota of one resource flavour.
type Quota struct {
	// Model is the GPU model counted; "" counts every model that no other
	// quota of the tenant names.
	Model string
	// GPUs is the nominal quota: what the tenant may always use.
	GPUs int
	// BorrowingLimit caps the GPUs beyond GPUs the tenant may borrow from
	// its cohort's unused quota; nil: only the cohort's idle quota caps it.
	// Without a cohort nothing is borrowed.
	BorrowingLimit *int
	// LendingLimit caps how much of GPUs the other members of the cohort
	// may borrow while the tenant does not use it; nil: all of it.
	LendingLimit *int
}

// AllowedTiers are the tiers the tenant's jobs may ask for (all when
// Tiers names none), most important first where they are all.
func (t *Tenant) AllowedTiers() []Tier {
	if len(t.Tiers) == 0 {
		return Tiers()
	}
	return t.Tiers
}

// AllowsTier reports whether the tenant's jobs may ask for tier.
func (t *Tenant) AllowsTier(tier Tier) bool {
	return len(t.Tiers) == 0 || slices.Contains(t.Tiers, tier)
}

// QuotaFor is the quota that counts the tenant's GPUs of model: the one
// naming the model, else the one for any model; ok is false where the
// tenant has quotas and none counts model (its jobs may not use it). A
// tenant without quotas returns ok and a nil quota.
func (t *Tenant) QuotaFor(model string) (q *Quota, ok bool) {
	if len(t.Quota) == 0 {
		return nil, true
	}
	var any *Quota
	for i := range t.Quota {
		switch t.Quota[i].Model {
		case model:
			return &t.Quota[i], true
		case "":
			any = &t.Quota[i]
		}
	}
	return any, any != nil
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
		if err := t.validateQuota(); err != nil {
			errs = append(errs, fmt.Errorf("tenant %s: %w", t.Name, err))
		}
	}
	return errors.Join(errs...)
}

// FitsFleet refuses a job the nodes could not run were they all free:
// GPU models they have none of, or more GPUs than they have of those
// models; the error names the field (gpu_models, gpus). No nodes (a fleet
// whose agents are still to register) refuse nothing. To check many jobs
// against one fleet, count its GPUs once (CountGPUs).
func FitsFleet(nodes []Node, s JobSpec) error { return CountGPUs(nodes).Fits(s) }

// FleetGPUs is a fleet's GPUs counted by model, all that FitsFleet reads
// of it.
type FleetGPUs struct {
	models []string // distinct, in the order first seen
	counts []int    // GPUs of models[i]
}

// CountGPUs counts the nodes' GPUs by model.
func CountGPUs(nodes []Node) FleetGPUs {
	var f FleetGPUs
	for i := range nodes {
		for _, g := range nodes[i].GPUs {
			k := slices.Index(f.models, g.Model) // a fleet has a few models
			if k < 0 {
				k = len(f.models)
				f.models, f.counts = append(f.models, g.Model), append(f.counts, 0)
			}
			f.counts[k]++
		}
	}
	return f
}

// Fits is FitsFleet against the counted fleet.
func (f FleetGPUs) Fits(s JobSpec) error {
	total, usable := 0, 0
	for i, m := range f.models {
		total += f.counts[i]
		if s.AllowsModel(m) {
			usable += f.counts[i]
		}
	}
	switch {
	case total == 0:
		return nil
	case usable == 0 && len(s.GPUModels) > 0:
		return fmt.Errorf("gpu_models: the fleet has no GPU of %s (it has %s)",
			strings.Join(s.GPUModels, ", "), strings.Join(slices.Sorted(slices.Values(f.models)), ", "))
	case s.GPUs > usable:
		return fmt.Errorf("gpus: %d is more than the fleet's %d GPUs it may use", s.GPUs, usable)
	}
	return nil
}

// validateQuota checks the tenant's quotas and tiers.
func (t *Tenant) validateQuota() error {
	var errs []error
	models := map[string]bool{}
	for i, q := range t.Quota {
		if models[q.Model] {
			errs = append(errs, fmt.Errorf("quota[%d]: model %q has a quota already", i, q.Model))
		}
		models[q.Model] = true
		if q.GPUs < 0 {
			errs = append(errs, fmt.Errorf("quota[%d].gpus: %d is negative", i, q.GPUs))
		}
		if q.BorrowingLimit != nil && *q.BorrowingLimit < 0 {
			errs = append(errs, fmt.Errorf("quota[%d].borrowing_limit: %d is negative", i, *q.BorrowingLimit))
		}
		if q.LendingLimit != nil && (*q.LendingLimit < 0 || *q.LendingLimit > q.GPUs) {
			errs = append(errs, fmt.Errorf("quota[%d].lending_limit: %d is not within 0 and its gpus (%d)", i, *q.LendingLimit, q.GPUs))
		}
	}
	for i, tier := range t.Tiers {
		if !tier.Valid() {
			errs = append(errs, fmt.Errorf("tiers[%d]: %v is not a tier", i, tier))
		}
	}
	if t.MaxRunningJobs < 0 {
		errs = append(errs, fmt.Errorf("max_running_jobs: %d is negative", t.MaxRunningJobs))
	}
	switch t.Reclaim {
	case "", ReclaimAny, ReclaimLowerTier, ReclaimNever:
	default:
		errs = append(errs, fmt.Errorf("reclaim: %q is not any, lower_tier or never", t.Reclaim))
	}
	return errors.Join(errs...)
}
