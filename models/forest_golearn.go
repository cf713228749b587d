package models

import (
	"cmp"
	"context"
	"fmt"
	"hash/fnv"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/sjwhitworth/golearn/base"
	"github.com/sjwhitworth/golearn/trees"
)

// ForestName names the golearn random forest.
const ForestName = "golearn_forest"

func init() {
	register(Learner{Name: ForestName, Compared: true,
		Doc: "golearn ID3 random trees over log-target classes, bagged; the trees' leaf votes give the quantiles",
		New: func(o Options) Model { return NewForest(DefaultForestConfig(), o) }})
}

// ForestConfig tunes the forest.
type ForestConfig struct {
	Trees int // how many trees
	// SampleRows is how many rows each tree is grown on (drawn with
	// replacement); 0 means all.
	SampleRows int
	// Attrs is how many randomly chosen features each split considers; 0
	// means a third of them.
	Attrs int
	// MinNode is the fewest rows a node needs to be split.
	MinNode int
	// Classes is how many classes the log target is cut into, at its
	// quantiles.
	Classes int
}

// DefaultForestConfig grows 32 trees on 4,000 rows each, 10 features considered per split.
func DefaultForestConfig() ForestConfig {
	return ForestConfig{Trees: 32, SampleRows: 4000, Attrs: 10, MinNode: 24, Classes: 24}
}

// Validate rejects a config no forest could be grown with.
func (c ForestConfig) Validate() error {
	if c.Trees < 1 || c.SampleRows < 0 || c.Attrs < 0 || c.MinNode < 2 || c.Classes < 2 {
		return fmt.Errorf("%s: config %+v: want Trees ≥ 1, SampleRows ≥ 0, Attrs ≥ 0, MinNode ≥ 2, Classes ≥ 2", ForestName, c)
	}
	return nil
}

// Forest is a random forest of golearn ID3 trees that classify the log
// target into classes cut at its quantiles. Each fitted golearn tree is
// flattened into arrays for fast inference. A row's class distribution is
// the mean of the leaf distributions its trees reach; its quantiles are
// read off that distribution, uniform within each class.
type Forest struct {
	Config ForestConfig
	P      int
	Edges  []float64 // class c holds targets in [Edges[c], Edges[c+1]]
	Trees  []FlatTree
	Import []float64 // rows split at each feature, summed over the forest
	// Offset is the column the classes are relative to (see
	// Options.offsetColumn); -1 for none.
	Offset int

	opt Options
}

// FlatTree is one fitted tree in arrays: node i splits on Feature[i] at
// Threshold[i] (≤ goes Left) or, with Feature[i] < 0, is a leaf whose
// class distribution starts at Dist[Leaf[i]].
type FlatTree struct {
	Feature   []int32
	Threshold []float64
	Left      []int32
	Right     []int32
	Leaf      []int32
	Dist      []float32
}

var _ Model = (*Forest)(nil)

// NewForest returns an unfitted forest.
func NewForest(c ForestConfig, o Options) *Forest { return &Forest{Config: c, opt: o} }

// Name implements Model.
func (*Forest) Name() string { return ForestName }

// Importance is the number of training rows split at each feature.
func (f *Forest) Importance() []float64 { return f.Import }

// Fit grows the trees with golearn.
func (f *Forest) Fit(ctx context.Context, X [][]float64, y []float64) error {
	p, err := checkFit(X, y)
	if err != nil {
		return err
	}
	if err := f.Config.Validate(); err != nil {
		return err
	}
	f.P, f.Import, f.Trees = p, make([]float64, p), nil
	f.Offset = f.opt.offsetColumn()
	y = residuals(X, y, f.Offset)
	f.Edges = classEdges(y, f.Config.Classes)
	classes := make([]int, len(y))
	for i, v := range y {
		classes[i] = classOf(f.Edges, v)
	}
	// golearn sees only the columns that vary: a constant one (a group
	// level the trace does not know, such as users in Philly) can never
	// split and would only take the place of a useful one among the
	// features a node considers.
	active := varyingColumns(X)
	if len(active) == 0 {
		active = []int{0}
	}
	attrs := f.Config.Attrs
	if attrs == 0 {
		attrs = max(1, len(active)/3)
	}
	rows := f.Config.SampleRows
	if rows == 0 || rows > len(X) {
		rows = len(X)
	}
	rng := rand.New(rand.NewPCG(uint64(f.opt.Seed), 0x5eed))
	for t := range f.Config.Trees {
		if err := ctx.Err(); err != nil {
			return err
		}
		sample := make([]int, rows)
		for i := range sample {
			sample[i] = rng.IntN(len(X))
		}
		inst, err := golearnInstances(X, active, classes, sample, len(f.Edges)-1)
		if err != nil {
			return fmt.Errorf("%s: tree %d: %w", ForestName, t, err)
		}
		gen := &randomSplit{attrs: min(attrs, len(active)), minNode: f.Config.MinNode, seed: rng.Uint64()}
		root := trees.InferID3Tree(inst, gen)
		f.Trees = append(f.Trees, f.flatten(root))
		f.opt.progress(t+1, f.Config.Trees)
	}
	return nil
}

