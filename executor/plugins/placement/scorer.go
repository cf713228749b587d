package placement

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
)

// Context is what a scorer may read besides the node and the request.
type Context struct {
	// Typical is the distribution of requests the cluster receives (the
	// fragmentation-aware scorers need it).
	Typical *Typical
	// Rand drives the random baseline and, with RandomTies, breaks ties
	// between nodes.
	Rand *rand.Rand
	// RandomTies breaks ties between equally scored nodes at random
	// (kube-scheduler's selectHost); without it the first node in the
	// order given to Place wins.
	RandomTies bool
}

// Scorer rates placing a request on one node that fits it: higher is
// better. It also names the GPUs of the node the request would take (into
// buf, which it may reuse).
type Scorer interface {
	Name() string
	Score(n *Node, r *Request, ctx *Context, buf []int) (score float64, gpus []int)
}

// Normalizer is implemented by scorers whose scores are rescaled over the
// feasible nodes before the best is chosen (kube-scheduler's
// NormalizeScore).
type Normalizer interface {
	Normalize(scores []float64)
}

// Explainer is implemented by scorers that can say in words why the chosen
// node won.
type Explainer interface {
	Explain(n *Node, r *Request, ctx *Context, score float64) string
}

// ErrUnknown is returned (wrapped) for a placement name the registry lacks.
var ErrUnknown = errors.New("unknown placement")

type entry struct {
	doc      string
	typical  bool // reads Context.Typical
	newScore func() Scorer
}

// registry is the placements by name, built once: NeedsTypical is asked
// every planning cycle.
var registry = map[string]entry{
	BestFitName:       {doc: "FGD simulator's BestFit: least CPU and GPU left after placement, normalised over nodes", newScore: func() Scorer { return bestFit{} }},
	DotProductName:    {doc: "Tetris dot product of free and requested (CPU, GPU), FGD simulator's DotProd (merge, max)", newScore: func() Scorer { return dotProduct{} }},
	GPUPackingName:    {doc: "FGD simulator's GpuPacking: shared GPUs, then free GPUs of used nodes, then free nodes", newScore: func() Scorer { return gpuPacking{} }},
	GPUClusteringName: {doc: "FGD simulator's GpuClustering: nodes already running the same kind of request", newScore: func() Scorer { return gpuClustering{} }},
	RandomName:        {doc: "a random feasible node, a random fitting GPU", newScore: func() Scorer { return random{} }},
	FGDName:           {doc: "FGD (ATC'23): least fragmentation increase against the typical requests, integer sigmoid score", typical: true, newScore: func() Scorer { return fgd{} }},
	SpreadName:        {doc: "energy-blind spreading: the node and GPU with the most free share", newScore: func() Scorer { return spread{} }},
	PrescientName:     {doc: "fragmentation increase in full precision against the requests the cluster receives; near-ties to fuller nodes and GPUs", typical: true, newScore: func() Scorer { return prescient{} }},
}

// Names lists the placements, sorted.
func Names() []string {
	var out []string
	for n := range registry {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Doc describes a placement in one line.
func Doc(name string) string { return registry[name].doc }

// NeedsTypical reports whether a placement scores against the typical
// request distribution.
func NeedsTypical(name string) bool { return registry[name].typical }

// New returns the named scorer.
func New(name string) (Scorer, error) {
	e, ok := registry[name]
	if !ok {
		return nil, fmt.Errorf("%w %q (want one of %s)", ErrUnknown, name, strings.Join(Names(), ", "))
	}
	return e.newScore(), nil
}
