package models

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// MLPName names the gorgonia multilayer perceptron.
const MLPName = "gorgonia_mlp"

func init() {
	register(Learner{Name: MLPName, Compared: true,
		Doc: "gorgonia multilayer perceptron (two ReLU layers) trained with the pinball loss at several quantiles at once",
		New: func(o Options) Model { return NewMLP(DefaultMLPConfig(), o) }})
}

// MLPConfig tunes the perceptron.
type MLPConfig struct {
	Hidden []int     // widths of the hidden layers
	Levels []float64 // the quantile levels it is trained on, increasing
	// Epochs is the most passes over the data. The latest tenth of the
	// rows (they come in time order) is held back: training stops when
	// its loss has not improved for Patience epochs, and the weights of
	// the best epoch are kept.
	Epochs    int
	Patience  int
	BatchSize int
	LearnRate float64
}

// DefaultMLPConfig is a 32-16 network trained for up to 40 epochs with
// early stopping on the latest rows: on Philly, long training fits the past
// better and the later weeks worse. It was 64-32; as one of the ensemble's
// three members the smaller one scored the same on the Philly backtest
// (ensemble mae_log 1.088, 0.912, 0.958 against 1.091, 0.906, 0.946,
// within the forest's run-to-run spread) at half the prediction cost.
func DefaultMLPConfig() MLPConfig {
	return MLPConfig{Hidden: []int{32, 16}, Levels: []float64{0.1, 0.25, 0.5, 0.75, 0.9, 0.95},
		Epochs: 40, Patience: 3, BatchSize: 256, LearnRate: 3e-3}
}

// Validate rejects a config no network could be trained with.
func (c MLPConfig) Validate() error {
	if len(c.Hidden) == 0 || slices.Min(c.Hidden) < 1 || len(c.Levels) == 0 || !slices.IsSorted(c.Levels) ||
		c.Levels[0] <= 0 || c.Levels[len(c.Levels)-1] >= 1 || c.Epochs < 1 || c.Patience < 1 || c.BatchSize < 1 || !(c.LearnRate > 0) {
		return fmt.Errorf("%s: config %+v is invalid", MLPName, c)
	}
	return nil
}

// MLP is a perceptron fitted with gorgonia. Its fitted weights are copied
// out of the graph, and prediction runs in plain Go: no graph is needed
// to serve it.
type MLP struct {
	Config     MLPConfig
	P          int
	Mean, Std  []float64 // input standardization
	YMean, YSD float64   // target standardization
	// Weights[l] is layer l's matrix (in × out, row-major), Biases[l] its bias.
	Weights, Biases [][]float64
	Sizes           []int // input, hidden..., output widths
	// Offset is the column the target is relative to (see
	// Options.offsetColumn); -1 for none.
	Offset int

	opt Options
}

var _ Model = (*MLP)(nil)

// NewMLP returns an unfitted perceptron.
func NewMLP(c MLPConfig, o Options) *MLP { return &MLP{Config: c, opt: o} }

// Name implements Model.
func (*MLP) Name() string { return MLPName }

