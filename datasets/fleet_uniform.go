package datasets

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/prescient-sched/prescient/cluster"
)

// DefaultUniformGPUModel is the GPU model of a uniform fleet whose spec
// names none.
const DefaultUniformGPUModel = "A100-SXM4-80GB"

// maxUniformNodes bounds the node count of a uniform fleet.
const maxUniformNodes = 100000

const uniformFleetDoc = "uniform:NODESxGPUS[:MODEL], e.g. uniform:16x8:A100-SXM4-80GB; nodes node-001..; " +
	"model defaults to " + DefaultUniformGPUModel + "; SXM models get one NVLink domain per node"

func init() {
	registerFleet(FleetFormat{Name: "uniform", Doc: uniformFleetDoc, Open: uniformFleet})
}

// uniformFleet builds NODES identical ready nodes of GPUS GPUs each from
// "NODESxGPUS[:MODEL]". Nodes are named node-001, node-002, ... (more digits
// when needed). The GPUs of a model whose name says SXM (NVLink/NVSwitch
// boards) share one NVLink domain per node, "nvl0"; others have none.
func uniformFleet(spec string) (*cluster.Fleet, error) {
	nodes, gpus, model, err := parseUniform(spec)
	if err != nil {
		return nil, fmt.Errorf("uniform fleet %q: %w (want NODESxGPUS[:MODEL], e.g. 16x8:A100-SXM4-80GB)", spec, err)
	}
	width := max(3, len(strconv.Itoa(nodes)))
	fleet := &cluster.Fleet{Name: fmt.Sprintf("uniform-%dx%d", nodes, gpus), Nodes: make([]cluster.Node, nodes)}
	nvlink := strings.Contains(strings.ToUpper(model), "SXM")
	for i := range fleet.Nodes {
		node := newNode(fmt.Sprintf("node-%0*d", width, i+1), gpus, model)
		for g := range node.GPUs {
			if nvlink {
				node.GPUs[g].NVLinkDomain = "nvl0"
			}
		}
		fleet.Nodes[i] = node
	}
	return fleet, nil
}

func parseUniform(spec string) (nodes, gpus int, model string, err error) {
	shape, model, hasModel := strings.Cut(spec, ":")
	model = strings.TrimSpace(model)
	if !hasModel {
		model = DefaultUniformGPUModel
	} else if model == "" {
		return 0, 0, "", errors.New("empty GPU model")
	}
	n, g, ok := strings.Cut(strings.ToLower(strings.TrimSpace(shape)), "x")
	if !ok {
		return 0, 0, "", fmt.Errorf("shape %q has no x", shape)
	}
	if nodes, err = uniformCount("nodes", n, 1, maxUniformNodes); err != nil {
		return 0, 0, "", err
	}
	if gpus, err = uniformCount("gpus per node", g, 0, maxNodeGPUs); err != nil {
		return 0, 0, "", err
	}
	return nodes, gpus, model, nil
}

func uniformCount(what, s string, lo, hi int) (int, error) {
	v, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%s %q is not an integer", what, s)
	}
	if v < lo || v > hi {
		return 0, fmt.Errorf("%s %d is outside %d..%d", what, v, lo, hi)
	}
	return v, nil
}
