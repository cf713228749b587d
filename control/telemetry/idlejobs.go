package telemetry

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/collector"
	"github.com/prescient-sched/prescient/control/advice"
	"github.com/prescient-sched/prescient/control/live"
)

// DefaultIdleJobAfter is how long every GPU of a running job must have
// been below the idle threshold before the plane recommends looking at
// it (an "idle" recommendation).
const DefaultIdleJobAfter = 15 * time.Minute

// IdleJobs watches the running jobs' GPUs' utilization and recommends
// looking at the jobs whose every GPU has been idle a while. It finds the
// GPUs of the jobs the backend does not name (Kubernetes) by the GPUs
// their processes were sampled on, for those recommendations and for the
// idle forecast (UUIDsByProcess). Watch and Recommend are the plan
// loop's hooks; the reads run beside it (Wait).
type IdleJobs struct {
	util   *Utilization
	store  collector.TelemetryStore // nil: nothing is watched
	served IdleForecaster
	advice *advice.Book
	// after is IdleJobAfter: negative, no recommendations (the GPUs of
	// the unnamed jobs are still looked up); zero, DefaultIdleJobAfter.
	after time.Duration
	log   *slog.Logger
	read  live.Task // the read beside the loop (Watch)

	mu        sync.Mutex
	jobs      map[cluster.JobID]idleJob // nil before the first read
	threshold float64
	// procGPUs are the GPUs (UUIDs) of the running jobs whose backend
	// does not name them, as their processes' samples did, per attempt.
	procGPUs map[cluster.JobID]attemptGPUs
}

// NewIdleJobs watches through util and st (nil: nothing), with the idle
// threshold of the model served recommends after IdleJobAfter.
func NewIdleJobs(util *Utilization, st collector.TelemetryStore, served IdleForecaster, book *advice.Book, after time.Duration, log *slog.Logger) *IdleJobs {
	return &IdleJobs{util: util, store: st, served: served, advice: book, after: after, log: log}
}

// idleJob is a running job all of whose GPUs have been idle for idleFor.
type idleJob struct {
	gpus    []string
	idleFor time.Duration
}

// held is a running job's GPUs as Watch reads them.
type held struct {
	id           cluster.JobID
	uuids, names []string
	// Of a job whose GPUs the backend does not name: its attempt, when
	// it started, and its GPUs.
	attempt int
	started time.Time
	refs    []cluster.GPURef
}

// Watch starts, at most every ReadEvery and one at a time, a read of the
// running jobs' GPUs' utilization, and keeps which jobs hold only idle
// GPUs for Recommend. It runs beside the plan loop, so a slow telemetry
// store never delays a plan. With recommendations off (IdleJobAfter
// negative) it still finds the GPUs of the jobs the backend does not name
// by their processes, for the idle forecast, and reads nothing else.
func (p *IdleJobs) Watch(ctx context.Context, lv *live.State) {
	if p.store == nil {
		return
	}
	lookupOnly := p.after < 0
	if !p.read.Due(lv.Now, ReadEvery) {
		return
	}
	jobs, uuids, unnamed := p.heldJobs(lv, lookupOnly)
	if lookupOnly && len(unnamed) == 0 {
		p.read.Skip() // nothing to look up
		return
	}
	_, threshold := Served(p.served)
	p.read.Go(func() { p.readJobs(ctx, lv.Now, threshold, jobs, uuids, unnamed) }) // the plan loop's context
}

// Wait waits for the read under way.
func (p *IdleJobs) Wait() { p.read.Wait() }

