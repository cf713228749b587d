package cluster_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prescient-sched/prescient/cluster"
)

func TestExampleFleetFile(t *testing.T) {
	path := filepath.Join("..", "examples", "fleet.yaml")
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fleet, err := cluster.ReadFleetFile(f, path)
	if err != nil {
		t.Fatalf("ReadFleetFile(%s): %v", path, err)
	}
	if len(fleet.Nodes) != 7 || fleet.GPUCount() != 4*8+2*4+2 {
		t.Fatalf("example fleet: %d nodes, %d GPUs; want 7 nodes, 42 GPUs", len(fleet.Nodes), fleet.GPUCount())
	}
	dgx := fleet.Nodes[0]
	if dgx.Name != "dgx-01" || dgx.Topology.Rack != "rack-a" || dgx.MemoryBytes != 2<<40 {
		t.Fatalf("first node = %s in %s with %d bytes; want dgx-01 in rack-a with 2 TiB", dgx.Name, dgx.Topology.Rack, dgx.MemoryBytes)
	}
	g := dgx.GPUs[7]
	if g.Model != "A100-SXM4-80GB" || g.MemoryBytes != 80<<30 || !g.MIGCapable || g.PowerLimitW != 400 || g.NVLinkDomain != "nvl0" {
		t.Fatalf("dgx GPU 7 = %+v; want catalog defaults (80 GiB, 400 W, MIG-capable) in domain nvl0", g)
	}
	pcie := fleet.Nodes[4]
	if pcie.GPUs[2].NVLinkDomain != "nvl1" || pcie.GPUs[0].PowerLimitW != 250 || pcie.GPUs[0].MaxPowerLimitW != 300 {
		t.Fatalf("pcie GPUs = %+v; want pairs in nvl0/nvl1 and the file's power limits", pcie.GPUs)
	}
	if fleet.Nodes[6].State != cluster.NodeDrained {
		t.Fatalf("infer-01 state %s, want drained", fleet.Nodes[6].State)
	}
	if len(fleet.Tenants) != 3 || fleet.Tenants[1].Weight != 1 || len(fleet.Tenants[2].Quota) != 1 || fleet.Tenants[2].Quota[0].GPUs != 8 {
		t.Fatalf("tenants = %+v", fleet.Tenants)
	}
}

func TestFleetFileErrorsSayWhere(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{name: "unknown key", yaml: "nodes:\n  - name: a\n    gpuz: 3\n", want: []string{"f.yaml", "line 3", "gpuz"}},
		{name: "bad memory", yaml: "nodes:\n  - name: a\n  - name: b\n    memory: lots\n", want: []string{"f.yaml:3", "nodes[1] (b)", "memory"}},
		{name: "NVLink domain naming a missing GPU", yaml: "nodes:\n  - name: a\n    gpus: {count: 2, model: V100, nvlink_domains: [[0, 2]]}\n", want: []string{"f.yaml:2", "GPU index 2"}},
		{name: "GPUs without a model", yaml: "nodes:\n  - name: a\n    gpus: {count: 2}\n", want: []string{"model: missing"}},
		{name: "MIG on a model without it", yaml: "nodes:\n  - name: a\n    gpus: {count: 1, model: T4, mig_enabled: true}\n", want: []string{"not MIG-capable"}},
		{name: "duplicate node names", yaml: "nodes:\n  - name: a\n  - name: a\n", want: []string{"appears twice"}},
		{name: "zero tenant weight", yaml: "tenants:\n  - {name: t, weight: 0}\nnodes:\n  - name: a\n", want: []string{"f.yaml:2", "weight"}},
		{name: "unknown node state", yaml: "nodes:\n  - name: a\n    state: sleepy\n", want: []string{"state"}},
		{name: "absurd node count", yaml: "nodes:\n  - name: a\n    count: 100000000\n", want: []string{"count"}},
		{name: "fleet too large through repeated entries", yaml: "nodes:\n  - {name: a, count: 10000, gpus: {count: 64, model: T4}}\n  - {name: b, count: 10000, gpus: {count: 64, model: T4}}\n", want: []string{"f.yaml:3", "nodes[1] (b)", "1000000 GPUs"}},
		{name: "empty file", yaml: "", want: []string{"empty"}},
		{name: "no nodes", yaml: "name: x\n", want: []string{"no nodes"}},
		{name: "not YAML", yaml: "nodes: [\n", want: []string{"f.yaml"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := cluster.ReadFleetFile(strings.NewReader(tt.yaml), "f.yaml")
			if err == nil {
				t.Fatal("ReadFleetFile accepted bad input")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestParseBytes(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"16000000000", 16e9, true}, {"80GiB", 80 << 30, true}, {"512Mi", 512 << 20, true}, {"16GB", 16e9, true},
		{"1.5TiB", 3 << 39, true}, {" 12 GB ", 12e9, true}, {"lots", 0, false}, {"-1GiB", 0, false}, {"NaN", 0, false},
		{"1e30TiB", 0, false}, {"", 0, false}, {"9223372036854775808", 0, false}, {"8388608TiB", 0, false},
	}
	for _, tt := range tests {
		got, err := cluster.ParseBytes(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d, ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func FuzzReadFleetFile(f *testing.F) {
	if b, err := os.ReadFile(filepath.Join("..", "examples", "fleet.yaml")); err == nil {
		f.Add(string(b))
	}
	f.Add("nodes:\n  - name: a\n    count: 3\n    gpus: {count: 8, model: H100-SXM5-80GB, nvlink_domains: [[0,1],[2,3]]}\n")
	f.Add("tenants: [{name: x, weight: -1}]\nnodes: [{name: y, memory: 1Ti}]\n")
	f.Fuzz(func(t *testing.T, s string) {
		fleet, err := cluster.ReadFleetFile(strings.NewReader(s), "fuzz.yaml")
		if err != nil {
			return
		}
		if len(fleet.Nodes) == 0 {
			t.Fatal("accepted a fleet without nodes")
		}
		if err := fleet.Validate(); err != nil {
			t.Fatalf("accepted a fleet that does not validate: %v", err)
		}
	})
}

func FuzzParseBytes(f *testing.F) {
	for _, s := range []string{"80GiB", "512Mi", "16GB", "1", "1.5TiB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if b, err := cluster.ParseBytes(s); err == nil && b < 0 {
			t.Fatalf("ParseBytes(%q) = %d", s, b)
		}
	})
}
