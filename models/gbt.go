package models

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// GBTName names the gradient-boosted trees learner.
const GBTName = "gbt"

func init() {
	register(Learner{Name: GBTName, Compared: true,
		Doc: "gradient-boosted regression trees (least absolute deviation, histogram splits; own code: golearn has none), quantiles from the residuals of the latest rows",
		New: func(o Options) Model { return NewGBT(DefaultGBTConfig(), o) }})
}

// GBTConfig tunes the boosted trees.
type GBTConfig struct {
	Trees        int     // boosting rounds
	Depth        int     // levels of each tree
	LearningRate float64 // shrinkage of each tree's values
	MinLeaf      int     // fewest rows in a leaf
	Subsample    float64 // share of rows each tree sees (0 < s ≤ 1)
	Bins         int     // quantile bins per feature, at most 256
	// CalibShare is the share of the latest rows (the rows come in time
	// order) held out to stop adding trees where their error stops falling
	// and to learn the spread of the errors; as many trees are grown again
	// on every row after.
	CalibShare float64
	// SpreadBins is how many groups of rows, by their P50, have a spread
	// of their own: a long job's errors are not a short one's.
	SpreadBins int
}

// DefaultGBTConfig is 150 trees of depth 4 at a learning rate of 0.1, as
// common defaults go.
func DefaultGBTConfig() GBTConfig {
	return GBTConfig{Trees: 150, Depth: 4, LearningRate: 0.1, MinLeaf: 20, Subsample: 0.8, Bins: 64, CalibShare: 0.2, SpreadBins: 6}
}

// Validate says what in the config is out of range.
func (c GBTConfig) Validate() error {
	switch {
	case c.Trees < 1 || c.Depth < 1 || c.Depth > 12 || c.MinLeaf < 1:
		return fmt.Errorf("%s: trees %d, depth %d, min leaf %d: want at least 1 (depth at most 12)", GBTName, c.Trees, c.Depth, c.MinLeaf)
	case !(c.LearningRate > 0 && c.LearningRate <= 1) || !(c.Subsample > 0 && c.Subsample <= 1):
		return fmt.Errorf("%s: learning rate %g, subsample %g: want (0, 1]", GBTName, c.LearningRate, c.Subsample)
	case c.Bins < 2 || c.Bins > 256 || c.SpreadBins < 1:
		return fmt.Errorf("%s: bins %d, spread bins %d: want 2 to 256 and at least 1", GBTName, c.Bins, c.SpreadBins)
	case !(c.CalibShare > 0 && c.CalibShare < 1):
		return fmt.Errorf("%s: calibration share %g: want (0, 1)", GBTName, c.CalibShare)
	}
	return nil
}

// GBT is gradient boosting with the absolute loss (Friedman's LAD
// TreeBoost: each tree is grown on the signs of the residuals and its
// leaves hold their medians), on the log target relative to the rolling
// median (Options.offsetColumn), as the other learners. golearn has no
// boosting; the trees are grown here on per-feature quantile bins. The
// quantiles are the P50 plus the quantiles of the errors on the latest
// rows, held out while fitting, grouped by the P50's level; those rows
// also say how many trees to keep (early stopping), so that patterns of
// the older rows that no longer hold are not learned further.
//
// It is compared, not served (Learner.Compared): on Philly, trained at
// 2017-11-20, it had the best holdout score and then a mae_log of 1.29 on
// the next ten days against the rolling median's 0.97, where it beat the
// rolling median on the two windows before. A gate that scores learners
// over several windows should decide when it serves.
type GBT struct {
	Config GBTConfig
	P      int
	Offset int
	Base   float64
	// Cuts are each feature's bin edges; a value v is in the first bin
	// whose edge is at or above it.
	Cuts [][]float64
	// The trees, flattened: node i of tree t is Nodes[t][i].
	Nodes [][]gbtNode
	// SpreadEdges split the P50 into SpreadBins groups; Spread[g] are the
	// errors of group g at the quantiles 1%, 2%, ..., 99%.
	SpreadEdges []float64
	Spread      [][]float64

	opt Options
	// used are the features some tree splits on (usedFeatures), set
	// wherever Nodes are: only they need binning.
	used []int
}

// gbtNode is a split (Feature ≥ 0: go Left when the value's bin is at or
// below Bin) or a leaf (Feature -1, Value).
type gbtNode struct {
	Feature     int32
	Bin         uint8
	Left, Right int32
	Value       float64
}

var _ Model = (*GBT)(nil)

// NewGBT returns an unfitted boosted-trees learner.
func NewGBT(c GBTConfig, o Options) *GBT { return &GBT{Config: c, opt: o} }

// Name implements Model.
func (*GBT) Name() string { return GBTName }

