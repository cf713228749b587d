package models

import (
	"fmt"
	"math"
)

// Blend is how a learned model is served: its forecasts pulled toward the
// rolling median of comparable jobs, as far as the two have earned by
// their errors on the tenant's latest outcomes. Learners model their
// target as a correction to that median (see Options.offsetColumn); a
// correction learned before a tenant changed what it runs can be wrong for
// weeks, while the median follows within a few dozen jobs. For each tenant
// Blend keeps the recent absolute error of the median plus each share in
// blendShares of the correction, each outcome weighing half as much
// blendHalfLife outcomes later, and serves the share that erred least
// (all tenants' errors while the tenant has too few, the whole
// correction before any outcome). The rule is fixed, never fitted (its
// half-life was picked on scikit-learn's trees, before any Go learner was
// blended). On the Philly backtest it took the ensemble's mae_log from
// 0.996 to 0.959 on 2017-11-20 to 12-01 (rolling median 0.969), from 0.918
// to 0.915 on 11-10 to 11-20, and cost 0.02 on 10-25 to 11-10 (1.071 to
// 1.088, rolling median 1.125), where its per-tenant choice lags.
//
// A Blend is not safe for concurrent use; the predictor holds its lock.
type Blend struct {
	cols    [3]int // comparable_q10, _q50, _q90
	tenants map[string]*blendErrors
	all     blendErrors
}

// blendShares are the shares of the learned correction Blend chooses
// among: from none (the rolling median) to a little more than all.
var blendShares = [...]float64{0, 0.25, 0.5, 0.75, 1, 1.25}

var blendP50 = [...]float64{0.5}

// blendHalfLife is how many outcomes (of the tenant, or of all for the
// fallback) halve an outcome's weight in Blend's errors.
const blendHalfLife = 100

// blendMinWeight is the decayed count of outcomes a tenant needs before
// its own errors choose its share.
const blendMinWeight = 5

// blendDecay is the weight an outcome keeps per outcome after it.
var blendDecay = math.Pow(0.5, 1.0/blendHalfLife)

// blendErrors are decayed sums of absolute errors, one per share, and
// the decayed count of outcomes they cover.
type blendErrors struct {
	err    [len(blendShares)]float64
	weight float64
}

func (e *blendErrors) add(base, learned, y float64) {
	for k, s := range blendShares {
		e.err[k] = e.err[k]*blendDecay + math.Abs(base+s*(learned-base)-y)
	}
	e.weight = e.weight*blendDecay + 1
}

// best is the share with the least error; ok false without outcomes.
func (e *blendErrors) best() (share float64, ok bool) {
	if e.weight == 0 {
		return 0, false
	}
	k := 0
	for i := range e.err {
		if e.err[i] < e.err[k] {
			k = i
		}
	}
	return blendShares[k], true
}

// NewBlend returns a Blend for rows with the given feature names (they
// must include the comparable jobs' quantiles), with no outcomes yet.
func NewBlend(features []string) (*Blend, error) {
	b := &Blend{tenants: map[string]*blendErrors{}}
	o := Options{Features: features}
	for k, name := range []string{FeatureComparableQ10, FeatureComparableQ50, FeatureComparableQ90} {
		c, err := o.column(name)
		if err != nil {
			return nil, fmt.Errorf("blend: %w", err)
		}
		b.cols[k] = c
	}
	return b, nil
}

// Learn hears a finished job of tenant: its outcome y (log) and the
// learned model's P50 for its row x.
func (b *Blend) Learn(tenant string, x []float64, learnedP50, y float64) {
	var buf [1]float64
	base := rollingQuantiles(x, b.cols, blendP50[:], buf[:0])[0] // the rolling median's P50
	b.all.add(base, learnedP50, y)
	e := b.tenants[tenant]
	if e == nil {
		e = &blendErrors{}
		b.tenants[tenant] = e
	}
	e.add(base, learnedP50, y)
}

// Share is the share of the learned correction served to tenant.
func (b *Blend) Share(tenant string) float64 {
	if e := b.tenants[tenant]; e != nil && e.weight >= blendMinWeight {
		s, _ := e.best()
		return s
	}
	if s, ok := b.all.best(); ok {
		return s
	}
	return 1
}

// Serve rewrites q, the learned model's quantiles qs for row x of a job of
// tenant, as served: each moved toward the rolling median's quantile at
// the same level (RollingMedian's) by the tenant's share, in place. The
// result stays non-decreasing in q.
func (b *Blend) Serve(tenant string, x, qs, q []float64) {
	s := b.Share(tenant)
	if s == 1 {
		return
	}
	var buf [8]float64
	base := rollingQuantiles(x, b.cols, qs, buf[:0])
	prev := math.Inf(-1)
	for k := range q {
		q[k] = math.Max(prev, base[k]+s*(q[k]-base[k]))
		prev = q[k]
	}
}

// Blended says whether m is served through a Blend: every learned model,
// not the baselines.
func Blended(m Model) bool {
	l, err := LookupLearner(m.Name())
	return err == nil && !l.Baseline
}