// classEdges cuts the targets at k quantiles; equal edges are merged. The
// outer edges are the 0.2% and 99.8% quantiles, not the extremes, so that a
// few outliers (jobs with no history to compare with) do not stretch the
// end classes over which a quantile is interpolated.
func classEdges(y []float64, k int) []float64 {
	sorted := slices.Sorted(slices.Values(y))
	edges := []float64{QuantileSorted(sorted, 0.002)}
	for c := 1; c < k; c++ {
		e := QuantileSorted(sorted, float64(c)/float64(k))
		if e > edges[len(edges)-1] {
			edges = append(edges, e)
		}
	}
	last := QuantileSorted(sorted, 0.998)
	if last <= edges[len(edges)-1] {
		last = edges[len(edges)-1] + 1e-9
	}
	return append(edges, last)
}

func classOf(edges []float64, v float64) int {
	i, _ := slices.BinarySearch(edges, v)
	// edges[i-1] < v ≤ edges[i]: class i-1; v at or below the first edge: 0.
	return min(max(i-1, 0), len(edges)-2)
}

// varyingColumns lists the columns of X that take more than one value.
func varyingColumns(X [][]float64) []int {
	var out []int
	for j := range X[0] {
		for _, r := range X[1:] {
			if r[j] != X[0][j] {
				out = append(out, j)
				break
			}
		}
	}
	return out
}

// golearnInstances builds golearn's data grid of the sampled rows: one float
// attribute per active feature (named f<index in X>) and the class.
func golearnInstances(X [][]float64, active, classes, sample []int, nClasses int) (*base.DenseInstances, error) {
	inst := base.NewDenseInstances()
	specs := make([]base.AttributeSpec, len(active))
	for k, j := range active {
		specs[k] = inst.AddAttribute(base.NewFloatAttribute("f" + strconv.Itoa(j)))
	}
	classAttr := base.NewCategoricalAttribute()
	classAttr.SetName("class")
	classVals := make([][]byte, nClasses)
	for c := range classVals {
		classVals[c] = classAttr.GetSysValFromString(strconv.Itoa(c))
	}
	classSpec := inst.AddAttribute(classAttr)
	if err := inst.AddClassAttribute(classAttr); err != nil {
		return nil, err
	}
	if err := inst.Extend(len(sample)); err != nil {
		return nil, err
	}
	for r, i := range sample {
		for k, j := range active {
			inst.Set(specs[k], r, base.PackFloatToBytes(X[i][j]))
		}
		inst.Set(classSpec, r, classVals[classes[i]])
	}
	return inst, nil
}

// randomSplit is a golearn rule generator: it considers attrs randomly
// chosen features at each node, splits at the one whose best split
// (numericSplit) leaves the least entropy, and leaves nodes smaller than
// minNode unsplit. (golearn's own RandomTreeRuleGenerator loops forever
// once fewer features remain on a path than it wants to consider, and
// splits down to single rows; its information-gain rule is not the same
// from run to run.)
type randomSplit struct {
	attrs   int
	minNode int
	seed    uint64 // the tree's
}

func (r *randomSplit) GenerateSplitRule(f base.FixedDataGrid) *trees.DecisionTreeRule {
	if _, rows := f.Size(); rows < r.minNode {
		return nil
	}
	all := base.AttributeDifferenceReferences(f.AllAttributes(), f.AllClassAttributes())
	if len(all) == 0 {
		return nil
	}
	// golearn lists attributes and grows a node's children in map order.
	// So the attributes are sorted by name, and each node draws from its
	// own stream, seeded by the tree's seed and what the node holds (one
	// stream for the tree would land its draws on other nodes from run to
	// run). One seed, one forest.
	slices.SortFunc(all, func(a, b base.Attribute) int { return strings.Compare(a.GetName(), b.GetName()) })
	rng := rand.New(rand.NewPCG(r.seed, nodeKey(f)))
	rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	// golearn's own rule generator reads a node's rows in map order and
	// sums entropies in that order, so near ties between attributes and
	// split points go either way from run to run: numericSplit chooses
	// in one order.
	var best *trees.DecisionTreeRule
	least := math.Inf(1)
	for _, a := range all[:min(r.attrs, len(all))] {
		if val, h, ok := numericSplit(f, a); ok && h < least {
			best, least = &trees.DecisionTreeRule{SplitAttr: a, SplitVal: val}, h
		}
	}
	return best // nil when no attribute splits the node: a leaf
}