// Fit grows the trees on the earlier rows, stopping where the error on
// the latest rows (held out) stops falling, learns the errors' spread on
// those rows, then grows as many trees again on every row.
func (m *GBT) Fit(ctx context.Context, X [][]float64, y []float64) error {
	p, err := checkFit(X, y)
	if err != nil {
		return err
	}
	if err := m.Config.Validate(); err != nil {
		return err
	}
	m.P, m.Offset = p, m.opt.offsetColumn()
	r := residuals(X, y, m.Offset)
	n := len(r)
	k := n - int(float64(n)*m.Config.CalibShare)
	if k < 2*m.Config.MinLeaf || n-k < m.Config.SpreadBins {
		// Too few rows to hold any out: every tree, and the spread of
		// the fit rows' own errors.
		if err := m.grow(ctx, X, r, m.Config.Trees, nil, nil); err != nil {
			return err
		}
		m.learnSpread(X, r)
		return nil
	}
	if err := m.grow(ctx, X[:k], r[:k], m.Config.Trees, X[k:], r[k:]); err != nil {
		return err
	}
	m.learnSpread(X[k:], r[k:])
	return m.grow(ctx, X, r, len(m.Nodes), nil, nil)
}

// grow fits the bins and trees trees on rows X with targets r. With
// validation rows vX, vr it keeps only the trees up to the one after
// which their absolute error was least.
func (m *GBT) grow(ctx context.Context, X [][]float64, r []float64, trees int, vX [][]float64, vr []float64) error {
	c := m.Config
	n := len(r)
	m.Cuts = make([][]float64, m.P)
	binned := make([][]uint8, m.P) // by feature, then row: the split scan reads a column at a time
	vBinned := make([][]uint8, m.P)
	col := make([]float64, n)
	for j := range m.P {
		for i := range n {
			col[i] = X[i][j]
		}
		m.Cuts[j] = binEdges(col, c.Bins)
		binned[j] = make([]uint8, n)
		for i := range n {
			binned[j][i] = binOf(m.Cuts[j], X[i][j])
		}
		vBinned[j] = make([]uint8, len(vr))
		for i := range vr {
			vBinned[j][i] = binOf(m.Cuts[j], vX[i][j])
		}
	}
	sorted := slices.Clone(r)
	slices.Sort(sorted)
	m.Base = QuantileSorted(sorted, 0.5)
	f := make([]float64, n)
	for i := range f {
		f[i] = m.Base
	}
	vf := make([]float64, len(vr))
	for i := range vf {
		vf[i] = m.Base
	}
	bestErr, bestTrees := math.Inf(1), 0
	rng := rand.New(rand.NewPCG(uint64(m.opt.Seed), 0x9b7))
	m.Nodes = m.Nodes[:0]
	g := &gbtGrower{c: c, binned: binned, grad: make([]float64, n), resid: make([]float64, n)}
	rows := make([]int32, 0, n)
	for t := range trees {
		if err := ctx.Err(); err != nil {
			return err
		}
		for i := range n {
			g.resid[i] = r[i] - f[i]
			g.grad[i] = sign(g.resid[i])
		}
		rows = rows[:0]
		for i := range n {
			if c.Subsample >= 1 || rng.Float64() < c.Subsample {
				rows = append(rows, int32(i))
			}
		}
		tree := g.tree(rows)
		for i := range n {
			f[i] += tree[leafOf(tree, binned, i)].Value
		}
		m.Nodes = append(m.Nodes, tree)
		if len(vr) > 0 {
			e := 0.0
			for i := range vr {
				vf[i] += tree[leafOf(tree, vBinned, i)].Value
				e += math.Abs(vr[i] - vf[i])
			}
			if e < bestErr {
				bestErr, bestTrees = e, t+1
			}
		}
		m.opt.progress(t+1, trees)
	}
	if len(vr) > 0 {
		m.Nodes = m.Nodes[:max(bestTrees, 1)]
	}
	m.used = m.usedFeatures()
	return nil
}

// learnSpread keeps the errors' quantiles on rows X, r, grouped by P50.
func (m *GBT) learnSpread(X [][]float64, r []float64) {
	type pe struct{ p50, err float64 }
	pts := make([]pe, len(r))
	buf := make([]uint8, m.P)
	for i := range r {
		v := m.raw(X[i], buf)
		pts[i] = pe{v, r[i] - v}
	}
	slices.SortFunc(pts, func(a, b pe) int { return cmp.Compare(a.p50, b.p50) })
	groups := min(m.Config.SpreadBins, len(pts))
	m.SpreadEdges, m.Spread = nil, nil
	for gi := range groups {
		lo, hi := gi*len(pts)/groups, (gi+1)*len(pts)/groups
		errs := make([]float64, 0, hi-lo)
		for _, x := range pts[lo:hi] {
			errs = append(errs, x.err)
		}
		slices.Sort(errs)
		qs := make([]float64, 99)
		for k := range qs {
			qs[k] = QuantileSorted(errs, float64(k+1)/100)
			if k > 0 { // interpolating between equal values may round a hair below
				qs[k] = max(qs[k], qs[k-1])
			}
		}
		m.Spread = append(m.Spread, qs)
		if gi > 0 {
			m.SpreadEdges = append(m.SpreadEdges, pts[lo].p50)
		}
	}
}

