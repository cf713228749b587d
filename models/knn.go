package models

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
)

// KNNName names the nearest-neighbours learner.
const KNNName = "knn"

func init() {
	register(Learner{Name: KNNName,
		Doc: "k nearest neighbours in the most telling features (own k-d tree); the quantiles of the neighbours' targets",
		New: func(o Options) Model { return NewKNN(DefaultKNNConfig(), o) }})
}

// KNNConfig tunes the neighbours learner.
type KNNConfig struct {
	K    int // neighbours per forecast
	Dims int // features the distance uses: those most correlated with the target
	Leaf int // points per k-d tree leaf
}

// DefaultKNNConfig asks 48 neighbours in 6 dimensions.
func DefaultKNNConfig() KNNConfig { return KNNConfig{K: 48, Dims: 6, Leaf: 16} }

// KNN forecasts the quantiles of the targets of a row's nearest training
// rows. golearn's KNN returns only a mean and scans every row; this one
// keeps a k-d tree over a few standardized features, chosen at fit time by
// their rank correlation with the target, and reads any quantile off the
// neighbours. Targets are relative to the rolling median (see
// Options.offsetColumn), like the other learners'.
type KNN struct {
	Config KNNConfig
	P      int
	Offset int
	Cols   []int     // the features the distance uses
	Mean   []float64 // their standardization
	Std    []float64
	// The k-d tree: Points (len(Targets) × len(Cols), row-major) and
	// Targets reordered so that each node covers a contiguous range.
	Points  []float64
	Targets []float64
	// Node i splits on Dim[i] at Val[i] into Left[i] and Right[i], or is a
	// leaf (Left[i] < 0) over rows Lo[i]..Hi[i].
	Dim         []int32
	Val         []float64
	Left, Right []int32
	Lo, Hi      []int32

	opt Options
}

var _ Model = (*KNN)(nil)

// NewKNN returns an unfitted neighbours learner.
func NewKNN(c KNNConfig, o Options) *KNN { return &KNN{Config: c, opt: o} }

// Name implements Model.
func (*KNN) Name() string { return KNNName }

// Fit picks the features and builds the tree.
func (m *KNN) Fit(ctx context.Context, X [][]float64, y []float64) error {
	p, err := checkFit(X, y)
	if err != nil {
		return err
	}
	if m.Config.K < 1 || m.Config.Dims < 1 || m.Config.Leaf < 1 {
		return fmt.Errorf("%s: config %+v: every field must be at least 1", KNNName, m.Config)
	}
	m.P, m.Offset = p, m.opt.offsetColumn()
	r := residuals(X, y, m.Offset)
	m.Cols = telling(X, y, m.Config.Dims)
	d := len(m.Cols)
	m.Mean, m.Std = make([]float64, d), make([]float64, d)
	for k, j := range m.Cols {
		for _, row := range X {
			m.Mean[k] += row[j] / float64(len(X))
		}
		for _, row := range X {
			m.Std[k] += (row[j] - m.Mean[k]) * (row[j] - m.Mean[k]) / float64(len(X))
		}
		m.Std[k] = math.Max(math.Sqrt(m.Std[k]), 1e-9)
	}
	m.Points, m.Targets = make([]float64, 0, len(X)*d), slices.Clone(r)
	for _, row := range X {
		m.Points = m.project(m.Points, row)
	}
	m.Dim, m.Val, m.Left, m.Right, m.Lo, m.Hi = nil, nil, nil, nil, nil, nil
	m.build(0, len(X))
	m.opt.progress(1, 1)
	return ctx.Err()
}

// telling returns the dims columns whose rank correlation with y is the
// largest in magnitude, on a sample of rows.
func telling(X [][]float64, y []float64, dims int) []int {
	step := max(1, len(X)/5000)
	var ys []float64
	for i := 0; i < len(X); i += step {
		ys = append(ys, y[i])
	}
	type scored struct {
		col int
		r   float64
	}
	var all []scored
	col := make([]float64, len(ys))
	for j := range X[0] {
		for k, i := 0, 0; i < len(X); i, k = i+step, k+1 {
			col[k] = X[i][j]
		}
		if r := math.Abs(Spearman(col, ys)); r > 0 {
			all = append(all, scored{j, r})
		}
	}
	slices.SortStableFunc(all, func(a, b scored) int { return cmp.Compare(b.r, a.r) })
	out := make([]int, 0, dims)
	for _, s := range all[:min(dims, len(all))] {
		out = append(out, s.col)
	}
	if len(out) == 0 {
		out = append(out, 0)
	}
	return out
}

func (m *KNN) project(dst, row []float64) []float64 {
	for k, j := range m.Cols {
		dst = append(dst, (row[j]-m.Mean[k])/m.Std[k])
	}
	return dst
}

// build makes the node over rows lo..hi, splitting at the median of the
// widest dimension, and returns its index.
func (m *KNN) build(lo, hi int) int32 {
	id := int32(len(m.Dim))
	m.Dim, m.Val = append(m.Dim, 0), append(m.Val, 0)
	m.Left, m.Right = append(m.Left, -1), append(m.Right, -1)
	m.Lo, m.Hi = append(m.Lo, int32(lo)), append(m.Hi, int32(hi))
	d := len(m.Cols)
	if hi-lo <= m.Config.Leaf {
		return id
	}
	best, spread := 0, -1.0
	for k := range d {
		a, b := math.Inf(1), math.Inf(-1)
		for i := lo; i < hi; i++ {
			a, b = math.Min(a, m.Points[i*d+k]), math.Max(b, m.Points[i*d+k])
		}
		if b-a > spread {
			best, spread = k, b-a
		}
	}
	if spread <= 0 {
		return id // all points equal: a leaf
	}
	m.sortRange(lo, hi, best)
	mid := (lo + hi) / 2
	m.Dim[id], m.Val[id] = int32(best), m.Points[mid*d+best]
	l := m.build(lo, mid)
	r := m.build(mid, hi)
	m.Left[id], m.Right[id] = l, r
	return id
}

