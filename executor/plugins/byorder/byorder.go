package byorder

import (
	"fmt"
	"math"

	"github.com/prescient-sched/prescient/executor"
)

// Name is the preemptor's name.
const Name = "by-order"

// Args configure the preemptor.
type Args struct {
	// Margin is how much larger the victim's first key element must be.
	Margin float64
}

// Validate rejects a negative or non-finite margin.
func (a Args) Validate() error {
	if a.Margin < 0 || math.IsNaN(a.Margin) || math.IsInf(a.Margin, 0) {
		return fmt.Errorf("by-order: margin %g must be finite and non-negative", a.Margin)
	}
	return nil
}

// ByOrder is the preemptor.
type ByOrder struct{ args Args }

var _ executor.Preemptor = (*ByOrder)(nil)

// New returns the preemptor.
func New(a Args) (*ByOrder, error) {
	if err := a.Validate(); err != nil {
		return nil, err
	}
	return &ByOrder{args: a}, nil
}

// Name implements executor.Preemptor.
func (*ByOrder) Name() string { return Name }

// Victims implements executor.Preemptor.
// It keeps the limit worst candidates by insertion, O(running × limit) at
// worst and about O(running) in practice.
func (b *ByOrder) Victims(_ *executor.JobView, key executor.Key, cands *executor.Candidates, _ *executor.OrderContext, limit int) []*executor.RunningJob {
	running, keys := cands.Jobs, cands.Keys
	threshold := key[0] + b.args.Margin
	idx := make([]int, 0, limit)
	for i := range running {
		if keys[i][0] <= threshold {
			continue
		}
		k := len(idx)
		for k > 0 && worse(keys, running, i, idx[k-1]) {
			k--
		}
		if k >= limit {
			continue
		}
		if len(idx) < limit {
			idx = append(idx, 0)
		}
		copy(idx[k+1:], idx[k:len(idx)-1])
		idx[k] = i
	}
	out := make([]*executor.RunningJob, len(idx))
	for k, i := range idx {
		out[k] = running[i]
	}
	return out
}

// worse reports whether running job i should go before j: a worse key,
// then the larger ID (any fixed tie-break would do).
func worse(keys []executor.Key, running []*executor.RunningJob, i, j int) bool {
	if keys[i] != keys[j] {
		return keys[j].Less(keys[i])
	}
	return running[i].Job.ID > running[j].Job.ID
}
