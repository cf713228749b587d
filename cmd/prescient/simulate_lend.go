package main

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/datasets"
	"github.com/prescient-sched/prescient/executor/lend"
	"github.com/prescient-sched/prescient/executor/sim"
	"github.com/prescient-sched/prescient/training"
)

// lendSpec is --lend parsed: how the inference pool's idle GPUs are lent.
type lendSpec struct {
	kind   string        // none, oracle, recent or model
	window time.Duration // recent
	dir    string        // model: the registry
	level  float64       // model: the quantile lent on
}

// parseLendSpec reads none, oracle, recent:DURATION or model:DIR[@LEVEL].
func parseLendSpec(s string) (lendSpec, error) {
	kind, arg, hasArg := strings.Cut(s, ":")
	switch kind {
	case "none", "oracle":
		if hasArg {
			return lendSpec{}, fmt.Errorf("lend %q: %s takes no argument", s, kind)
		}
		return lendSpec{kind: kind}, nil
	case "recent":
		d, err := time.ParseDuration(arg)
		if err != nil || d < time.Minute || d > lend.MaxRecent {
			return lendSpec{}, fmt.Errorf("lend %q: window %q is not a duration from 1m to %s", s, arg, lend.MaxRecent)
		}
		return lendSpec{kind: kind, window: d}, nil
	case "model":
		dir, lv, hasLevel := arg, "", false
		if at := strings.LastIndex(arg, "@"); at >= 0 { // a directory may hold an @; the level may not
			dir, lv, hasLevel = arg[:at], arg[at+1:], true
		}
		sp := lendSpec{kind: kind, dir: dir, level: lend.DefaultLevel}
		if dir == "" {
			return lendSpec{}, fmt.Errorf("lend %q: want model:DIR, the idle model's registry", s)
		}
		if hasLevel {
			v, err := strconv.ParseFloat(lv, 64)
			if err != nil || !(v > 0 && v < 1) {
				return lendSpec{}, fmt.Errorf("lend %q: level %q is not a quantile in (0, 1)", s, lv)
			}
			sp.level = v
		}
		return sp, nil
	}
	return lendSpec{}, fmt.Errorf("lend %q: want none, oracle, recent:DURATION or model:DIR[@LEVEL]", s)
}

// lendSettings are the replay's lending settings, checked as serve's are
// (lend.Settings.Validate): the policy's defaults (simulate has no flags
// for them), the model's level and --lend-recent.
func (o *simulateOptions) lendSettings(spec lendSpec) lend.Settings {
	return lend.Settings{Policy: lend.Policy{}.WithDefaults(), Level: cmp.Or(spec.level, lend.DefaultLevel), Recent: o.lendRecent}
}

// inferenceLending builds the replay's lending from --inference,
// --inference-nodes and --lend, adding the inference nodes to fleet. It
// returns nil without --inference.
func (o *simulateOptions) inferenceLending(fleet *cluster.Fleet) (*sim.Lending, error) {
	if o.inference == "" {
		return nil, nil
	}
	spec, err := parseLendSpec(o.lend)
	if err != nil {
		return nil, fmt.Errorf("--lend: %w", err)
	}
	l := &sim.Lending{Lookback: max(lend.DefaultLookback, spec.window, o.lendRecent)}
	threshold := training.DefaultIdleConfig().Model.ThresholdPct
	switch spec.kind {
	case "none":
		l.Lender = noLender{}
	case "oracle":
		l.Lender = lend.Oracle{}
	case "recent":
		l.Lender = lend.Recent{Window: spec.window}
	case "model":
		art, err := training.Registry{Dir: spec.dir}.LoadCurrentIdle()
		if err != nil {
			return nil, fmt.Errorf("--lend: %w", err)
		}
		if art.Model.Config.Step != time.Minute {
			return nil, fmt.Errorf("--lend: the idle model's grid is %s; lending needs a 1-minute grid", art.Model.Config.Step)
		}
		l.Lender = lend.Model{Model: art.Model, Level: spec.level, Recent: o.lendRecent}
		threshold = art.Model.Config.ThresholdPct // busy means what it meant in training
	}
	if l.Replicas, l.ReplicasStart, err = readReplicas(o.inference, threshold); err != nil {
		return nil, fmt.Errorf("--inference: %w", err)
	}
	if l.Nodes, err = addInferenceNodes(fleet, o.inferenceNodes, len(l.Replicas)); err != nil {
		return nil, fmt.Errorf("--inference: %w", err)
	}
	return l, nil
}

// readReplicas reads a per-device utilization series (genai, influx) and
// puts every device, in the order of their IDs, on a 1-minute grid of
// idleness below thresholdPct, from the grid's start (returned too).
func readReplicas(spec string, thresholdPct float64) ([][]float64, time.Time, error) {
	series, err := datasets.ReadSeries(spec) // sorted by ID
	if err != nil {
		return nil, time.Time{}, err
	}
	for _, s := range series {
		if s.Capacity != nil {
			return nil, time.Time{}, fmt.Errorf("series %s counts idle units of a pool; want one device's utilization per series (genai, influx)", s.ID)
		}
	}
	grids, err := training.DeviceGrids(series, thresholdPct, time.Minute)
	if err != nil {
		return nil, time.Time{}, err
	}
	out := make([][]float64, len(grids))
	for i, g := range grids {
		out[i] = g.Idle
	}
	return out, grids[0].Start, nil
}

// inferenceGPUsPerNode is the size of the inference nodes --inference adds.
const inferenceGPUsPerNode = 8

// addInferenceNodes appends n nodes of 8 GPUs (n 0: as many as the
// replicas need) like the fleet's first GPU node, in the pool "inference",
// and returns their names.
func addInferenceNodes(fleet *cluster.Fleet, n, replicas int) ([]string, error) {
	if n <= 0 {
		n = (replicas + inferenceGPUsPerNode - 1) / inferenceGPUsPerNode
	}
	k := slices.IndexFunc(fleet.Nodes, func(n cluster.Node) bool { return len(n.GPUs) > 0 })
	if k < 0 {
		return nil, errors.New("the fleet has no GPU node to model the inference nodes on")
	}
	like := fleet.Nodes[k]
	model := like.GPUs[0].Model
	taken := map[string]bool{}
	for _, n := range fleet.Nodes {
		taken[n.Name] = true
	}
	var names []string
	for k := range n {
		node := cluster.Node{Name: fmt.Sprintf("inference-%02d", k), State: cluster.NodeReady, CPUMilli: like.CPUMilli, MemoryBytes: like.MemoryBytes,
			Labels: map[string]string{cluster.PoolLabel: "inference"}, Topology: cluster.Topology{Rack: "inference", Leaf: "inference"}}
		for g := range inferenceGPUsPerNode {
			node.GPUs = append(node.GPUs, cluster.NewGPU(g, model))
		}
		if taken[node.Name] {
			return nil, fmt.Errorf("the fleet already has a node %s", node.Name)
		}
		fleet.Nodes = append(fleet.Nodes, node)
		names = append(names, node.Name)
	}
	return names, nil
}

// noLender lends nothing: the inference nodes stay the service's.
type noLender struct{}

func (noLender) IdleAhead(q lend.Query) ([]float64, error) { return make([]float64, q.Leads), nil }
