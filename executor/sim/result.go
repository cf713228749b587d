package sim

import (
	"cmp"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/prescient-sched/prescient/cluster"
)

// Metrics are a replay's figures, in the units their JSON names say.
type Metrics struct {
	Policy   string `json:"policy"`
	Jobs     int    `json:"jobs"`
	Finished int    `json:"finished"`
	// Withdrawn counts the jobs that left the queue when the trace's users
	// cancelled them (Config.Jobs). The job figures below leave out every
	// job the trace shows withdrawn, even one the replay started sooner.
	Withdrawn int     `json:"withdrawn"`
	AvgJCTS   float64 `json:"avg_jct_s"`
	P50JCTS   float64 `json:"p50_jct_s"`
	P99JCTS   float64 `json:"p99_jct_s"`
	AvgWaitS  float64 `json:"avg_wait_s"`
	P99WaitS  float64 `json:"p99_wait_s"`
	// AvgBoundedSlowdown is the mean over finished jobs (but withdrawn
	// ones) of JCT ÷ run time, the run time at least BoundedSlowdownFloor
	// and the ratio at least 1: the HPC literature's measure of
	// backfilling.
	AvgBoundedSlowdown float64            `json:"avg_bounded_slowdown"`
	MakespanS          float64            `json:"makespan_s"`
	GPUAllocPct        float64            `json:"gpu_alloc_pct"`
	DeadlineJobs       int                `json:"deadline_jobs"`
	DeadlineFeasible   int                `json:"deadline_feasible"`
	DeadlineMetPct     float64            `json:"deadline_met_pct"`
	Preemptions        int                `json:"preemptions"`
	LostGPUS           float64            `json:"lost_gpu_s"`
	CheckpointGPUS     float64            `json:"checkpoint_gpu_s"`
	EnergyKWh          float64            `json:"energy_kwh"`
	ParkedNodeS        float64            `json:"parked_node_s"`
	PowerCappedStarts  int                `json:"power_capped_starts"`
	TransferSavedBytes int64              `json:"transfer_saved_bytes"`
	KgCO2              float64            `json:"kgco2"`
	JainFairness       float64            `json:"jain_fairness"`
	WaitByTierS        map[string]float64 `json:"wait_by_tier_s"`
	WaitByTenantS      map[string]float64 `json:"wait_by_tenant_s"`
	// JobsByTenant counts each tenant's finished jobs (the ones its mean
	// wait is over); WorstTenantWaitRatio is the largest mean wait of a
	// tenant with at least MinTenantJobs of them over AvgWaitS (0 without
	// waits): fairness as a tenant sees it.
	JobsByTenant         map[string]int `json:"jobs_by_tenant"`
	WorstTenantWaitRatio float64        `json:"worst_tenant_wait_ratio"`
	// PeakGPUsByTenant is the most GPUs each tenant held at once: against
	// a tenants file, at most its quota plus its borrowing limit.
	PeakGPUsByTenant map[string]int `json:"peak_gpus_by_tenant"`
	SimWallS         float64        `json:"sim_wall_s"`
	DecisionsPerS    float64        `json:"decisions_per_s"`
	// Lending is there with Config.Lending.
	Lending *LendingMetrics `json:"lending,omitempty"`
}

// LendingMetrics are the inference pool's figures (Config.Lending): the
// GPU-time lent to training (until the service had the nodes back), the
// inference demand, the part of it the service's GPUs could not serve,
// loans, nodes taken back and the training jobs they preempted.
type LendingMetrics struct {
	LentGPUS           float64 `json:"lent_gpu_s"`
	InferenceBusyGPUS  float64 `json:"inference_busy_gpu_s"`
	InferenceShortGPUS float64 `json:"inference_short_gpu_s"`
	Loans              int     `json:"loans"`
	Reclaims           int     `json:"reclaims"`
	ReclaimPreemptions int     `json:"reclaim_preemptions"`
}

// Result is a replay's metrics and the series a plot draws.
type Result struct {
	Metrics
	// JCTs are the finished jobs' completion times, ascending.
	JCTs []time.Duration
	// Queue is the queue length over time (at most one point per 10
	// minutes of virtual time).
	Queue []QueuePoint
	// NodeFailures counts the node failures drawn.
	NodeFailures int
	// PlanCycles counts the planner calls.
	PlanCycles int
	// Outcomes lists every job's start and end, in the order of the
	// simulator's jobs (by submit time), when Config.Outcomes asks.
	Outcomes []JobOutcome
	// Cut says why the replay ended with jobs left ("" when none were);
	// Horizon is how far it got: what happened until then is in the
	// result, a job that had not started or ended by then starts or ends
	// later.
	Cut     Cut
	Horizon time.Time
}

// MinTenantJobs is the fewest jobs a tenant needs in a replay for its
// mean wait to count in WorstTenantWaitRatio: a tenant with a handful of
// jobs can wait long by the luck of when they came.
const MinTenantJobs = 20

// Cut is why a replay ended before every job finished.
type Cut string

// The cuts.
const (
	CutUntil   Cut = "until"   // Config.Until
	CutBudget  Cut = "budget"  // Config.StopBy
	CutStalled Cut = "stalled" // jobs left that nothing would start
)

// BoundedSlowdownFloor is the least run time bounded slowdown divides
// by, so that a job of a few seconds that waited does not dominate it.
const BoundedSlowdownFloor = 10 * time.Second

