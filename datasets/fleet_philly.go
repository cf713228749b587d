package datasets

import (
	"errors"
	"fmt"
	"io"

	"github.com/prescient-sched/prescient/cluster"
)

// The Philly machine list (cluster_machine_list.csv), with a space after
// each comma:
//
//	machineId, number of GPUs, single GPU mem
//	m0,2, 12GB
const phillyFleetDoc = "Microsoft Philly machine list (cluster_machine_list.csv: machineId, number of GPUs, single GPU mem); " +
	"12GB GPUs are P100-12GB, 24GB GPUs are P40; PCIe only, racks unknown"

var phillyMachineColumns = []string{"machineId", "number of GPUs", "single GPU mem"}

// phillyGPUModels names the GPU model behind each memory size of the list.
var phillyGPUModels = map[string]string{
	"12GB": "P100-12GB",
	"24GB": "P40",
}

// maxNodeGPUs is the most GPUs a node of a fleet list may have.
const maxNodeGPUs = 64

func init() {
	registerFleet(FleetFormat{Name: "philly", Doc: phillyFleetDoc, Open: func(path string) (*cluster.Fleet, error) {
		return readFleetFile(path, readPhillyMachines)
	}})
}

// readPhillyMachines reads the Philly machine list. Philly's machines had
// PCIe GPUs, so no NVLink domain is set; racks are not in the list.
func readPhillyMachines(r io.Reader, file string) (*cluster.Fleet, error) {
	return readNodeList(r, file, "philly", phillyMachineColumns, phillyMachine)
}

// readNodeList reads a CSV node list, one node a row, into a fleet.
func readNodeList(r io.Reader, file, name string, columns []string, node func(*csvTable) (cluster.Node, error)) (*cluster.Fleet, error) {
	t, err := newCSVTable(r, file, columns)
	if err != nil {
		return nil, err
	}
	fleet := &cluster.Fleet{Name: name}
	for {
		err := t.next()
		if errors.Is(err, io.EOF) {
			return validFleet(fleet, file)
		}
		if err != nil {
			return nil, err
		}
		n, err := node(t)
		if err != nil {
			return nil, err
		}
		fleet.Nodes = append(fleet.Nodes, n)
	}
}

func phillyMachine(t *csvTable) (cluster.Node, error) {
	colID, colGPUs, colMem := t.col("machineId"), t.col("number of GPUs"), t.col("single GPU mem")
	if t.rec[colID] == "" {
		return cluster.Node{}, t.fieldError(colID, errEmpty)
	}
	n, err := parseCount(t.rec[colGPUs], maxNodeGPUs)
	if err != nil {
		return cluster.Node{}, t.fieldError(colGPUs, err)
	}
	model, ok := phillyGPUModels[t.rec[colMem]]
	if !ok {
		return cluster.Node{}, t.fieldError(colMem, fmt.Errorf("%w (want 12GB or 24GB)", errUnknownValue))
	}
	return newNode(t.rec[colID], int(n), model), nil
}

// newNode returns a ready node with count GPUs of the model, catalog
// defaults filled in. UUIDs stay empty: agents report them.
func newNode(name string, count int, model string) cluster.Node {
	node := cluster.Node{Name: name, State: cluster.NodeReady}
	if count > 0 {
		node.GPUs = make([]cluster.GPU, count)
	}
	for i := range node.GPUs {
		node.GPUs[i] = cluster.NewGPU(i, model)
		if node.GPUs[i].Vendor == "" {
			node.GPUs[i].Vendor = "nvidia" // every model in these lists is NVIDIA's
		}
	}
	return node
}

// validFleet checks a fleet read from a list: it has nodes, and the names
// are unique.
func validFleet(f *cluster.Fleet, file string) (*cluster.Fleet, error) {
	if len(f.Nodes) == 0 {
		return nil, fmt.Errorf("%s: the fleet has no nodes", file)
	}
	if err := f.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return f, nil
}
