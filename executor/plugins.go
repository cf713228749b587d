package executor

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/prescient-sched/prescient/cluster"
)

// Key orders jobs: lower keys run first, compared element by element. Ties
// go to the earlier submit time, then the smaller ID.
type Key [3]float64

// Less reports whether k sorts before o.
func (k Key) Less(o Key) bool {
	for i := range k {
		if k[i] != o[i] {
			return k[i] < o[i]
		}
	}
	return false
}

// hasNaN reports whether an element of k is NaN.
func (k Key) hasNaN() bool { return k[0] != k[0] || k[1] != k[1] || k[2] != k[2] }

// OrderContext is what an order plugin may read besides the job: the clock
// and the tenants' fair-share state.
type OrderContext struct {
	Now time.Time
	// Shares are the tenants' fair shares; a planning cycle's context
	// computes them when Share is first asked (most orders never do). The
	// map is the cycle's: the planner reuses it once the cycle is over.
	Shares map[string]FairShare
	// Memo is the order's own for this context: Key may keep there what it
	// computes once for many jobs, such as a tenant's weight. A context is
	// used by one goroutine, and each planning cycle makes its own.
	Memo any
	in   *PlanInput // the cycle's input, for Shares
	// spare, when set, is an empty map for Shares from the planner's pool.
	spare map[string]FairShare
}

// Share is a tenant's fair share; false when it has none (it is then at
// its share).
func (c *OrderContext) Share(tenant string) (FairShare, bool) {
	if c.Shares == nil && c.in != nil {
		c.Shares, c.spare = fairShares(c.in, c.spare), nil
	}
	fs, ok := c.Shares[tenant]
	return fs, ok
}

// FairShare is one tenant's share of the fleet against its use of it.
type FairShare struct {
	// Share is the tenant's weight over the weights of all tenants.
	Share float64
	// Usage is the tenant's decayed GPU-time over that of all tenants.
	Usage float64
	// Factor is 2^(Usage/Share − 1): 1 at its share, 2 at twice it, ½
	// unused; orders scale a job's length by it.
	Factor float64
	// WaitRatio is the tenant's decayed average wait per job over the
	// fleet's: 1 when its jobs wait as long as everyone's, 0 when unknown
	// (PlanInput.Waits left out).
	WaitRatio float64
}

// TenantWaits is one tenant's queueing, each term decayed with the same
// half-life: QueuedS integrates the number of its jobs in the queue over
// time (job-seconds), Arrivals counts its jobs as they arrive. QueuedS /
// Arrivals is its mean wait per job.
type TenantWaits struct {
	QueuedS  float64
	Arrivals float64
}

// DefaultWaitHalfLife is the half-life of tenants' waits: wait fairness
// looks back about a month, the span over which tenants compare how long
// their jobs waited.
const DefaultWaitHalfLife = 30 * 24 * time.Hour

// Advance moves w on by dt during which queued jobs of the tenant waited:
// both terms decay by halfLife, and the queued jobs add their decayed
// job-seconds, queued × ∫_0^dt 2^(−t/halfLife) dt.
func (w TenantWaits) Advance(dt, halfLife time.Duration, queued int) TenantWaits {
	if dt <= 0 || halfLife <= 0 {
		return w
	}
	h := halfLife.Seconds()
	decay := math.Exp2(-dt.Seconds() / h)
	return TenantWaits{QueuedS: w.QueuedS*decay + float64(queued)*h/math.Ln2*(1-decay), Arrivals: w.Arrivals * decay}
}

// QueueOrder ranks jobs, queued and running alike (preemption compares
// them with the same key).
type QueueOrder interface {
	Name() string
	Key(v *JobView, ctx *OrderContext) Key
}

// Waker is implemented by order plugins whose keys change with time while
// jobs run (a queue demotion): it says when to plan again.
type Waker interface {
	NextChange(v *JobView, running bool, now time.Time) time.Time
}

// Placer chooses GPUs for a job in the free capacity. It returns ok=false
// with a reason when the job does not fit; it does not change c.
type Placer interface {
	Name() string
	Place(job *cluster.Job, c *Capacity) (allocs []cluster.Allocation, ok bool, reason string)
}