// result computes the metrics. Wait is the time a job spent queued, over
// all its attempts (JCT less the time it held GPUs). Jain's index is over
// tenants' mean slowdown (JCT / run time): 1 when every tenant's jobs are
// slowed alike, 1/n when one tenant takes all the delay.
func (s *Simulator) result(wall time.Duration) *Result {
	a := &s.acct
	r := &Result{Queue: a.queue, NodeFailures: a.failures, PlanCycles: a.cycles}
	m := &r.Metrics
	m.Jobs, m.Finished, m.Withdrawn, m.Preemptions = len(s.jobs), a.finished, a.withdrawn, a.preemptions
	var waits []float64
	var bsld float64
	tierW, tenantW := map[string]*mean{}, map[string]*mean{}
	slow := map[string]*mean{}
	met := 0
	for _, j := range s.jobs {
		if j.withdrawn {
			continue
		}
		if j.job.Spec.HasDeadline() {
			m.DeadlineJobs++
			if j.feasible {
				m.DeadlineFeasible++
			}
		}
		if j.job.State != cluster.StateSucceeded {
			continue
		}
		jct := j.job.EndTime.Sub(j.job.SubmitTime)
		wait := (jct - j.held).Seconds()
		r.JCTs = append(r.JCTs, jct)
		waits = append(waits, wait)
		bsld += max(1, jct.Seconds()/max(j.truth.Seconds(), BoundedSlowdownFloor.Seconds()))
		add(tierW, j.job.Spec.Tier.String(), wait)
		add(tenantW, j.job.Spec.Tenant, wait)
		add(slow, j.job.Spec.Tenant, math.Max(jct.Seconds(), 1)/math.Max(j.truth.Seconds(), 1)) // a job of no time done at once: 1, not 0
		if j.feasible && !j.job.EndTime.After(j.job.Spec.Deadline) {
			met++
		}
	}
	slices.Sort(r.JCTs)
	slices.Sort(waits)
	jcts := make([]float64, len(r.JCTs))
	for i, d := range r.JCTs {
		jcts[i] = d.Seconds()
	}
	m.AvgJCTS, m.P50JCTS, m.P99JCTS = avg(jcts), quantile(jcts, 0.5), quantile(jcts, 0.99)
	m.AvgWaitS, m.P99WaitS = avg(waits), quantile(waits, 0.99)
	if len(waits) > 0 {
		m.AvgBoundedSlowdown = bsld / float64(len(waits))
	}
	if a.lastEnd.After(a.start) {
		m.MakespanS = a.lastEnd.Sub(a.start).Seconds()
		gpus := 0
		for _, n := range s.snap.Nodes {
			gpus += len(n.GPUs)
		}
		span := s.acct.last.Sub(a.start).Seconds()
		capacity := float64(gpus) * span
		if l := s.lend; l != nil { // the inference pool's GPUs count while lent
			capacity += l.lentS - float64(l.poolGPUs)*span
		}
		if capacity > 0 {
			m.GPUAllocPct = 100 * a.allocGPUs / capacity
		}
	}
	if m.DeadlineFeasible > 0 {
		m.DeadlineMetPct = 100 * float64(met) / float64(m.DeadlineFeasible)
	}
	m.LostGPUS, m.CheckpointGPUS = a.lostGPU.Seconds(), a.checkpointGPU.Seconds()
	a.park.finish(s, a)
	m.EnergyKWh, m.ParkedNodeS, m.KgCO2 = a.energyJ/3.6e6, a.park.parkedS, a.co2g/1000
	m.PowerCappedStarts, m.TransferSavedBytes = a.capped, a.savedBytes
	m.WaitByTierS, m.WaitByTenantS = means(tierW), means(tenantW)
	m.PeakGPUsByTenant = maps.Clone(s.peak)
	m.JobsByTenant = make(map[string]int, len(tenantW))
	for t, e := range tenantW {
		m.JobsByTenant[t] = e.n
		if e.n >= MinTenantJobs && m.AvgWaitS > 0 {
			m.WorstTenantWaitRatio = max(m.WorstTenantWaitRatio, e.sum/float64(e.n)/m.AvgWaitS)
		}
	}
	m.JainFairness = jain(slow)
	if l := s.lend; l != nil {
		m.Lending = &LendingMetrics{LentGPUS: l.lentS, InferenceBusyGPUS: l.busyS, InferenceShortGPUS: l.shortS,
			Loans: l.loans, Reclaims: l.reclaims, ReclaimPreemptions: l.reclaimJob}
	}
	if s.cfg.Outcomes {
		r.Outcomes = s.outcomes()
	}
	r.Cut, r.Horizon = s.cut, s.now
	if s.cut == CutUntil {
		r.Horizon = s.cfg.Until // every event until then was handled
	}
	m.SimWallS = wall.Seconds()
	if wall > 0 {
		m.DecisionsPerS = float64(a.decisions) / wall.Seconds()
	}
	return r
}

type mean struct {
	sum float64
	n   int
}

func add(m map[string]*mean, k string, v float64) {
	e, ok := m[k]
	if !ok {
		e = &mean{}
		m[k] = e
	}
	e.sum += v
	e.n++
}

func means(m map[string]*mean) map[string]float64 {
	out := make(map[string]float64, len(m))
	for k, e := range m {
		out[k] = e.sum / float64(e.n)
	}
	return out
}

// jain is Jain's fairness index of the inverse mean slowdowns, summed in
// tenant order so that a replay gives the same figure to the last bit
// (map order would change its rounding from run to run).
func jain(slow map[string]*mean) float64 {
	var sum, sq float64
	for _, name := range slices.Sorted(maps.Keys(slow)) {
		e := slow[name]
		x := 1 / (e.sum / float64(e.n))
		sum += x
		sq += x * x
	}
	if sq == 0 {
		return 0
	}
	return sum * sum / (float64(len(slow)) * sq)
}

func avg(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// quantile of sorted xs, nearest rank.
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(xs)))) - 1
	return xs[cmp.Or(max(i, 0), 0)]
}