// Fit trains the network with Adam on the mean pinball loss over the
// configured quantile levels.
func (m *MLP) Fit(ctx context.Context, X [][]float64, y []float64) error {
	p, err := checkFit(X, y)
	if err != nil {
		return err
	}
	c := m.Config
	if err := c.Validate(); err != nil {
		return err
	}
	m.P = p
	m.Offset = m.opt.offsetColumn()
	y = residuals(X, y, m.Offset)
	m.standardize(X, y)
	var Xval [][]float64
	var yval []float64
	if n := len(X) / 10; n >= minValidation {
		X, Xval = X[:len(X)-n], X[len(X)-n:]
		y, yval = y[:len(y)-n], y[len(y)-n:]
	}
	m.Sizes = append(append([]int{p}, c.Hidden...), len(c.Levels))
	rng := rand.New(rand.NewPCG(uint64(m.opt.Seed), 0x3117))
	bs, nq := min(c.BatchSize, len(X)), len(c.Levels)

	// 1. The graph: x → (affine, ReLU)* → affine → quantiles; pinball loss.
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float64, G.WithShape(bs, p), G.WithName("x"))
	yv := G.NewMatrix(g, tensor.Float64, G.WithShape(bs, nq), G.WithName("y"))
	q := G.NewMatrix(g, tensor.Float64, G.WithShape(bs, nq), G.WithName("q"), G.WithValue(levelMatrix(c.Levels, bs, false)))
	q1 := G.NewMatrix(g, tensor.Float64, G.WithShape(bs, nq), G.WithName("1-q"), G.WithValue(levelMatrix(c.Levels, bs, true)))
	var learnables G.Nodes
	h := x
	for l := 0; l+1 < len(m.Sizes); l++ {
		in, out := m.Sizes[l], m.Sizes[l+1]
		w := G.NewMatrix(g, tensor.Float64, G.WithShape(in, out), G.WithName(fmt.Sprintf("w%d", l)), G.WithValue(heInit(rng, in, out)))
		b := G.NewMatrix(g, tensor.Float64, G.WithShape(1, out), G.WithName(fmt.Sprintf("b%d", l)), G.WithValue(tensor.New(tensor.WithShape(1, out), tensor.Of(tensor.Float64))))
		learnables = append(learnables, w, b)
		h = G.Must(G.BroadcastAdd(G.Must(G.Mul(h, w)), b, nil, []byte{0}))
		if l+2 < len(m.Sizes) {
			h = G.Must(G.Rectify(h))
		}
	}
	e := G.Must(G.Sub(yv, h))
	loss := G.Must(G.Mean(G.Must(G.Add(G.Must(G.HadamardProd(G.Must(G.Rectify(e)), q)), G.Must(G.HadamardProd(G.Must(G.Rectify(G.Must(G.Neg(e)))), q1))))))
	if _, err := G.Grad(loss, learnables...); err != nil {
		return fmt.Errorf("%s: gradient: %w", MLPName, err)
	}
	vm := G.NewTapeMachine(g, G.BindDualValues(learnables...))
	defer vm.Close()
	solver := G.NewAdamSolver(G.WithLearnRate(c.LearnRate))

	// 2. Minibatch training over shuffled rows; a last partial batch is skipped.
	xb, yb := make([]float64, bs*p), make([]float64, bs*nq)
	order := make([]int, len(X))
	for i := range order {
		order[i] = i
	}
	batches := len(X) / bs
	best, bestEpoch := math.Inf(1), 0
	var bestW, bestB [][]float64
	for epoch := range c.Epochs {
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for b := range batches {
			if err := ctx.Err(); err != nil {
				return err
			}
			for r := range bs {
				i := order[b*bs+r]
				for j, v := range X[i] {
					xb[r*p+j] = (v - m.Mean[j]) / m.Std[j]
				}
				ys := (y[i] - m.YMean) / m.YSD
				for k := range nq {
					yb[r*nq+k] = ys
				}
			}
			if err := G.Let(x, tensor.New(tensor.WithShape(bs, p), tensor.WithBacking(xb))); err != nil {
				return err
			}
			if err := G.Let(yv, tensor.New(tensor.WithShape(bs, nq), tensor.WithBacking(yb))); err != nil {
				return err
			}
			if err := vm.RunAll(); err != nil {
				return fmt.Errorf("%s: epoch %d: %w", MLPName, epoch, err)
			}
			if err := solver.Step(G.NodesToValueGrads(learnables)); err != nil {
				return fmt.Errorf("%s: epoch %d: %w", MLPName, epoch, err)
			}
			vm.Reset()
		}
		m.opt.progress(epoch+1, c.Epochs)

		// 3. Copy the weights out of the graph; keep the best epoch's.
		m.Weights, m.Biases = nil, nil
		for l := 0; l < len(learnables); l += 2 {
			m.Weights = append(m.Weights, slices.Clone(learnables[l].Value().Data().([]float64)))
			m.Biases = append(m.Biases, slices.Clone(learnables[l+1].Value().Data().([]float64)))
		}
		if len(Xval) == 0 {
			continue
		}
		v := m.pinball(Xval, yval)
		m.opt.logger().Debug("epoch done", "component", "models", "model", MLPName, "epoch", epoch+1, "validation_pinball", v)
		if v < best {
			best, bestEpoch, bestW, bestB = v, epoch, m.Weights, m.Biases
		} else if epoch-bestEpoch >= c.Patience {
			break
		}
	}
	if bestW != nil {
		m.Weights, m.Biases = bestW, bestB
	}
	m.opt.progress(c.Epochs, c.Epochs)
	return nil
}

// minValidation is the fewest rows worth holding back for early stopping.
const minValidation = 100

// pinball is the mean pinball loss of the network's quantile levels on
// rows X with residual log targets y (see Offset).
func (m *MLP) pinball(X [][]float64, y []float64) float64 {
	q, err := m.PredictQuantiles(X, m.Config.Levels)
	if err != nil {
		return math.Inf(1)
	}
	s := 0.0
	for i, r := range q {
		for k, lv := range m.Config.Levels {
			e := y[i] + offsetOf(X[i], m.Offset) - r[k]
			s += math.Max(lv*e, (lv-1)*e)
		}
	}
	return s / float64(len(q)*len(m.Config.Levels))
}