// raw is the trees' P50 of row x, relative to the offset; each feature
// the trees split on (m.used) is binned once (buf holds the bins, P
// long).
func (m *GBT) raw(x []float64, buf []uint8) float64 {
	for _, j := range m.used {
		buf[j] = binOf(m.Cuts[j], x[j])
	}
	v := m.Base
	for _, tree := range m.Nodes {
		i := int32(0)
		for tree[i].Feature >= 0 {
			if nd := tree[i]; buf[nd.Feature] <= nd.Bin {
				i = nd.Left
			} else {
				i = nd.Right
			}
		}
		v += tree[i].Value
	}
	return v
}

// usedFeatures are the features some tree splits on, in order: only they
// need binning (on Philly the trees split on about half of them).
func (m *GBT) usedFeatures() []int {
	seen := make([]bool, m.P)
	for _, tree := range m.Nodes {
		for _, nd := range tree {
			if nd.Feature >= 0 {
				seen[nd.Feature] = true
			}
		}
	}
	var out []int
	for j, ok := range seen {
		if ok {
			out = append(out, j)
		}
	}
	return out
}

// PredictQuantiles implements Regressor.
func (m *GBT) PredictQuantiles(X [][]float64, qs []float64) ([][]float64, error) {
	if len(m.Nodes) == 0 || len(m.Spread) == 0 {
		return nil, ErrNotFitted
	}
	if err := checkPredict(X, qs, m.P); err != nil {
		return nil, err
	}
	out := matrix(len(X), len(qs))
	buf := make([]uint8, m.P)
	for i, x := range X {
		v := m.raw(x, buf)
		g, _ := slices.BinarySearch(m.SpreadEdges, v)
		spread := m.Spread[min(g, len(m.Spread)-1)]
		for k, q := range qs {
			out[i][k] = offsetOf(x, m.Offset) + v + spreadAt(spread, q)
		}
	}
	return out, nil
}

// spreadAt interpolates the errors' quantile q from the 1%..99% grid
// (clamped at its ends).
func spreadAt(s []float64, q float64) float64 {
	pos := q*100 - 1
	switch {
	case pos <= 0:
		return s[0]
	case pos >= float64(len(s)-1):
		return s[len(s)-1]
	}
	lo := int(pos)
	frac := pos - float64(lo)
	return s[lo]*(1-frac) + s[lo+1]*frac
}

// MarshalBinary implements Model.
func (m *GBT) MarshalBinary() ([]byte, error) { return gobEncode((*gbtWire)(m)) }

// UnmarshalBinary implements Model; it checks that every tree's nodes
// point inside it and downwards, so a damaged artifact cannot loop.
func (m *GBT) UnmarshalBinary(data []byte) error {
	var w gbtWire
	if err := gobDecode(data, &w); err != nil {
		return fmt.Errorf("%s: %w", GBTName, err)
	}
	if len(w.Cuts) != w.P || len(w.Spread) == 0 || len(w.SpreadEdges) != len(w.Spread)-1 {
		return fmt.Errorf("%s: %d bin lists for %d features, %d spreads for %d edges", GBTName, len(w.Cuts), w.P, len(w.Spread), len(w.SpreadEdges))
	}
	for _, s := range w.Spread {
		if len(s) != 99 || !slices.IsSorted(s) {
			return fmt.Errorf("%s: a spread is not 99 ordered quantiles", GBTName)
		}
	}
	for t, tree := range w.Nodes {
		if len(tree) == 0 {
			return fmt.Errorf("%s: tree %d is empty", GBTName, t)
		}
		for i, nd := range tree {
			if nd.Feature >= 0 && (int(nd.Feature) >= w.P || nd.Left <= int32(i) || nd.Right <= int32(i) ||
				int(nd.Left) >= len(tree) || int(nd.Right) >= len(tree)) {
				return fmt.Errorf("%s: tree %d node %d is damaged", GBTName, t, i)
			}
		}
	}
	opt := m.opt
	*m = GBT(w)
	m.opt = opt
	m.used = m.usedFeatures()
	return nil
}