// nodeKey tells a tree's nodes apart by what they hold: their rows and
// how many of them each class has.
func nodeKey(f base.FixedDataGrid) uint64 {
	dist := base.GetClassDistribution(f)
	_, rows := f.Size()
	h := fnv.New64a()
	fmt.Fprint(h, rows)
	for _, c := range slices.Sorted(maps.Keys(dist)) {
		fmt.Fprintf(h, ";%s=%d", c, dist[c])
	}
	return h.Sum64()
}

// numericSplit is ID3's best split of a node on a float attribute: the
// midpoint between two neighbouring values of the node's rows (rows
// above it go right) that leaves the least class entropy, each side
// weighted by its rows; the lowest midpoint of equal ones. ok is false
// when the attribute takes one value in the node.
func numericSplit(f base.FixedDataGrid, a base.Attribute) (val, entropy float64, ok bool) {
	attr, err := f.GetAttribute(a)
	if err != nil {
		return 0, 0, false
	}
	class, err := f.GetAttribute(f.AllClassAttributes()[0])
	if err != nil {
		return 0, 0, false
	}
	type ref struct {
		v float64
		c string
	}
	var refs []ref
	f.MapOverRows([]base.AttributeSpec{attr, class}, func(v [][]byte, _ int) (bool, error) {
		refs = append(refs, ref{base.UnpackBytesToFloat(v[0]), string(v[1])})
		return true, nil
	})
	slices.SortFunc(refs, func(x, y ref) int {
		if c := cmp.Compare(x.v, y.v); c != 0 {
			return c
		}
		return strings.Compare(x.c, y.c)
	})
	names := map[string]int{} // classes numbered in sorted order: sums in one order
	for _, r := range refs {
		names[r.c] = 0
	}
	for i, c := range slices.Sorted(maps.Keys(names)) {
		names[c] = i
	}
	left, right := make([]int, len(names)), make([]int, len(names))
	for _, r := range refs {
		right[names[r.c]]++
	}
	n := float64(len(refs))
	side := func(counts []int, rows int) float64 {
		h := 0.0
		for _, c := range counts {
			if c > 0 {
				p := float64(c) / float64(rows)
				h -= p * math.Log(p)
			}
		}
		return float64(rows) / n * h
	}
	entropy = math.Inf(1)
	for i := 0; i < len(refs)-1; i++ {
		k := names[refs[i].c]
		left[k]++
		right[k]--
		if refs[i].v == refs[i+1].v {
			continue
		}
		if h := side(left, i+1) + side(right, len(refs)-i-1); h < entropy {
			val, entropy, ok = (refs[i].v+refs[i+1].v)/2, h, true
		}
	}
	return val, entropy, ok
}

// flatten turns a golearn tree into arrays.
func (f *Forest) flatten(root *trees.DecisionTreeNode) FlatTree {
	var t FlatTree
	nClasses := len(f.Edges) - 1
	var walk func(n *trees.DecisionTreeNode, parentDist map[string]int) int32
	walk = func(n *trees.DecisionTreeNode, parentDist map[string]int) int32 {
		id := int32(len(t.Feature))
		t.Feature = append(t.Feature, -1)
		t.Threshold = append(t.Threshold, 0)
		t.Left = append(t.Left, -1)
		t.Right = append(t.Right, -1)
		t.Leaf = append(t.Leaf, -1)
		if n == nil {
			t.Leaf[id] = t.addDist(parentDist, nClasses)
			return id
		}
		feature := -1
		if n.SplitRule != nil && n.SplitRule.SplitAttr != nil && len(n.Children) > 0 {
			feature, _ = strconv.Atoi(n.SplitRule.SplitAttr.GetName()[1:])
		}
		if feature < 0 {
			t.Leaf[id] = t.addDist(n.ClassDist, nClasses)
			return id
		}
		total := 0
		for _, c := range n.ClassDist {
			total += c
		}
		f.Import[feature] += float64(total)
		t.Feature[id], t.Threshold[id] = int32(feature), n.SplitRule.SplitVal
		l := walk(n.Children["0"], n.ClassDist)
		r := walk(n.Children["1"], n.ClassDist)
		t.Left[id], t.Right[id] = l, r
		return id
	}
	walk(root, nil)
	return t
}

