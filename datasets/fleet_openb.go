package datasets

import (
	"errors"
	"io"

	"github.com/prescient-sched/prescient/cluster"
)

// The Alibaba openb node lists (openb_node_list_gpu_node.csv and
// openb_node_list_all_node.csv):
//
//	sn,cpu_milli,memory_mib,gpu,model
//	openb-node-0000,64000,262144,2,P100
//
// CPU-only nodes have gpu 0 and an empty model.
const openbFleetDoc = "Alibaba openb node list (openb_node_list_*.csv: sn,cpu_milli,memory_mib,gpu,model); " +
	"anonymised models (G2, G3) keep unknown memory and power"

var openbNodeColumns = []string{"sn", "cpu_milli", "memory_mib", "gpu", "model"}

func init() {
	registerFleet(FleetFormat{Name: "openb", Doc: openbFleetDoc, Open: func(path string) (*cluster.Fleet, error) {
		return readFleetFile(path, readOpenbNodes)
	}})
}

// readOpenbNodes reads an openb node list.
func readOpenbNodes(r io.Reader, file string) (*cluster.Fleet, error) {
	return readNodeList(r, file, "openb", openbNodeColumns, openbNode)
}

func openbNode(t *csvTable) (cluster.Node, error) {
	colSN, colModel := t.col("sn"), t.col("model")
	if t.rec[colSN] == "" {
		return cluster.Node{}, t.fieldError(colSN, errEmpty)
	}
	vals, err := t.counts(countColumn{"cpu_milli", maxMilliCPU}, countColumn{"memory_mib", maxMiB}, countColumn{"gpu", maxNodeGPUs})
	if err != nil {
		return cluster.Node{}, err
	}
	model := t.rec[colModel]
	switch {
	case vals[2] > 0 && model == "":
		return cluster.Node{}, t.fieldError(colModel, errors.New("empty on a node with GPUs"))
	case vals[2] == 0 && model != "":
		return cluster.Node{}, t.fieldError(colModel, errors.New("set on a node with no GPUs"))
	}
	node := newNode(t.rec[colSN], int(vals[2]), model)
	node.CPUMilli, node.MemoryBytes = vals[0], vals[1]<<20
	return node, nil
}
