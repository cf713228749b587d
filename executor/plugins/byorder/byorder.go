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
func (b *ByOrder) Victims(_ *executor.JobView, key executor.Key, cands *executor.Candidates, _ *executor.OrderContext, limit int) []*executor.RunningJob {
	threshold := key[0] + b.args.Margin
	if w := cands.Worst()[0]; w == w && w <= threshold { // no candidate's first element passes it (none is NaN)
		return nil
	}
	return cands.Best(limit, func(i int) bool { return cands.Keys[i][0] > threshold },
		func(i, j int) bool { return worse(cands.Keys, cands.Jobs, i, j) })
}

// worse reports whether running job i should go before j: a worse key,
// then the larger ID (any fixed tie-break would do).
func worse(keys []executor.Key, running []*executor.RunningJob, i, j int) bool {
	if keys[i] != keys[j] {
		return keys[j].Less(keys[i])
	}
	return running[i].Job.ID > running[j].Job.ID
}