// CyclePlacer is implemented by placers that read the whole input once per
// planning cycle (the distribution of requests, who shares which GPU, the
// forecast memory footprints): the planner places with the placer ForCycle
// returns. ForCycle must not change the receiver, so Plan stays pure.
type CyclePlacer interface {
	ForCycle(in *PlanInput) Placer
}

// A KeepingPlacer is a CyclePlacer that can keep what it reads of every job
// across the cycles of one replay instead of reading every job each cycle.
// The simulator asks it for a JobKeeper per replay (Framework.NewKeeper),
// tells the keeper of each job as it arrives and as it leaves for good, and
// gives the keeper back in PlanInput.Kept.
type KeepingPlacer interface {
	CyclePlacer
	NewKeeper() JobKeeper
}

// A JobKeeper keeps what a KeepingPlacer reads of the jobs that have arrived
// and not left (queued or running). It is used by one replay's goroutine.
type JobKeeper interface {
	// Arrive counts a job from its arrival (its submission, or the start of
	// the replay for one running or queued then). v is the view the job has
	// in the queue whenever it is queued, kept up to date by the caller.
	Arrive(v *JobView)
	// Leave forgets a job that left for good: it ended or was withdrawn.
	Leave(v *JobView)
	// Check reports how what the keeper holds differs from a reading of
	// in's queued and running jobs (the simulator's invariant check).
	Check(in *PlanInput) error
}

// Preemptor chooses, for a queued job that does not fit, at most limit
// of the candidates (the running jobs that may be preempted) it may
// displace, in the order they should go.
type Preemptor interface {
	Name() string
	Victims(job *JobView, jobKey Key, cands *Candidates, ctx *OrderContext, limit int) []*RunningJob
}

// Candidates are the running jobs a plan may preempt (in no particular
// order), their order keys, and side by side the facts preemptors filter
// them by (Facts): a pass over thousands of them reads no job. A cycle
// builds them once for all its preemption attempts.
type Candidates struct {
	Jobs  []*RunningJob
	Keys  []Key
	worst Key              // the largest of Keys
	facts []CandidateFacts // built on the first Facts
	read  bool             // whether facts holds Jobs' facts
}

// CandidateFacts are Jobs[i]'s tier, whether it has a deadline, its
// attempts, when its attempt started and the work it would lose.
type CandidateFacts struct {
	StartedUnixNano     int64
	WorkSinceCheckpoint time.Duration
	Attempts            int32
	Tier                int8
	HasDeadline         bool
}

// NewCandidates are the running jobs with their keys (keys[i] is
// running[i]'s).
func NewCandidates(running []*RunningJob, keys []Key) *Candidates {
	c := &Candidates{}
	for i, r := range running {
		c.Add(r, keys[i])
	}
	return c
}

// Add appends a candidate with its key.
func (c *Candidates) Add(r *RunningJob, k Key) {
	if len(c.Keys) == 0 || c.worst.Less(k) {
		c.worst = k
	}
	c.Jobs = append(c.Jobs, r)
	c.Keys = append(c.Keys, k)
	c.read = false
}

// Facts are the candidates' facts, Facts()[i] of Jobs[i]; they are read
// from the jobs on the first call (a cycle whose preemptor needs none,
// or that tries no preemption, never reads them). Not safe for
// concurrent use.
func (c *Candidates) Facts() []CandidateFacts {
	if !c.read {
		c.read = true
		if cap(c.facts) < len(c.Jobs) {
			c.facts = make([]CandidateFacts, len(c.Jobs))
		}
		c.facts = c.facts[:len(c.Jobs)]
		for i, r := range c.Jobs {
			c.facts[i] = CandidateFacts{StartedUnixNano: r.Started.UnixNano(), WorkSinceCheckpoint: r.WorkSinceCheckpoint,
				Attempts: int32(min(r.Job.Attempts, 1<<30)), Tier: int8(r.Job.Spec.Tier), HasDeadline: r.Job.Spec.HasDeadline()}
		}
	}
	return c.facts
}

// Worst is the largest of the candidates' keys (by Less; the zero Key
// when there are none): a preemptor can tell at once that no candidate's
// key passes a bound.
func (c *Candidates) Worst() Key { return c.worst }