// heldJobs is the running jobs whose GPUs Watch reads, with their GPUs'
// UUIDs; a job whose GPUs the backend does not name takes those its
// processes were found on, or is among unnamed (since when to look for
// them) when they are to be looked for. lookupOnly keeps only those.
func (p *IdleJobs) heldJobs(lv *live.State, lookupOnly bool) (jobs []held, uuids []string, unnamed map[cluster.JobID]time.Time) {
	uuidOf := map[cluster.GPURef]string{}
	for i := range lv.Nodes {
		for _, g := range lv.Nodes[i].GPUs {
			uuidOf[cluster.GPURef{Node: lv.Nodes[i].Name, Index: g.Index}] = g.UUID
		}
	}
	unnamed = map[cluster.JobID]time.Time{}
	p.mu.Lock()
	defer p.mu.Unlock()
	known := p.procGPUs
	p.procGPUs = map[cluster.JobID]attemptGPUs{}
jobs:
	for i := range lv.Active {
		id := lv.Active[i].ID
		pl, ok := lv.Placements[id]
		if !ok || len(pl.Allocations) == 0 {
			continue
		}
		h := held{id: id}
		for _, a := range pl.Allocations {
			h.names = append(h.names, a.GPU.String())
			h.uuids = append(h.uuids, uuidOf[a.GPU])
			h.refs = append(h.refs, a.GPU)
		}
		switch n := slices.Index(h.uuids, ""); {
		case n < 0:
			if lookupOnly {
				continue jobs
			}
		case slices.IndexFunc(h.uuids, func(u string) bool { return u != "" }) >= 0:
			continue jobs // some GPUs named, some not: one without telemetry may be busy
		default:
			// No GPU named (Kubernetes): those its processes ran on.
			h.uuids, h.attempt, h.started = nil, pl.Attempt, lv.Active[i].StartTime
			k, ok := known[id]
			switch {
			case ok && k.attempt == pl.Attempt && k.uuids != nil:
				h.uuids = k.uuids
				p.procGPUs[id] = k
				if lookupOnly {
					continue jobs // found: nothing more to read
				}
			case ok && k.attempt == pl.Attempt && lv.Now.Sub(k.tried) < procLookback:
				p.procGPUs[id] = k // not found lately: looked for again later
			case !h.started.IsZero():
				// Only this attempt's samples: an earlier one ran elsewhere.
				unnamed[id] = later(h.started, lv.Now.Add(-procLookback))
			}
		}
		jobs = append(jobs, h)
		uuids = append(uuids, h.uuids...)
	}
	return jobs, uuids, unnamed
}

// readJobs looks for the unnamed jobs' GPUs by their processes, reads the
// utilization of every job's GPUs and keeps which jobs hold only idle
// ones.
func (p *IdleJobs) readJobs(ctx context.Context, now time.Time, threshold float64, jobs []held, uuids []string, unnamed map[cluster.JobID]time.Time) {
	found, looked := p.gpusOfProcesses(ctx, now, unnamed)
	for _, us := range found {
		uuids = append(uuids, us...) // read with the others
	}
	grids, read := p.util.Read(ctx, now, threshold, uuids)
	if looked {
		for k := range jobs {
			h := &jobs[k]
			if _, ok := unnamed[h.id]; !ok {
				continue
			}
			us := found[string(h.id)]
			byRef := p.pairByNode(h.refs, us)
			p.mu.Lock()
			if byRef != nil {
				h.uuids = us
				p.procGPUs[h.id] = attemptGPUs{attempt: h.attempt, uuids: us, byRef: byRef}
			} else {
				p.procGPUs[h.id] = attemptGPUs{attempt: h.attempt, tried: now}
			}
			p.mu.Unlock()
		}
	}
	p.mu.Lock()
	before := p.jobs
	p.mu.Unlock()
	if !read {
		return // the store did not answer: what was seen last stands
	}
	out := map[cluster.JobID]idleJob{}
next:
	for _, h := range jobs {
		if len(h.uuids) == 0 {
			continue // its GPUs are not known: any may be busy
		}
		run := time.Duration(math.MaxInt64)
		for _, u := range h.uuids {
			g, ok := grids[u]
			if !ok {
				// No recent sample of this GPU (its collector is away):
				// the job stays as it was last seen.
				if prev, ok := before[h.id]; ok {
					out[h.id] = prev
				}
				continue next
			}
			run = min(run, g.IdleRun())
		}
		if run > 0 {
			out[h.id] = idleJob{gpus: h.names, idleFor: run}
		}
	}
	p.mu.Lock()
	p.jobs, p.threshold = out, threshold
	p.mu.Unlock()
}

// UUIDsByProcess is the UUIDs of the GPUs of the jobs whose GPUs were
// found by their processes (Watch), each of a job's GPUs paired with one
// on its node.
func (p *IdleJobs) UUIDsByProcess() map[cluster.GPURef]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[cluster.GPURef]string{}
	for _, a := range p.procGPUs {
		maps.Copy(out, a.byRef)
	}
	return out
}

