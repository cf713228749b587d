package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"strings"

	"gopkg.in/yaml.v3"
)

// The fleet file is Prescient's own YAML description of a fleet. See
// examples/fleet.yaml for a commented example. Its shape:
//
//	name: lab
//	allow_cross_tenant_sharing: false
//	tenants:              # as in a tenants file (tenantsfile.go)
//	  - {name: research, weight: 2, quota_gpus: 32}
//	nodes:
//	  - name: dgx          # with count: N the nodes are dgx-01 .. dgx-NN
//	    count: 4
//	    rack: r1
//	    leaf: leaf-a
//	    cpu_milli: 256000
//	    memory: 2TiB
//	    gpus:
//	      count: 8
//	      model: A100-SXM4-80GB   # vendor, memory, power and MIG default from the catalog
//	      nvlink_domains: [[0, 1, 2, 3, 4, 5, 6, 7]]
type fleetFile struct {
	Name                    string       `yaml:"name"`
	AllowCrossTenantSharing bool         `yaml:"allow_cross_tenant_sharing"`
	Tenants                 []tenantFile `yaml:"tenants"`
	Nodes                   []nodeFile   `yaml:"nodes"`
}

type nodeFile struct {
	Name     string            `yaml:"name"`
	Count    int               `yaml:"count"`
	Rack     string            `yaml:"rack"`
	Leaf     string            `yaml:"leaf"`
	CPUMilli int64             `yaml:"cpu_milli"`
	Memory   string            `yaml:"memory"`
	State    string            `yaml:"state"`
	Labels   map[string]string `yaml:"labels"`
	GPUs     gpuFile           `yaml:"gpus"`
}

type gpuFile struct {
	Count          int     `yaml:"count"`
	Model          string  `yaml:"model"`
	Vendor         string  `yaml:"vendor"`
	Memory         string  `yaml:"memory"`
	PowerLimitW    float64 `yaml:"power_limit_w"`
	MinPowerLimitW float64 `yaml:"min_power_limit_w"`
	MaxPowerLimitW float64 `yaml:"max_power_limit_w"`
	MIGCapable     *bool   `yaml:"mig_capable"`
	MIGEnabled     bool    `yaml:"mig_enabled"`
	NVLinkDomains  [][]int `yaml:"nvlink_domains"`
}

// FleetFileError locates a problem in a fleet file.
type FleetFileError struct {
	File string
	Line int
	Msg  string
}