// Len is the number of candidates.
func (c *Candidates) Len() int { return len(c.Jobs) }

// Best is at most limit of the candidates for which eligible holds, in
// the order of better (a strict order on candidates' indexes, the better
// victim first). It keeps them by insertion: O(candidates × limit) at
// worst, about O(candidates) in practice.
func (c *Candidates) Best(limit int, eligible func(k int) bool, better func(a, b int) bool) []*RunningJob {
	var buf [32]int32 // a cycle's limit fits: no allocation
	idx := buf[:0]
	if limit > len(buf) {
		idx = make([]int32, 0, limit)
	}
	for k := range c.Jobs {
		if !eligible(k) {
			continue
		}
		i := len(idx)
		for i > 0 && better(k, int(idx[i-1])) {
			i--
		}
		if i >= limit {
			continue
		}
		if len(idx) < limit {
			idx = append(idx, 0)
		}
		copy(idx[i+1:], idx[i:len(idx)-1])
		idx[i] = int32(k)
	}
	out := make([]*RunningJob, len(idx))
	for n, k := range idx {
		out[n] = c.Jobs[k]
	}
	return out
}

// CheckpointTimer sets how often a running job checkpoints; zero means never.
type CheckpointTimer interface {
	Name() string
	Interval(job *JobView, nodes int, in *PlanInput) time.Duration
}

// Blocking says what the planner does when a job in queue order does not fit.
type Blocking int

// The blocking modes.
const (
	// Skip goes on to the next job (greedy list scheduling).
	Skip Blocking = iota
	// HeadOfLine stops: nothing behind the blocked job starts (strict FIFO).
	HeadOfLine
	// Reserve gives blocked jobs that the Reserver picks a reservation at
	// their shadow time and lets later jobs start only when their P90 ends
	// before every reservation or they fit beside it (EASY backfilling).
	Reserve
)

// Reserver says which blocked jobs get a reservation. reserved is the
// number of reservations made so far in this cycle; ctx is the cycle's
// clock and tenants' shares, as the order saw them.
type Reserver interface {
	Reserve(v *JobView, reserved int, ctx *OrderContext) (bool, string)
}

// Policy is a planner configuration: one plugin per decision.
type Policy struct {
	Name       string
	Order      QueueOrder
	Blocking   Blocking
	Reserver   Reserver        // with Blocking == Reserve
	Preemptor  Preemptor       // nil: never preempt
	Placer     Placer          // nil: FirstFit
	Checkpoint CheckpointTimer // nil: no periodic checkpoints
	PowerCap   PowerCapper     // nil: no power caps
	Hold       Holder          // nil: no job is held back
	// Speed, on a fleet of mixed GPU models, is a job's speed on a model
	// against the one its forecasts are in (JobSpeed); a job placed this
	// cycle is expected to end its forecast times 1 / its slowest GPU's
	// speed later. nil: every model alike.
	Speed func(job *cluster.Job, model string) float64
	// Grace is how long a preempted job has to checkpoint before it is
	// stopped anyway.
	Grace time.Duration
	// NeedsOracle is set for policies defined on true durations
	// (sjf-oracle, srtf-oracle): they must be fed an exact oracle.
	NeedsOracle bool
}

// ErrInvalidPolicy is returned (wrapped) for a policy that cannot plan.
var ErrInvalidPolicy = errors.New("invalid policy")

// Validate checks that the policy has what its blocking mode needs.
func (p *Policy) Validate() error {
	switch {
	case p.Name == "":
		return fmt.Errorf("policy has no name: %w", ErrInvalidPolicy)
	case p.Order == nil:
		return fmt.Errorf("policy %s: no queue order: %w", p.Name, ErrInvalidPolicy)
	case p.Blocking == Reserve && p.Reserver == nil:
		return fmt.Errorf("policy %s: reservations without a reserver: %w", p.Name, ErrInvalidPolicy)
	case p.Blocking < Skip || p.Blocking > Reserve:
		return fmt.Errorf("policy %s: blocking mode %d: %w", p.Name, p.Blocking, ErrInvalidPolicy)
	case p.Grace < 0:
		return fmt.Errorf("policy %s: grace %s is negative: %w", p.Name, p.Grace, ErrInvalidPolicy)
	}
	return nil
}
