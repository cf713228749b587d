package executor

import (
	"fmt"
	"math"
	"time"
)

// PowerCap is a GPU power limit as a fraction of the board's maximum and
// what it does to a training job, relative to running uncapped: Slowdown is
// the time per unit of work (≥ 1), Power the busy draw over the uncapped
// busy draw (≤ 1).
type PowerCap struct {
	Fraction float64
	Slowdown float64
	Power    float64
}

// Uncapped is a job at the board's full limit.
func (c PowerCap) Uncapped() bool { return c.Fraction == 0 || c.Fraction >= 1 }

// ZeusV100Caps is the V100's curve from Zeus (NSDI'23): for each power
// limit of 100-250 W (0.4 to 1 of the 250 W board), the median over its 68
// workloads (dataset, network, batch size, optimizer) of the epoch time
// against the same workload at 250 W, and the median draw as a fraction of
// the limit over the median at 250 W (0.708)
// (../shared/datasets/zeus/summary_power_v100.csv; TestZeusV100Caps
// recomputes it). It stands in for GPU models Zeus did not measure.
var ZeusV100Caps = []PowerCap{
	{Fraction: 0.4, Slowdown: 1.380, Power: 0.528},
	{Fraction: 0.5, Slowdown: 1.173, Power: 0.620},
	{Fraction: 0.6, Slowdown: 1.112, Power: 0.708},
	{Fraction: 0.7, Slowdown: 1.063, Power: 0.791},
	{Fraction: 0.8, Slowdown: 1.037, Power: 0.883},
	{Fraction: 0.9, Slowdown: 1.013, Power: 0.938},
	{Fraction: 1.0, Slowdown: 1.000, Power: 1.000},
}

// PowerCapper chooses a starting job's power cap (the zero PowerCap: none).
type PowerCapper interface {
	Cap(v *JobView, gpus int, now time.Time) (PowerCap, string)
}

// CostCapper is Zeus's trade-off per job: of the caps in Curve it takes the
// one that minimises (GPUs × Power + Price) × Slowdown, the energy of the
// job's GPUs (in units of one uncapped busy GPU) plus its run time priced
// at Price such GPUs, so a one-GPU job, whose time counts as much as a
// wide job's, is capped less. A job with a deadline takes no cap that
// would move its P90 end past the deadline.
type CostCapper struct {
	Price float64
	Curve []PowerCap
}

// NewCostCapper validates its arguments.
func NewCostCapper(price float64, curve []PowerCap) (*CostCapper, error) {
	if !(price >= 0) || math.IsInf(price, 0) {
		return nil, fmt.Errorf("power cap: price %g must be finite and non-negative", price)
	}
	if len(curve) == 0 {
		return nil, fmt.Errorf("power cap: empty curve")
	}
	for _, c := range curve {
		if !(c.Fraction > 0 && c.Fraction <= 1 && c.Slowdown >= 1 && c.Power > 0 && c.Power <= 1) {
			return nil, fmt.Errorf("power cap: bad point %+v", c)
		}
	}
	return &CostCapper{Price: price, Curve: curve}, nil
}

// Cap implements PowerCapper.
func (c *CostCapper) Cap(v *JobView, gpus int, now time.Time) (PowerCap, string) {
	g := float64(max(gpus, 1))
	best, bestCost := PowerCap{}, math.Inf(1)
	for _, pc := range c.Curve {
		if v.Job.Spec.HasDeadline() && now.Add(time.Duration(float64(v.RemainingP90())*pc.Slowdown)).After(v.Job.Spec.Deadline) {
			continue
		}
		if cost := (g*pc.Power + c.Price) * pc.Slowdown; cost < bestCost {
			best, bestCost = pc, cost
		}
	}
	if best.Uncapped() {
		return PowerCap{}, ""
	}
	return best, fmt.Sprintf("power cap %.0f%%: %.1f%% slower, %.0f%% of the GPU energy", best.Fraction*100,
		(best.Slowdown-1)*100, best.Power*best.Slowdown*100)
}