func (e *FleetFileError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

// ReadFleetFile parses a fleet file. name is used in error messages. Unknown
// keys are errors, as are values no fleet could have; nothing is silently
// corrected.
func ReadFleetFile(r io.Reader, name string) (*Fleet, error) {
	var ff fleetFile
	root, err := decodeStrict(r, name, "fleet file", &ff)
	if err != nil {
		return nil, err
	}
	nodeLines := sequenceLines(root, "nodes")
	tenantLines := sequenceLines(root, "tenants")

	f := &Fleet{Name: ff.Name, AllowCrossTenantSharing: ff.AllowCrossTenantSharing}
	var errs []error
	tenants, err := readTenants(ff.Tenants, tenantLines, name)
	if err != nil {
		errs = append(errs, err)
	}
	f.Tenants = tenants
	totalGPUs := 0
	for i, nf := range ff.Nodes {
		// Check the size before building anything: a short entry can ask for a lot.
		totalGPUs += max(nf.Count, 1) * max(nf.GPUs.Count, 0)
		if totalGPUs > maxFleetGPUs {
			errs = append(errs, &FleetFileError{File: name, Line: lineAt(nodeLines, i), Msg: fmt.Sprintf("nodes[%d] (%s): the fleet would have more than the %d GPUs a fleet file may describe", i, nf.Name, maxFleetGPUs)})
			break
		}
		nodes, err := nf.nodes()
		if err != nil {
			errs = append(errs, &FleetFileError{File: name, Line: lineAt(nodeLines, i), Msg: fmt.Sprintf("nodes[%d] (%s): %v", i, nf.Name, err)})
			continue
		}
		f.Nodes = append(f.Nodes, nodes...)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if len(f.Nodes) == 0 {
		return nil, &FleetFileError{File: name, Msg: "nodes: the fleet has no nodes"}
	}
	if err := f.Validate(); err != nil {
		return nil, &FleetFileError{File: name, Msg: err.Error()}
	}
	return f, nil
}

// decodeStrict reads one of our YAML files (what names its kind in
// errors) into into, refusing unknown keys; it returns the document's node
// tree, for the lines of its entries.
func decodeStrict(r io.Reader, name, what string, into any) (*yaml.Node, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read %s %s: %w", what, name, err)
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, &FleetFileError{File: name, Msg: strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(into); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &FleetFileError{File: name, Msg: "empty " + what}
		}
		return nil, &FleetFileError{File: name, Msg: strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	return &root, nil
}

// sequenceLines returns the line of each item of the top-level sequence key.
func sequenceLines(root *yaml.Node, key string) []int {
	if root.Kind != yaml.DocumentNode || len(root.Content) == 0 {
		return nil
	}
	m := root.Content[0]
	if m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value != key || m.Content[i+1].Kind != yaml.SequenceNode {
			continue
		}
		lines := make([]int, len(m.Content[i+1].Content))
		for j, item := range m.Content[i+1].Content {
			lines[j] = item.Line
		}
		return lines
	}
	return nil
}

func lineAt(lines []int, i int) int {
	if i < len(lines) {
		return lines[i]
	}
	return 0
}

// maxNodesPerEntry bounds count so that a typo cannot allocate millions of nodes.
const maxNodesPerEntry = 100000

// maxGPUsPerNode bounds gpus.count for the same reason.
const maxGPUsPerNode = 64

// maxFleetGPUs bounds the whole fleet, so that a short file cannot ask for
// millions of GPUs through repeated entries.
const maxFleetGPUs = 1_000_000

func (nf nodeFile) nodes() ([]Node, error) {
	if nf.Name == "" {
		return nil, errors.New("name: missing")
	}
	if nf.Count < 0 || nf.Count > maxNodesPerEntry {
		return nil, fmt.Errorf("count: %d is outside 0..%d", nf.Count, maxNodesPerEntry)
	}
	if nf.CPUMilli < 0 {
		return nil, fmt.Errorf("cpu_milli: %d is negative", nf.CPUMilli)
	}
	var mem int64
	if nf.Memory != "" {
		var err error
		if mem, err = ParseBytes(nf.Memory); err != nil {
			return nil, fmt.Errorf("memory: %w", err)
		}
	}
	state := NodeReady
	if nf.State != "" {
		state = NodeState(nf.State)
		if state != NodeReady && state != NodeDrained && state != NodeFailed {
			return nil, fmt.Errorf("state: %q is not one of ready, drained, failed", nf.State)
		}
	}
	gpus, err := nf.GPUs.gpus()
	if err != nil {
		return nil, fmt.Errorf("gpus: %w", err)
	}
	names := []string{nf.Name}
	if nf.Count > 0 {
		names = expandNames(nf.Name, nf.Count)
	}
	nodes := make([]Node, len(names))
	for i, n := range names {
		g := make([]GPU, len(gpus))
		copy(g, gpus)
		nodes[i] = Node{
			Name: n, GPUs: g, CPUMilli: nf.CPUMilli, MemoryBytes: mem,
			Topology: Topology{Rack: nf.Rack, Leaf: nf.Leaf}, State: state, Labels: maps.Clone(nf.Labels),
		}
	}
	return nodes, nil
}

// expandNames names count nodes prefix-01, prefix-02, ... with enough digits.
func expandNames(prefix string, count int) []string {
	width := len(fmt.Sprint(count))
	if width < 2 {
		width = 2
	}
	names := make([]string, count)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%0*d", prefix, width, i+1)
	}
	return names
}

func (gf gpuFile) gpus() ([]GPU, error) {
	if gf.Count < 0 || gf.Count > maxGPUsPerNode {
		return nil, fmt.Errorf("count: %d is outside 0..%d", gf.Count, maxGPUsPerNode)
	}
	if gf.Count > 0 && gf.Model == "" {
		return nil, errors.New("model: missing")
	}
	base := NewGPU(0, gf.Model)
	if gf.Vendor != "" {
		base.Vendor = gf.Vendor
	}
	if base.Vendor == "" && gf.Count > 0 {
		base.Vendor = "nvidia"
	}
	if gf.Memory != "" {
		m, err := ParseBytes(gf.Memory)
		if err != nil {
			return nil, fmt.Errorf("memory: %w", err)
		}
		base.MemoryBytes = m
	}
	if gf.PowerLimitW < 0 || gf.MinPowerLimitW < 0 || gf.MaxPowerLimitW < 0 {
		return nil, errors.New("power limits must not be negative")
	}
	if gf.PowerLimitW > 0 {
		base.PowerLimitW = gf.PowerLimitW
		base.MaxPowerLimitW = gf.PowerLimitW
	}
	if gf.MinPowerLimitW > 0 {
		base.MinPowerLimitW = gf.MinPowerLimitW
	}
	if gf.MaxPowerLimitW > 0 {
		base.MaxPowerLimitW = gf.MaxPowerLimitW
	}
	if base.MinPowerLimitW > 0 && base.MaxPowerLimitW > 0 && base.MinPowerLimitW > base.MaxPowerLimitW {
		return nil, fmt.Errorf("min_power_limit_w %g exceeds max_power_limit_w %g", base.MinPowerLimitW, base.MaxPowerLimitW)
	}
	if gf.MIGCapable != nil {
		base.MIGCapable = *gf.MIGCapable
	}
	if gf.MIGEnabled && !base.MIGCapable {
		return nil, fmt.Errorf("mig_enabled: model %s is not MIG-capable (set mig_capable if it is)", gf.Model)
	}
	base.MIGEnabled = gf.MIGEnabled

	gpus := make([]GPU, gf.Count)
	for i := range gpus {
		gpus[i] = base
		gpus[i].Index = i
	}
	for d, domain := range gf.NVLinkDomains {
		for _, idx := range domain {
			if idx < 0 || idx >= gf.Count {
				return nil, fmt.Errorf("nvlink_domains[%d]: GPU index %d is outside 0..%d", d, idx, gf.Count-1)
			}
			if gpus[idx].NVLinkDomain != "" {
				return nil, fmt.Errorf("nvlink_domains[%d]: GPU %d is already in domain %s", d, idx, gpus[idx].NVLinkDomain)
			}
			gpus[idx].NVLinkDomain = fmt.Sprintf("nvl%d", d)
		}
	}
	return gpus, nil
}