func (t *FlatTree) addDist(dist map[string]int, nClasses int) int32 {
	off := int32(len(t.Dist))
	d := make([]float32, nClasses)
	total := 0
	for k, c := range dist {
		if i, err := strconv.Atoi(k); err == nil && i >= 0 && i < nClasses {
			d[i] += float32(c)
			total += c
		}
	}
	for i := range d {
		if total > 0 {
			d[i] /= float32(total)
		} else {
			d[i] = 1 / float32(nClasses)
		}
	}
	t.Dist = append(t.Dist, d...)
	return off
}

// leaf returns the class distribution row x reaches.
func (t *FlatTree) leaf(x []float64, nClasses int) []float32 {
	i := int32(0)
	for t.Feature[i] >= 0 {
		if x[t.Feature[i]] > t.Threshold[i] {
			i = t.Right[i]
		} else {
			i = t.Left[i]
		}
	}
	off := t.Leaf[i]
	return t.Dist[off : off+int32(nClasses)]
}

// PredictQuantiles averages the trees' leaf distributions and reads the
// quantiles off the mixture.
func (f *Forest) PredictQuantiles(X [][]float64, qs []float64) ([][]float64, error) {
	if len(f.Trees) == 0 {
		return nil, ErrNotFitted
	}
	if err := checkPredict(X, qs, f.P); err != nil {
		return nil, err
	}
	nClasses := len(f.Edges) - 1
	out := matrix(len(X), len(qs))
	mix := make([]float64, nClasses)
	for i, x := range X {
		clear(mix)
		for k := range f.Trees {
			for c, p := range f.Trees[k].leaf(x, nClasses) {
				mix[c] += float64(p)
			}
		}
		off := offsetOf(x, f.Offset)
		for k, q := range qs {
			out[i][k] = off + histQuantile(f.Edges, mix, q*float64(len(f.Trees)))
		}
	}
	return out, nil
}

// histQuantile finds where the cumulative mass of a histogram over edges
// reaches target, spreading each class's mass evenly across it.
func histQuantile(edges, mass []float64, target float64) float64 {
	cum := 0.0
	for c, m := range mass {
		if m > 0 && cum+m >= target {
			f := (target - cum) / m
			return edges[c] + f*(edges[c+1]-edges[c])
		}
		cum += m
	}
	return edges[len(edges)-1]
}

// MarshalBinary implements Model.
func (f *Forest) MarshalBinary() ([]byte, error) { return gobEncode((*forestWire)(f)) }

// UnmarshalBinary implements Model; it checks every index so that a
// damaged artifact cannot make prediction read out of bounds.
func (f *Forest) UnmarshalBinary(data []byte) error {
	if err := gobDecode(data, (*forestWire)(f)); err != nil {
		return err
	}
	nClasses := len(f.Edges) - 1
	if nClasses < 1 || f.P < 1 || len(f.Trees) == 0 || f.Offset < -1 || f.Offset >= f.P {
		return fmt.Errorf("%s: empty forest", ForestName)
	}
	for k, t := range f.Trees {
		n := len(t.Feature)
		if n == 0 || len(t.Threshold) != n || len(t.Left) != n || len(t.Right) != n || len(t.Leaf) != n {
			return fmt.Errorf("%s: tree %d: inconsistent arrays", ForestName, k)
		}
		for i := range n {
			if t.Feature[i] >= 0 {
				if int(t.Feature[i]) >= f.P || t.Left[i] <= int32(i) || t.Right[i] <= int32(i) || int(t.Left[i]) >= n || int(t.Right[i]) >= n || math.IsNaN(t.Threshold[i]) {
					return fmt.Errorf("%s: tree %d node %d: bad split", ForestName, k, i)
				}
			} else if t.Leaf[i] < 0 || int(t.Leaf[i])+nClasses > len(t.Dist) {
				return fmt.Errorf("%s: tree %d node %d: bad leaf", ForestName, k, i)
			}
		}
	}
	return nil
}

// forestWire is Forest without its methods, so that gob does not call MarshalBinary on it again.
type forestWire Forest
