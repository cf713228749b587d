package executor

import (
	"math"
	"slices"
	"time"

	"github.com/prescient-sched/prescient/cluster"
)

// QueueFacts are what a planning cycle needs of the whole queue besides
// its order, which it would otherwise walk the queue for: a caller that
// keeps them as jobs come and go (QueueFactsKeeper; the simulator) gives
// them in PlanInput.Facts, and the cycle reads no queued job for them.
type QueueFacts struct {
	// Small says some queued job may fit in no whole GPU: a share, or a job
	// of no GPU.
	Small bool
	// FewestPlain is the fewest GPUs a queued job asks for when every one
	// is plain; 0 when some job is not, and the largest int for
	// an empty queue.
	FewestPlain int
	// New are the queued jobs first queued at the plan's Now, before any
	// attempt (newJob): those the plan reports deadlines for, in any order.
	New []*JobView
}

// Same says f and g hold the same facts, New as the same jobs in any
// order.
func (f *QueueFacts) Same(g *QueueFacts) bool {
	if f.Small != g.Small || f.FewestPlain != g.FewestPlain || len(f.New) != len(g.New) {
		return false
	}
	n := make(map[*JobView]int, len(f.New))
	for _, v := range f.New {
		n[v]++
	}
	for _, v := range g.New {
		if n[v]--; n[v] < 0 {
			return false
		}
	}
	return true
}

// smallJob says a job may fit in no whole GPU.
func smallJob(j *cluster.Job) bool { return j.Spec.GPUs == 0 || j.Spec.Fractional() }

// newJob says a queued job was first queued at now, before any attempt.
// The view's own field first: most of a long queue was not queued now,
// and reading each one's job costs a cache miss.
func newJob(v *JobView, now time.Time) bool { return v.QueuedSince.Equal(now) && v.Job.Attempts == 0 }

// queueShape walks queue for the Small and FewestPlain of its facts.
func queueShape(queue []*JobView) QueueFacts {
	f := QueueFacts{FewestPlain: math.MaxInt}
	for _, v := range queue {
		if smallJob(v.Job) {
			f.Small = true
		}
		if !plain(v.Job) {
			f.FewestPlain = 0
		}
		f.FewestPlain = min(f.FewestPlain, v.Job.Spec.GPUs)
	}
	return f
}

// QueueFactsOf walks queue for its facts at now.
func QueueFactsOf(queue []*JobView, now time.Time) QueueFacts {
	f := queueShape(queue)
	for _, v := range queue {
		if newJob(v, now) {
			f.New = append(f.New, v)
		}
	}
	return f
}

// QueueFactsKeeper keeps a queue's QueueFacts as jobs join and leave it,
// each change in time independent of the queue's length.
type QueueFactsKeeper struct {
	small, notPlain int
	gpus            map[int]int // plain jobs by GPUs asked
	newAt           time.Time
	new             []*JobView // jobs added at newAt that are new then
}

// Add counts a job that joins the queue at now.
func (k *QueueFactsKeeper) Add(v *JobView, now time.Time) {
	if smallJob(v.Job) {
		k.small++
	}
	if plain(v.Job) {
		if k.gpus == nil {
			k.gpus = map[int]int{}
		}
		k.gpus[v.Job.Spec.GPUs]++
	} else {
		k.notPlain++
	}
	if newJob(v, now) {
		if !k.newAt.Equal(now) {
			k.newAt, k.new = now, k.new[:0]
		}
		k.new = append(k.new, v)
	}
}

// Remove uncounts a job that leaves the queue (Add counted it).
func (k *QueueFactsKeeper) Remove(v *JobView) {
	if smallJob(v.Job) {
		k.small--
	}
	if plain(v.Job) {
		if k.gpus[v.Job.Spec.GPUs]--; k.gpus[v.Job.Spec.GPUs] == 0 {
			delete(k.gpus, v.Job.Spec.GPUs)
		}
	} else {
		k.notPlain--
	}
	if v.QueuedSince.Equal(k.newAt) { // else it is not among the new ones
		if i := slices.Index(k.new, v); i >= 0 {
			k.new = slices.Delete(k.new, i, i+1)
		}
	}
}

// Facts are the queue's facts at now; New is valid until the next Add or
// Remove.
func (k *QueueFactsKeeper) Facts(now time.Time) *QueueFacts {
	f := &QueueFacts{Small: k.small > 0, FewestPlain: math.MaxInt}
	if k.notPlain > 0 {
		f.FewestPlain = 0
	} else {
		for g := range k.gpus {
			f.FewestPlain = min(f.FewestPlain, g)
		}
	}
	if k.newAt.Equal(now) {
		f.New = k.new
	}
	return f
}
