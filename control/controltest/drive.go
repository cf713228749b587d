package controltest

import (
	"cmp"
	"slices"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/service"
)

// The Fake is driven by the test through these, besides Start, Checkpoint,
// Preempt and Finish.

// AddRecommendation records r, giving it the next ID and, when it has none,
// the time now and status "open". It returns the stored recommendation.
func (f *Fake) AddRecommendation(r service.Recommendation) service.Recommendation {
	f.mu.Lock()
	defer f.mu.Unlock()
	r.ID = int64(len(f.recs) + 1)
	if r.Time.IsZero() {
		r.Time = f.clock()
	}
	r.Status = cmp.Or(r.Status, "open")
	f.recs = append(f.recs, r)
	return r
}

// AddSample records a fleet-wide telemetry sample for the stats series.
func (f *Fake) AddSample(t time.Time, utilizationPct, powerW float64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.samples = append(f.samples, sample{t: t.UTC(), utilPct: utilizationPct, power: powerW})
	slices.SortStableFunc(f.samples, func(a, b sample) int { return a.t.Compare(b.t) })
}

// SetGPUTelemetry sets what the fleet view shows of one GPU's telemetry.
func (f *Fake) SetGPUTelemetry(ref cluster.GPURef, t GPUTelemetry) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gpuTel[ref] = t
}

// SetLoan makes node an inference node with loan state l in the fleet
// view.
func (f *Fake) SetLoan(node string, l service.NodeLoan) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.loans[node] = l
}

// SetParking shows node in the fleet view as parked or waking (state
// "parked", "waking"), or as its fleet state again ("").
func (f *Fake) SetParking(node, state string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if state == "" {
		delete(f.power, node)
		return
	}
	f.power[node] = state
}

// SetJobLog gives the log of job id's attempt on node the text JobLog
// answers; nodes without one answer "unavailable".
func (f *Fake) SetJobLog(id cluster.JobID, attempt int, node, text string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.logs[logKey{id, attempt, node}] = text
}

// Retrains counts the calls of Retrain that succeeded.
func (f *Fake) Retrains() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.retrains
}

// SetQuotaUsage sets what Stats and Tenants report of the tenants' quotas
// (the fake plans nothing, so it counts nothing).
func (f *Fake) SetQuotaUsage(q []service.QuotaUsage) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.quotas = slices.Clone(q)
}
