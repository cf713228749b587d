package leastlostwork

import (
	"fmt"
	"math"
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
	// BackOff doubles a job's MinRun for each earlier attempt (MinRun ×
	// 2^(attempts−1)) against jobs of its own tier, so a job that was stopped
	// before is not stopped again right away: without it long jobs can be
	// displaced over and over, each time waiting in the queue again. Urgent
	// deadline jobs and higher tiers see MinRun.
	BackOff bool
	// ShorterBy, when positive, also lets a job displace a running job of
	// its own tier whose order key agrees with its own in every element but
	// the last, where the victim's is at least ShorterBy times the job's
	// plus Margin seconds: with the prescient order, a running job whose
	// predicted remaining time is that much longer (shortest remaining time
	// first on forecasts). 0 turns it off.
	ShorterBy float64
	// Margin is the least difference, in the last key element's unit
	// (seconds for the prescient order), for ShorterBy.
	Margin float64
	// ByClass lets a job that is not urgent displace a running job without a
	// deadline of its tier whose order key has a greater second element: with the prescient
	// order, a starving job or a job of a tenant that is behind displaces a
	// job of the classes after it.
	ByClass bool
}

// Validate rejects negative durations and factors.
func (a Args) Validate() error {
	if a.UrgencyWindow < 0 || a.MinRun < 0 {
		return fmt.Errorf("least-lost-work: urgency window %s and min run %s must not be negative", a.UrgencyWindow, a.MinRun)
	}
	if !(a.ShorterBy == 0 || a.ShorterBy >= 1) || math.IsInf(a.ShorterBy, 0) || !(a.Margin >= 0) || math.IsInf(a.Margin, 0) {
		return fmt.Errorf("least-lost-work: shorter-by %g must be 0 or at least 1 and margin %g finite and non-negative", a.ShorterBy, a.Margin)
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

// Victims implements executor.Preemptor. It reads the candidates' facts,
// not their jobs.
func (l *LeastLostWork) Victims(job *executor.JobView, jobKey executor.Key, cands *executor.Candidates, ctx *executor.OrderContext, limit int) []*executor.RunningJob {
	urgent := executor.Urgent(job, ctx.Now, l.args.UrgencyWindow)
	tier := int8(job.Job.Spec.Tier)
	now := ctx.Now.UnixNano()
	facts := cands.Facts()
	eligible := func(k int) bool {
		f := &facts[k]
		if f.Tier > tier {
			return false
		}
		ran := time.Duration(now - f.StartedUnixNano)
		if ran < l.args.MinRun {
			return false
		}
		sameTier := f.Tier == tier && ran >= l.minRun(f.Attempts) // the back-off holds against the job's own tier only
		return f.Tier < tier || (urgent && f.Tier == tier && !f.HasDeadline) || (sameTier && l.longer(jobKey, cands.Keys[k])) ||
			(sameTier && !urgent && !f.HasDeadline && l.laterClass(jobKey, cands.Keys[k]))
	}
	return cands.Best(limit, eligible, func(a, b int) bool { return loses(&facts[a], &facts[b]) })
}

// minRun is how long a job of that many attempts is protected after it
// started.
func (l *LeastLostWork) minRun(attempts int32) time.Duration {
	if !l.args.BackOff || attempts <= 1 {
		return l.args.MinRun
	}
	return l.args.MinRun * time.Duration(1<<min(attempts-1, 16)) // bounded for the arithmetic only
}

// longer reports whether a running job's key is ShorterBy times longer than
// the job's, the other elements being equal.
func (l *LeastLostWork) longer(job, victim executor.Key) bool {
	if l.args.ShorterBy == 0 {
		return false
	}
	last := len(job) - 1
	for i := range last {
		if job[i] != victim[i] {
			return false
		}
	}
	return victim[last] >= l.args.ShorterBy*job[last]+l.args.Margin
}

// laterClass reports whether ByClass lets the job displace the victim.
func (l *LeastLostWork) laterClass(job, victim executor.Key) bool {
	return l.args.ByClass && job[0] == victim[0] && job[1] < victim[1]
}

// loses reports whether a is the better victim: lower tier, then less work
// since its checkpoint.
func loses(a, b *executor.CandidateFacts) bool {
	if a.Tier != b.Tier {
		return a.Tier < b.Tier
	}
	return a.WorkSinceCheckpoint < b.WorkSinceCheckpoint
}
