package leastlostwork

import (
	"fmt"
	"time"

	"github.com/prescient-sched/prescient/executor"
)

// Name is the preemptor's name.
const Name = "least-lost-work"

// Args configure the preemptor.
type Args struct {
	// UrgencyWindow is the slack under which a deadline job is urgent.
	UrgencyWindow time.Duration
	// MinRun protects jobs that started less than this long ago.
	MinRun time.Duration
}

// Validate rejects negative durations.
func (a Args) Validate() error {
	if a.UrgencyWindow < 0 || a.MinRun < 0 {
		return fmt.Errorf("least-lost-work: urgency window %s and min run %s must not be negative", a.UrgencyWindow, a.MinRun)
	}
	return nil
}

// LeastLostWork is the preemptor.
type LeastLostWork struct{ args Args }

var _ executor.Preemptor = (*LeastLostWork)(nil)

// New returns the preemptor.
func New(a Args) (*LeastLostWork, error) {
	if err := a.Validate(); err != nil {
		return nil, err
	}
	return &LeastLostWork{args: a}, nil
}

// Name implements executor.Preemptor.
func (*LeastLostWork) Name() string { return Name }

// Victims implements executor.Preemptor.
// It keeps the best limit candidates by insertion, O(running × limit) at
// worst and about O(running) in practice.
func (l *LeastLostWork) Victims(job *executor.JobView, _ executor.Key, running []*executor.RunningJob, _ []executor.Key, ctx *executor.OrderContext, limit int) []*executor.RunningJob {
	urgent := executor.Urgent(job, ctx.Now, l.args.UrgencyWindow)
	tier := job.Job.Spec.Tier
	out := make([]*executor.RunningJob, 0, limit)
	for _, r := range running {
		rt := r.Job.Spec.Tier
		if ctx.Now.Sub(r.Started) < l.args.MinRun || !(rt < tier || (urgent && rt == tier && !r.Job.Spec.HasDeadline())) {
			continue
		}
		i := len(out)
		for i > 0 && loses(r, out[i-1]) {
			i--
		}
		if i >= limit {
			continue
		}
		if len(out) < limit {
			out = append(out, nil)
		}
		copy(out[i+1:], out[i:len(out)-1])
		out[i] = r
	}
	return out
}

// loses reports whether a is the better victim: lower tier, then less work
// since its checkpoint.
func loses(a, b *executor.RunningJob) bool {
	if a.Job.Spec.Tier != b.Job.Spec.Tier {
		return a.Job.Spec.Tier < b.Job.Spec.Tier
	}
	return a.WorkSinceCheckpoint < b.WorkSinceCheckpoint
}