func (m *MLP) standardize(X [][]float64, y []float64) {
	p := len(X[0])
	m.Mean, m.Std = make([]float64, p), make([]float64, p)
	n := float64(len(X))
	for _, r := range X {
		for j, v := range r {
			m.Mean[j] += v / n
		}
	}
	for _, r := range X {
		for j, v := range r {
			d := v - m.Mean[j]
			m.Std[j] += d * d / n
		}
	}
	for j := range m.Std {
		m.Std[j] = math.Sqrt(m.Std[j])
		if m.Std[j] < 1e-9 {
			m.Std[j] = 1
		}
	}
	m.YMean, m.YSD = 0, 0
	for _, v := range y {
		m.YMean += v / n
	}
	for _, v := range y {
		m.YSD += (v - m.YMean) * (v - m.YMean) / n
	}
	m.YSD = math.Max(math.Sqrt(m.YSD), 1e-9)
}

func levelMatrix(levels []float64, rows int, complement bool) *tensor.Dense {
	data := make([]float64, 0, rows*len(levels))
	for range rows {
		for _, q := range levels {
			if complement {
				q = 1 - q
			}
			data = append(data, q)
		}
	}
	return tensor.New(tensor.WithShape(rows, len(levels)), tensor.WithBacking(data))
}

func heInit(rng *rand.Rand, in, out int) *tensor.Dense {
	data := make([]float64, in*out)
	sd := math.Sqrt(2 / float64(in))
	for i := range data {
		data[i] = rng.NormFloat64() * sd
	}
	return tensor.New(tensor.WithShape(in, out), tensor.WithBacking(data))
}

// PredictQuantiles runs the network in plain Go, sorts each row's outputs
// (so quantiles never cross) and interpolates the asked levels.
func (m *MLP) PredictQuantiles(X [][]float64, qs []float64) ([][]float64, error) {
	if len(m.Weights) == 0 {
		return nil, ErrNotFitted
	}
	if err := checkPredict(X, qs, m.P); err != nil {
		return nil, err
	}
	out := matrix(len(X), len(qs))
	// Forward pass in blocks of rows, each layer one matrix product (gonum BLAS).
	block := min(256, len(X)) // a lone row (a finished job the Blend hears of) allocates for one
	nl := len(m.Config.Levels)
	acts := make([][]float64, len(m.Sizes))
	for l, w := range m.Sizes {
		acts[l] = make([]float64, block*w)
	}
	for lo := 0; lo < len(X); lo += block {
		n := min(block, len(X)-lo)
		in := acts[0]
		for r := range n {
			x := X[lo+r]
			row := in[r*m.P : (r+1)*m.P]
			for j, v := range x {
				row[j] = (v - m.Mean[j]) / m.Std[j]
			}
		}
		for l := range m.Weights {
			a, b := acts[l], acts[l+1]
			ni, no := m.Sizes[l], m.Sizes[l+1]
			for r := range n {
				copy(b[r*no:(r+1)*no], m.Biases[l])
			}
			blas64.Gemm(blas.NoTrans, blas.NoTrans, 1,
				blas64.General{Rows: n, Cols: ni, Stride: ni, Data: a[:n*ni]},
				blas64.General{Rows: ni, Cols: no, Stride: no, Data: m.Weights[l]},
				1, blas64.General{Rows: n, Cols: no, Stride: no, Data: b[:n*no]})
			if l+1 < len(m.Weights) {
				for k, v := range b[:n*no] {
					if v < 0 {
						b[k] = 0
					}
				}
			}
		}
		res := acts[len(acts)-1]
		for r := range n {
			vals := res[r*nl : (r+1)*nl]
			off := offsetOf(X[lo+r], m.Offset)
			for k := range vals {
				vals[k] = vals[k]*m.YSD + m.YMean + off
			}
			slices.Sort(vals)
			interpQuantiles(m.Config.Levels, vals, qs, out[lo+r][:0])
		}
	}
	return out, nil
}

// MarshalBinary implements Model.
func (m *MLP) MarshalBinary() ([]byte, error) { return gobEncode((*mlpWire)(m)) }

// UnmarshalBinary implements Model; it checks the shapes.
func (m *MLP) UnmarshalBinary(data []byte) error {
	if err := gobDecode(data, (*mlpWire)(m)); err != nil {
		return err
	}
	if err := m.Config.Validate(); err != nil {
		return err
	}
	ok := len(m.Sizes) >= 2 && m.Sizes[0] == m.P && m.Offset >= -1 && m.Offset < m.P && len(m.Mean) == m.P && len(m.Std) == m.P &&
		m.Sizes[len(m.Sizes)-1] == len(m.Config.Levels) && len(m.Weights) == len(m.Sizes)-1 && len(m.Biases) == len(m.Weights)
	for l := 0; ok && l < len(m.Weights); l++ {
		ok = m.Sizes[l] > 0 && len(m.Weights[l]) == m.Sizes[l]*m.Sizes[l+1] && len(m.Biases[l]) == m.Sizes[l+1]
	}
	if !ok {
		return fmt.Errorf("%s: inconsistent layer shapes", MLPName)
	}
	return nil
}

// mlpWire is MLP without its methods, so that gob does not call MarshalBinary on it again.
type mlpWire MLP
