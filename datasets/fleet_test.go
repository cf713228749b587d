package datasets

import (
	"reflect"
	"strings"
	"testing"

	"github.com/prescient-sched/prescient/cluster"
)

const gib = int64(1) << 30

func TestReadPhillyFleetRealMachineList(t *testing.T) {
	f, err := ReadFleet("philly:" + sharedDataset(t, "philly", "cluster_machine_list.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Nodes) != 552 || f.GPUCount() != 321*2+231*8 {
		t.Fatalf("%d nodes with %d GPUs, want 552 with %d", len(f.Nodes), f.GPUCount(), 321*2+231*8)
	}
	models := countModels(f)
	if want := map[string]int{"P100-12GB": 642, "P40": 1848}; !reflect.DeepEqual(models, want) {
		t.Errorf("GPU models %v, want %v", models, want)
	}
	for _, n := range f.Nodes {
		if n.State != cluster.NodeReady || n.Topology != (cluster.Topology{}) {
			t.Fatalf("node %s: state %q, topology %+v; want ready, none", n.Name, n.State, n.Topology)
		}
		for _, g := range n.GPUs {
			if g.UUID != "" || g.NVLinkDomain != "" || g.Vendor != "nvidia" || (g.MemoryBytes != 12*gib && g.MemoryBytes != 24*gib) {
				t.Fatalf("node %s gpu %+v: want no UUID, PCIe only, NVIDIA, 12 or 24 GiB", n.Name, g)
			}
		}
	}
}

func countModels(f *cluster.Fleet) map[string]int {
	models := map[string]int{}
	for _, n := range f.Nodes {
		for _, g := range n.GPUs {
			models[g.Model]++
		}
	}
	return models
}

func TestReadOpenbFleetRealNodeLists(t *testing.T) {
	gpuNodes, err := ReadFleet("openb:" + sharedDataset(t, "alibaba-openb", "openb_node_list_gpu_node.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if len(gpuNodes.Nodes) != 1213 || gpuNodes.GPUCount() != 6212 {
		t.Errorf("GPU node list: %d nodes, %d GPUs; want 1,213 and 6,212", len(gpuNodes.Nodes), gpuNodes.GPUCount())
	}
	allNodes, err := ReadFleet("openb:" + sharedDataset(t, "alibaba-openb", "openb_node_list_all_node.csv"))
	if err != nil {
		t.Fatal(err)
	}
	cpuOnly := 0
	for _, n := range allNodes.Nodes {
		if len(n.GPUs) == 0 {
			cpuOnly++
		}
	}
	if len(allNodes.Nodes) != 1523 || cpuOnly != 310 {
		t.Errorf("all-node list: %d nodes, %d CPU-only; want 1,523 and 310", len(allNodes.Nodes), cpuOnly)
	}
}

func TestReadFleetFixtures(t *testing.T) {
	tests := []struct {
		name, format, file string
		nodes, gpus        int
		first              cluster.Node
	}{
		{"philly machines map memory to models", "philly", "philly_machines_small.csv", 4, 20,
			cluster.Node{Name: "m0", State: cluster.NodeReady, GPUs: []cluster.GPU{cluster.NewGPU(0, "P100-12GB"), cluster.NewGPU(1, "P100-12GB")}}},
		{"openb nodes keep CPU-only nodes and their resources", "openb", "openb_nodes_small.csv", 4, 14,
			cluster.Node{Name: "openb-node-0000", State: cluster.NodeReady, CPUMilli: 32000, MemoryBytes: 262144 << 20}},
		{"the yaml fleet file goes through cluster.ReadFleetFile", "yaml", "fleet_small.yaml", 3, 20, cluster.Node{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := readTestdata(t, tt.file)
			plain, err := ReadFleet(tt.format + ":" + writeTemp(t, data, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			packed, err := ReadFleet(tt.format + ":" + gzipToTemp(t, data, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(plain, packed) {
				t.Error("gzip read differs from plain read")
			}
			if len(plain.Nodes) != tt.nodes || plain.GPUCount() != tt.gpus {
				t.Errorf("%d nodes, %d GPUs; want %d, %d", len(plain.Nodes), plain.GPUCount(), tt.nodes, tt.gpus)
			}
			if tt.first.Name != "" && !reflect.DeepEqual(plain.Nodes[0], tt.first) {
				t.Errorf("first node\n got %+v\nwant %+v", plain.Nodes[0], tt.first)
			}
		})
	}
}

func TestOpenbFleetGivesUnknownModelsNVIDIAAndNoMemory(t *testing.T) {
	f, err := readOpenbNodes(strings.NewReader(string(readTestdata(t, "openb_nodes_small.csv"))), "n.csv")
	if err != nil {
		t.Fatal(err)
	}
	g := f.Nodes[2].GPUs[7]
	if g.Model != "G2" || g.Vendor != "nvidia" || g.MemoryBytes != 0 || g.Index != 7 {
		t.Errorf("G2 GPU = %+v", g)
	}
	if v := f.Nodes[3].GPUs[0]; v.MemoryBytes != 32*gib {
		t.Errorf("V100M32 memory %d, want the catalog's 32 GiB", v.MemoryBytes)
	}
}

func TestUniformFleet(t *testing.T) {
	tests := []struct {
		name, spec     string
		nodes, gpus    int
		firstName      string
		model, nvlink  string
		gpuMemoryBytes int64
	}{
		{"SXM GPUs share one NVLink domain per node", "uniform:16x8:A100-SXM4-80GB", 16, 128, "node-001", "A100-SXM4-80GB", "nvl0", 80 * gib},
		{"the model defaults to A100-SXM4-80GB", "uniform:2x4", 2, 8, "node-001", DefaultUniformGPUModel, "nvl0", 80 * gib},
		{"PCIe models have no NVLink domain", "uniform:3x4:T4", 3, 12, "node-001", "T4", "", 16 * gib},
		{"names widen with the node count", "uniform:1000x1:P40", 1000, 1000, "node-0001", "P40", "", 24 * gib},
		{"CPU-only nodes are allowed", "uniform:2x0", 2, 0, "node-001", "", "", 0},
		{"the x may be upper case", "uniform:2X2:V100", 2, 4, "node-001", "V100", "", 16 * gib},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := ReadFleet(tt.spec)
			if err != nil {
				t.Fatal(err)
			}
			if len(f.Nodes) != tt.nodes || f.GPUCount() != tt.gpus || f.Nodes[0].Name != tt.firstName {
				t.Fatalf("%d nodes, %d GPUs, first %s; want %d, %d, %s", len(f.Nodes), f.GPUCount(), f.Nodes[0].Name, tt.nodes, tt.gpus, tt.firstName)
			}
			if err := f.Validate(); err != nil {
				t.Fatal(err)
			}
			for _, n := range f.Nodes {
				for _, g := range n.GPUs {
					if g.Model != tt.model || g.NVLinkDomain != tt.nvlink || g.MemoryBytes != tt.gpuMemoryBytes || g.UUID != "" {
						t.Fatalf("node %s gpu %+v", n.Name, g)
					}
				}
			}
		})
	}
}

func TestFleetSpecErrors(t *testing.T) {
	tests := []struct{ name, spec, want string }{
		{"an unknown format lists the formats", "lsf:nodes.conf", "openb, philly, swf, uniform, yaml"},
		{"a spec without a colon lists the formats", "uniform", "FORMAT:PATH"},
		{"a shape without x is rejected", "uniform:16", "has no x"},
		{"zero nodes are rejected", "uniform:0x8", "nodes 0 is outside 1..100000"},
		{"too many GPUs per node are rejected", "uniform:2x65", "gpus per node 65 is outside 0..64"},
		{"a non-numeric shape is rejected", "uniform:axb", "not an integer"},
		{"an empty model is rejected", "uniform:2x2:", "empty GPU model"},
		{"a missing file is named", "philly:/no/such/machines.csv", "/no/such/machines.csv"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadFleet(tt.spec)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ReadFleet(%q) error = %v, want it to mention %q", tt.spec, err, tt.want)
			}
		})
	}
}

func TestFleetListBadRows(t *testing.T) {
	tests := []struct {
		name string
		read func(string) error
		data string
		want string
	}{
		{"a Philly GPU memory size that maps to no model is rejected", phillyFleetRead,
			"machineId, number of GPUs, single GPU mem\nm0,2, 16GB\n", `f.csv:2: field single GPU mem: "16GB": unknown value`},
		{"a Philly machine with 65 GPUs is rejected", phillyFleetRead,
			"machineId, number of GPUs, single GPU mem\nm0,65, 12GB\n", `f.csv:2: field number of GPUs: "65": is too large`},
		{"a Philly machine listed twice is rejected", phillyFleetRead,
			"machineId, number of GPUs, single GPU mem\nm0,2, 12GB\nm0,2, 12GB\n", `"m0" appears twice`},
		{"an empty Philly list has no nodes", phillyFleetRead,
			"machineId, number of GPUs, single GPU mem\n", "no nodes"},
		{"a renamed Philly column is named", phillyFleetRead,
			"machineId, GPUs, single GPU mem\n", `"number of GPUs" is missing`},
		{"an openb GPU node without a model is rejected", openbFleetRead,
			"sn,cpu_milli,memory_mib,gpu,model\nn0,1,1,2,\n", `f.csv:2: field model: "": empty on a node with GPUs`},
		{"an openb CPU node with a model is rejected", openbFleetRead,
			"sn,cpu_milli,memory_mib,gpu,model\nn0,1,1,0,T4\n", `field model: "T4": set on a node with no GPUs`},
		{"a negative openb memory is rejected", openbFleetRead,
			"sn,cpu_milli,memory_mib,gpu,model\nn0,1,-1,0,\n", `field memory_mib: "-1": is negative`},
		{"an empty openb node name is rejected", openbFleetRead,
			"sn,cpu_milli,memory_mib,gpu,model\n,1,1,0,\n", `field sn: "": empty`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.read(tt.data)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func phillyFleetRead(data string) error {
	_, err := readPhillyMachines(strings.NewReader(data), "f.csv")
	return err
}

func openbFleetRead(data string) error {
	_, err := readOpenbNodes(strings.NewReader(data), "f.csv")
	return err
}

func TestFleetFormatsAreSortedAndDocumented(t *testing.T) {
	var names []string
	for _, f := range FleetFormats() {
		names = append(names, f.Name)
		if f.Doc == "" || f.Open == nil {
			t.Errorf("format %s lacks a doc or an opener", f.Name)
		}
	}
	if want := []string{"openb", "philly", "swf", "uniform", "yaml"}; !reflect.DeepEqual(names, want) {
		t.Errorf("FleetFormats() = %v, want %v", names, want)
	}
}
