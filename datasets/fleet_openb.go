package datasets

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

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
	"anonymised models (G2, G3) keep unknown memory and power; PATH?every=N keeps every Nth node (the 1st, N+1th, ...)"

var openbNodeColumns = []string{"sn", "cpu_milli", "memory_mib", "gpu", "model"}

func init() {
	registerFleet(FleetFormat{Name: "openb", Doc: openbFleetDoc, Open: openOpenbFleet})
}

// maxEvery bounds the ?every= option.
const maxEvery = 1_000_000

// openOpenbFleet reads "PATH" or "PATH?every=N": with every, only the
// nodes at positions 0, N, 2N, ... of the list are kept (the FGD
// experiments' smaller fleets, e.g. every 5th GPU node: 243 nodes, 1,257
// GPUs).
func openOpenbFleet(spec string) (*cluster.Fleet, error) {
	path, every, err := parseEvery(spec)
	if err != nil {
		return nil, err
	}
	fleet, err := readFleetFile(path, readOpenbNodes)
	if err != nil || every == 1 {
		return fleet, err
	}
	kept := fleet.Nodes[:0]
	for i := 0; i < len(fleet.Nodes); i += every {
		kept = append(kept, fleet.Nodes[i])
	}
	fleet.Nodes = kept
	fleet.Name = fmt.Sprintf("%s-every%d", fleet.Name, every)
	return fleet, nil
}

// parseEvery splits "PATH?every=N" into the path and N (1 without the
// option).
func parseEvery(spec string) (string, int, error) {
	path, opt, ok := strings.Cut(spec, "?")
	if !ok {
		return spec, 1, nil
	}
	key, val, _ := strings.Cut(opt, "=")
	if key != "every" {
		return "", 0, fmt.Errorf("fleet openb:%s: option %q: want every=N", spec, opt)
	}
	n, err := strconv.Atoi(val)
	if err != nil || n < 1 || n > maxEvery {
		return "", 0, fmt.Errorf("fleet openb:%s: every=%s: want a whole number in 1..%d", spec, val, maxEvery)
	}
	if path == "" {
		return "", 0, fmt.Errorf("fleet openb:%s: no path before ?every", spec)
	}
	return path, n, nil
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