// sortRange orders rows lo..hi by dimension k, moving points and targets.
func (m *KNN) sortRange(lo, hi, k int) {
	d := len(m.Cols)
	idx := make([]int, hi-lo)
	for i := range idx {
		idx[i] = lo + i
	}
	slices.SortFunc(idx, func(a, b int) int { return cmp.Compare(m.Points[a*d+k], m.Points[b*d+k]) })
	pts := make([]float64, 0, (hi-lo)*d)
	tg := make([]float64, 0, hi-lo)
	for _, i := range idx {
		pts = append(pts, m.Points[i*d:(i+1)*d]...)
		tg = append(tg, m.Targets[i])
	}
	copy(m.Points[lo*d:hi*d], pts)
	copy(m.Targets[lo:hi], tg)
}

// neighbours keeps the k nearest found so far as a max-heap on distance.
type neighbours struct {
	dist, target []float64
	k            int
}

func (h *neighbours) worst() float64 {
	if len(h.dist) < h.k {
		return math.Inf(1)
	}
	return h.dist[0]
}

func (h *neighbours) push(d, t float64) {
	if len(h.dist) < h.k {
		h.dist, h.target = append(h.dist, d), append(h.target, t)
		for i := len(h.dist) - 1; i > 0; {
			p := (i - 1) / 2
			if h.dist[p] >= h.dist[i] {
				break
			}
			h.swap(i, p)
			i = p
		}
		return
	}
	if d >= h.dist[0] {
		return
	}
	h.dist[0], h.target[0] = d, t
	for i := 0; ; {
		l, r, big := 2*i+1, 2*i+2, i
		if l < len(h.dist) && h.dist[l] > h.dist[big] {
			big = l
		}
		if r < len(h.dist) && h.dist[r] > h.dist[big] {
			big = r
		}
		if big == i {
			return
		}
		h.swap(i, big)
		i = big
	}
}

func (h *neighbours) swap(i, j int) {
	h.dist[i], h.dist[j] = h.dist[j], h.dist[i]
	h.target[i], h.target[j] = h.target[j], h.target[i]
}

func (m *KNN) search(node int32, q []float64, h *neighbours) {
	d := len(m.Cols)
	if m.Left[node] < 0 {
		for i := m.Lo[node]; i < m.Hi[node]; i++ {
			dist := 0.0
			for k, v := range m.Points[int(i)*d : int(i+1)*d] {
				dist += (v - q[k]) * (v - q[k])
			}
			h.push(dist, m.Targets[i])
		}
		return
	}
	diff := q[m.Dim[node]] - m.Val[node]
	near, far := m.Left[node], m.Right[node]
	if diff >= 0 {
		near, far = far, near
	}
	m.search(near, q, h)
	if diff*diff < h.worst() {
		m.search(far, q, h)
	}
}

// PredictQuantiles reads the quantiles off each row's neighbours.
func (m *KNN) PredictQuantiles(X [][]float64, qs []float64) ([][]float64, error) {
	if len(m.Dim) == 0 {
		return nil, ErrNotFitted
	}
	if err := checkPredict(X, qs, m.P); err != nil {
		return nil, err
	}
	out := matrix(len(X), len(qs))
	h := &neighbours{k: m.Config.K, dist: make([]float64, 0, m.Config.K), target: make([]float64, 0, m.Config.K)}
	q := make([]float64, 0, len(m.Cols))
	for i, x := range X {
		h.dist, h.target = h.dist[:0], h.target[:0]
		q = m.project(q[:0], x)
		m.search(0, q, h)
		slices.Sort(h.target)
		off := offsetOf(x, m.Offset)
		for k, lv := range qs {
			out[i][k] = off + QuantileSorted(h.target, lv)
		}
	}
	return out, nil
}

// MarshalBinary implements Model.
func (m *KNN) MarshalBinary() ([]byte, error) { return gobEncode((*knnWire)(m)) }

// UnmarshalBinary implements Model; it checks every index of the tree.
func (m *KNN) UnmarshalBinary(data []byte) error {
	if err := gobDecode(data, (*knnWire)(m)); err != nil {
		return err
	}
	d, n := len(m.Cols), len(m.Targets)
	ok := m.Config.K >= 1 && d > 0 && len(m.Mean) == d && len(m.Std) == d && len(m.Points) == n*d && n > 0 &&
		m.Offset >= -1 && m.Offset < m.P && len(m.Dim) > 0
	for _, c := range m.Cols {
		ok = ok && c >= 0 && c < m.P
	}
	nodes := len(m.Dim)
	ok = ok && len(m.Val) == nodes && len(m.Left) == nodes && len(m.Right) == nodes && len(m.Lo) == nodes && len(m.Hi) == nodes
	for i := 0; ok && i < nodes; i++ {
		ok = m.Lo[i] >= 0 && m.Lo[i] <= m.Hi[i] && int(m.Hi[i]) <= n && m.Dim[i] >= 0 && int(m.Dim[i]) < d
		if ok && m.Left[i] >= 0 {
			ok = m.Left[i] > int32(i) && m.Right[i] > int32(i) && int(m.Left[i]) < nodes && int(m.Right[i]) < nodes
		}
	}
	if !ok {
		return fmt.Errorf("%s: inconsistent tree", KNNName)
	}
	return nil
}

// knnWire is KNN without its methods, so that gob does not call
// MarshalBinary on it again.
type knnWire KNN