// gbtWire is GBT without its methods, for gob.
type gbtWire GBT

// gbtGrower grows one tree on the signs of the residuals.
type gbtGrower struct {
	c      GBTConfig
	binned [][]uint8
	grad   []float64 // sign of each row's residual
	resid  []float64 // each row's residual
}

// tree grows a tree of the rows breadth first and returns its nodes.
func (g *gbtGrower) tree(rows []int32) []gbtNode {
	type work struct {
		node  int32
		rows  []int32
		depth int
	}
	nodes := []gbtNode{{Feature: -1}}
	queue := []work{{0, rows, 0}}
	for len(queue) > 0 {
		w := queue[0]
		queue = queue[1:]
		f, bin, ok := -1, uint8(0), false
		if w.depth < g.c.Depth && len(w.rows) >= 2*g.c.MinLeaf {
			f, bin, ok = g.bestSplit(w.rows)
		}
		if !ok {
			nodes[w.node] = gbtNode{Feature: -1, Value: g.c.LearningRate * g.leafValue(w.rows)}
			continue
		}
		var left, right []int32
		for _, i := range w.rows {
			if g.binned[f][i] <= bin {
				left = append(left, i)
			} else {
				right = append(right, i)
			}
		}
		l, r := int32(len(nodes)), int32(len(nodes)+1)
		nodes = append(nodes, gbtNode{Feature: -1}, gbtNode{Feature: -1})
		nodes[w.node] = gbtNode{Feature: int32(f), Bin: bin, Left: l, Right: r}
		queue = append(queue, work{l, left, w.depth + 1}, work{r, right, w.depth + 1})
	}
	return nodes
}

// bestSplit finds the feature and bin that most reduce the squared error
// of the gradients, with at least MinLeaf rows a side.
func (g *gbtGrower) bestSplit(rows []int32) (feature int, bin uint8, ok bool) {
	var sum [256]float64
	var cnt [256]int
	total := 0.0
	for _, i := range rows {
		total += g.grad[i]
	}
	n := len(rows)
	best := total * total / float64(n)
	for f, col := range g.binned {
		clear(sum[:])
		clear(cnt[:])
		for _, i := range rows {
			b := col[i]
			sum[b] += g.grad[i]
			cnt[b]++
		}
		sl, nl := 0.0, 0
		for b := range 255 {
			sl += sum[b]
			nl += cnt[b]
			if nl < g.c.MinLeaf {
				continue
			}
			if n-nl < g.c.MinLeaf {
				break
			}
			if cnt[b] == 0 {
				continue
			}
			sr := total - sl
			if gain := sl*sl/float64(nl) + sr*sr/float64(n-nl); gain > best+1e-12 {
				best, feature, bin, ok = gain, f, uint8(b), true
			}
		}
	}
	return feature, bin, ok
}

// leafValue is the median residual of the rows (the absolute loss's best
// constant).
func (g *gbtGrower) leafValue(rows []int32) float64 {
	if len(rows) == 0 {
		return 0
	}
	v := make([]float64, len(rows))
	for k, i := range rows {
		v[k] = g.resid[i]
	}
	slices.Sort(v)
	return QuantileSorted(v, 0.5)
}

// leafOf is the leaf of binned row i in tree.
func leafOf(tree []gbtNode, binned [][]uint8, i int) int32 {
	n := int32(0)
	for tree[n].Feature >= 0 {
		nd := tree[n]
		if binned[nd.Feature][i] <= nd.Bin {
			n = nd.Left
		} else {
			n = nd.Right
		}
	}
	return n
}

// binEdges are at most bins-1 distinct quantiles of v (v is left as it
// is).
func binEdges(v []float64, bins int) []float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	var edges []float64
	for k := 1; k < bins; k++ {
		e := QuantileSorted(s, float64(k)/float64(bins))
		if len(edges) == 0 || e > edges[len(edges)-1] {
			edges = append(edges, e)
		}
	}
	return edges
}

// binOf is the first bin whose edge is at or above v (len(edges) past
// the last); NaN goes to the last bin.
func binOf(edges []float64, v float64) uint8 {
	if math.IsNaN(v) {
		return uint8(len(edges))
	}
	// How many edges are below v, by a search without unpredictable
	// branches (the compiler makes the step a conditional move): binning
	// each row was half of prediction with slices.BinarySearch.
	if len(edges) == 0 {
		return 0
	}
	base, n := 0, len(edges)
	for n > 1 {
		half := n / 2
		if edges[base+half] < v {
			base += half
		}
		n -= half
	}
	if edges[base] < v {
		base++
	}
	return uint8(base)
}

func sign(v float64) float64 {
	switch {
	case v > 0:
		return 1
	case v < 0:
		return -1
	}
	return 0
}