// pairByNode pairs a job's GPUs with the UUIDs its processes ran on, node
// by node (a UUID's node is what its utilization samples name), in order:
// which of a node's is which is not known, and alike to the forecast.
// Nil when the two do not match node for node.
func (p *IdleJobs) pairByNode(refs []cluster.GPURef, uuids []string) map[cluster.GPURef]string {
	if len(refs) == 0 || len(refs) != len(uuids) {
		return nil
	}
	onNode := map[string][]string{}
	for _, u := range uuids {
		node := p.util.NodeOf(u)
		if node == "" {
			return nil
		}
		onNode[node] = append(onNode[node], u)
	}
	refsOn := map[string][]cluster.GPURef{}
	for _, r := range refs {
		refsOn[r.Node] = append(refsOn[r.Node], r)
	}
	out := make(map[cluster.GPURef]string, len(refs))
	for node, rs := range refsOn {
		us := onNode[node]
		if len(us) != len(rs) {
			return nil
		}
		slices.SortFunc(rs, func(a, b cluster.GPURef) int { return a.Index - b.Index })
		slices.Sort(us)
		for k, r := range rs {
			out[r] = us[k]
		}
	}
	return out
}

// attemptGPUs are the GPUs an attempt of a job ran its processes on, and
// which of its GPUs each stands for; without them, when they were last
// looked for and not found (as many as the job holds, on its nodes).
type attemptGPUs struct {
	attempt int
	uuids   []string
	byRef   map[cluster.GPURef]string
	tried   time.Time
}

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// procLookback is how far back the samples of a job's processes are read
// to find its GPUs, and how long a job whose GPUs were not found waits
// before they are looked for again.
const procLookback = 10 * time.Minute

// gpusOfProcesses is, for the jobs named, the GPUs their processes were
// sampled on since each one's time (the attempt's start, at most
// procLookback ago), and whether it was read: the telemetry store answers
// that (collector.JobGPUStore) and answered. Jobs with the same time are
// read together.
func (p *IdleJobs) gpusOfProcesses(ctx context.Context, now time.Time, jobs map[cluster.JobID]time.Time) (map[string][]string, bool) {
	js, ok := p.store.(collector.JobGPUStore)
	if !ok || len(jobs) == 0 {
		return nil, false
	}
	since := map[time.Time][]string{}
	for id, t := range jobs {
		since[t] = append(since[t], string(id))
	}
	out := map[string][]string{}
	for t, ids := range since {
		qctx, cancel := context.WithTimeout(ctx, ReadTimeout)
		found, err := js.JobGPUs(qctx, collector.JobGPUsQuery{Jobs: ids, Start: t, End: now.Add(time.Nanosecond)})
		cancel()
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				p.log.Warn("idle jobs: the GPUs of jobs' processes not read", "jobs", len(jobs), "error", err)
			}
			return nil, false
		}
		maps.Copy(out, found)
	}
	return out, true
}

// Recommend records, in either mode, an "idle" recommendation for each
// running job whose every GPU has been below the idle threshold for at
// least IdleJobAfter (as Watch last read), once while it stays idle,
// and dismisses those whose job is busy again or gone.
func (p *IdleJobs) Recommend(ctx context.Context, lv *live.State) {
	if p.after < 0 || p.store == nil {
		// Off: the open ones (from before a restart) are dismissed.
		p.advice.Dismiss(ctx, map[string]bool{}, advice.Idle)
		return
	}
	after := cmp.Or(p.after, DefaultIdleJobAfter)
	p.mu.Lock()
	jobs, threshold := p.jobs, p.threshold
	p.mu.Unlock()
	if jobs == nil {
		return // not read yet
	}
	current := map[string]bool{}
	for i := range lv.Active {
		j := &lv.Active[i]
		ij, ok := jobs[j.ID]
		if !ok || ij.idleFor < after {
			continue
		}
		reason := fmt.Sprintf("holds %d GPU(s) that have all been below %g%% utilization for %s: check that it still works, or stop it to free them",
			len(ij.gpus), threshold, ij.idleFor.Round(time.Minute))
		p.advice.Add(ctx, lv.Now, current, advice.Idle, j.ID, reason, advice.Details{GPUs: ij.gpus, IdleForS: ij.idleFor.Seconds(), ThresholdP: threshold})
	}
	p.advice.Dismiss(ctx, current, advice.Idle)
}
