package control

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/collector"
	"github.com/prescient-sched/prescient/control/advice"
	"github.com/prescient-sched/prescient/control/live"
	"github.com/prescient-sched/prescient/models/idle"
	"github.com/prescient-sched/prescient/service"
)

const (

	// DefaultIdleJobAfter is how long every GPU of a running job must have
	// been below the idle threshold before the plane recommends looking at
	// it (an "idle" recommendation).
	DefaultIdleJobAfter = 15 * time.Minute
	// idleHistory is how far back the plane keeps each GPU's utilization:
	// the idle model's longest look back (4 h) and some.
	idleHistory = 4*time.Hour + 10*time.Minute
	// idleStep is the grid of the utilization the plane keeps, the idle
	// model's.
	idleStep = time.Minute
	// idleReadEvery is how often the utilization is read again; idleChunk
	// and idleTimeout bound one query of it.
	idleReadEvery = time.Minute
	idleChunk     = 30 * time.Minute
	idleTimeout   = 2 * time.Minute
	idleReread    = 2 * time.Minute
)

// IdleForecaster serves the published idle model: predictor.Idle in
// production. A forecast takes one snapshot of it, so that its threshold,
// its version and the model used agree.
type IdleForecaster interface {
	// Current is the serving model and its version; nil and 0 when none is
	// published (the forecast then rests on the running jobs and the
	// queue).
	Current() (*idle.Model, int)
}

// servedIdle is the served idle model (nil when none) and the threshold
// it counts a GPU idle below.
func (p *Plane) servedIdle() (*idle.Model, float64) {
	var model *idle.Model
	if p.cfg.Idle != nil {
		model, _ = p.cfg.Idle.Current()
	}
	return model, thresholdOf(model)
}

// thresholdOf is the utilization below which m counts a GPU idle, the
// default without a model.
func thresholdOf(m *idle.Model) float64 {
	if m != nil {
		return m.Config.ThresholdPct
	}
	return idle.DefaultConfig().ThresholdPct
}

// IdleForecast implements Service: for each GPU of the fleet (or of
// q.Pool or q.Node), its chance of being idle at each step, its idle
// windows, the expected idle count of each pool and node, and the running
// jobs whose GPUs have been idle for at least the window length. It
// combines the running jobs' remaining duration forecasts (given how long
// they have run), the queued demand, and each GPU's recent utilization
// from the telemetry store through the idle model.
func (p *Plane) IdleForecast(ctx context.Context, q service.IdleQuery) (service.IdleForecast, error) {
	now := p.cfg.Clock().UTC()
	in, err := q.Input(now)
	if err != nil {
		return service.IdleForecast{}, err
	}
	var model *idle.Model
	version := 0
	if p.cfg.Idle != nil {
		model, version = p.cfg.Idle.Current()
	}
	threshold := thresholdOf(model)

	nodes := p.cfg.Nodes.Nodes()
	var gpus []cluster.GPU
	var refs []cluster.GPURef
	var pools []string
	fleetGPUs := 0
	for i := range nodes {
		n := &nodes[i]
		pool := n.Labels[cluster.PoolLabel]
		if pool == "" {
			pool = n.Name
		}
		if n.State == cluster.NodeFailed {
			continue
		}
		fleetGPUs += len(n.GPUs) // the queue's demand is shared among all the pools
		if q.Pool != "" && pool != q.Pool || q.Node != "" && n.Name != q.Node {
			continue
		}
		for _, g := range n.GPUs {
			gpus = append(gpus, g)
			refs = append(refs, cluster.GPURef{Node: n.Name, Index: g.Index})
			pools = append(pools, pool)
		}
	}
	if len(gpus) == 0 {
		what := "the fleet has no GPUs"
		switch {
		case q.Node != "":
			what = fmt.Sprintf("node %q has no GPUs up or is not in the fleet", q.Node)
		case q.Pool != "":
			what = fmt.Sprintf("pool %q has no GPUs up (nodes are pooled by their %s label, or each node is a pool)", q.Pool, cluster.PoolLabel)
		}
		return service.IdleForecast{}, fmt.Errorf("%s: %w", what, service.ErrNotFound)
	}

	// What holds each GPU, and for how much longer.
	holders, err := p.gpuHolders(ctx, now)
	if err != nil {
		return service.IdleForecast{}, fmt.Errorf("idle forecast: %w", err)
	}
	// Each GPU's recent utilization: by its UUID, or else (Kubernetes) by
	// the UUIDs its job's processes ran on, its job's GPUs paired with
	// them in order (which of them is which is not known, and a job's GPUs
	// are alike to the forecast).
	byProcess := p.uuidsByProcess()
	uuids := make([]string, 0, len(gpus))
	for i := range gpus {
		g := &gpus[i]
		if g.UUID == "" {
			g.UUID = byProcess[refs[i]]
		}
		if g.UUID != "" {
			uuids = append(uuids, g.UUID)
		}
	}
	util, _ := p.readUtilization(ctx, now, threshold, uuids)
	out := service.IdleForecast{ModelVersion: version, ThresholdPct: threshold}
	in.GPUs = make([]idle.GPUState, len(gpus))
	grids := make(map[string][]idle.Grid)
	for i, g := range gpus {
		st := idle.GPUState{Ref: refs[i], Pool: pools[i]}
		if h, ok := holders[refs[i]]; ok {
			st.Job, st.RemainingP50, st.RemainingP90 = h.job, h.p50, h.p90
		}
		if grid, ok := util[g.UUID]; ok && g.UUID != "" {
			out.TelemetryGPUs++
			st.IdleFor = grid.IdleRun()
			grids[pools[i]] = append(grids[pools[i]], grid)
		}
		in.GPUs[i] = st
	}
	// Queued demand, shared among the pools by their size; each pool's
	// utilization history.
	queued, err := p.listJobs(ctx, cluster.StateQueued)
	if err != nil {
		return service.IdleForecast{}, fmt.Errorf("idle forecast: %w", err)
	}
	for i := range queued {
		out.QueuedGPUs += float64(queued[i].Spec.MilliGPUs()) / cluster.MilliGPU
	}
	size := map[string]int{}
	var order []string
	for _, pool := range pools {
		if size[pool] == 0 {
			order = append(order, pool)
		}
		size[pool]++
	}
	for _, pool := range order {
		ps := idle.PoolState{ID: pool, QueuedGPUs: out.QueuedGPUs * float64(size[pool]) / float64(fleetGPUs)}
		if g := grids[pool]; len(g) > 0 {
			ps.History = idle.PoolFromGrids(pool, g)
		}
		in.Pools = append(in.Pools, ps)
	}
	if err := ctx.Err(); err != nil {
		return service.IdleForecast{}, err
	}
	f, err := idle.Forecaster{Model: model}.Forecast(in)
	if err != nil {
		return service.IdleForecast{}, fmt.Errorf("idle forecast: %w", err)
	}
	out.Forecast = f
	if out.IdleJobs == nil {
		out.IdleJobs = []idle.IdleJob{}
	}
	return out, nil
}

// holder is the job that holds a GPU longest (of the jobs sharing it),
// with its remaining P50 and P90.
type holder struct {
	job      cluster.JobID
	p50, p90 time.Duration
}

// gpuHolders maps each allocated GPU to the job holding it longest by the
// remaining P90 (idle.Remaining: given how long the attempt has run).
func (p *Plane) gpuHolders(ctx context.Context, now time.Time) (map[cluster.GPURef]holder, error) {
	active, err := p.listJobs(ctx, cluster.StateRunning, cluster.StateCheckpointing)
	if err != nil {
		return nil, err
	}
	pls, err := p.cfg.Store.Placements(ctx)
	if err != nil {
		return nil, err
	}
	allocs := make(map[cluster.JobID][]cluster.Allocation, len(pls))
	for _, pl := range pls {
		allocs[pl.Job] = pl.Allocations
	}
	fcs, err := p.forecastsFor(ctx, active)
	if err != nil {
		p.log.Warn("idle forecast: forecasts missing; those jobs count on a default", "error", err)
	}
	out := map[cluster.GPURef]holder{}
	for i := range active {
		j := &active[i]
		f, ok := fcs[j.ID]
		if !ok {
			f.DurationP50, f.DurationP90 = defaultForecast, 2*defaultForecast
		}
		ran := savedProgress(j)
		if !j.StartTime.IsZero() && now.After(j.StartTime) {
			ran += now.Sub(j.StartTime)
		}
		h := holder{job: j.ID}
		h.p50, h.p90 = idle.Remaining(f.DurationP50, f.DurationP90, ran)
		for _, a := range allocs[j.ID] {
			if cur, ok := out[a.GPU]; !ok || h.p90 > cur.p90 {
				out[a.GPU] = h
			}
		}
	}
	return out, nil
}

// utilSeries is one GPU's utilization by minute: values[i] is the minute
// first+i since the Unix epoch, NaN where no sample was read.
type utilSeries struct {
	first  int64
	values []float64
	last   int64  // the latest minute with a value
	node   string // the node its samples name
}

// minuteOf is t's minute since the Unix epoch.
func minuteOf(t time.Time) int64 { return t.Unix() / 60 }

// set records the value of minute m (a later reading of a minute replaces
// an earlier one).
func (s *utilSeries) set(m int64, v float64) {
	if len(s.values) == 0 {
		s.first = m
	}
	if m < s.first {
		return // older than what is kept
	}
	for int64(len(s.values)) <= m-s.first {
		s.values = append(s.values, math.NaN())
	}
	s.values[m-s.first] = v
	s.last = max(s.last, m)
}

// trim drops the minutes before m; false when nothing is left.
func (s *utilSeries) trim(m int64) bool {
	if k := m - s.first; k > 0 {
		if k >= int64(len(s.values)) {
			s.values = s.values[:0]
			return false
		}
		s.values = s.values[k:]
		s.first = m
	}
	return len(s.values) > 0
}

// utilization is each GPU's series by UUID.
type utilization map[string]*utilSeries

// grid is the GPU's idleness on the idleStep grid of the last idleHistory
// up to now (a minute's value stands for up to idle.MaxGap after it);
// false when it has no sample in the last idle.MaxGap.
func (u utilization) grid(uuid string, now time.Time, threshold float64) (idle.Grid, bool) {
	s := u[uuid]
	end := minuteOf(now)
	gap := int64(idle.MaxGap / time.Minute)
	if uuid == "" || s == nil || len(s.values) == 0 || end-s.last > gap {
		return idle.Grid{}, false
	}
	n := int64(idleHistory / idleStep)
	start := end - n + 1
	g := idle.Grid{ID: uuid, Start: time.Unix(start*60, 0).UTC(), Step: idleStep, Idle: make([]float64, n)}
	lastAt, lastV := int64(math.MinInt64/2), math.NaN()
	for m := start - gap; m < start; m++ { // what stands at the grid's start
		if k := m - s.first; k >= 0 && k < int64(len(s.values)) && !math.IsNaN(s.values[k]) {
			lastAt, lastV = m, s.values[k]
		}
	}
	for i := range n {
		m := start + i
		if k := m - s.first; k >= 0 && k < int64(len(s.values)) && !math.IsNaN(s.values[k]) {
			lastAt, lastV = m, s.values[k]
		}
		switch {
		case m-lastAt > gap:
			g.Idle[i] = math.NaN()
		case lastV < threshold:
			g.Idle[i] = 1
		}
	}
	return g, true
}

// readUtilization brings the plane's copy of every GPU's utilization up to
// now, at most every idleReadEvery, reading only what is new (a chunk per
// query, each bounded by idleTimeout), and returns the idleness grids of
// the GPUs named (by UUID) that have recent samples, and whether the read
// (when one was due) succeeded. One read runs at a time, outside the lock:
// a caller that finds one under way does not wait for it but answers from
// the copy as it is (and reports no read). A telemetry store that does not
// answer leaves the copy as it was: the forecast then rests on the jobs
// and the queue.
func (p *Plane) readUtilization(ctx context.Context, now time.Time, threshold float64, uuids []string) (map[string]idle.Grid, bool) {
	if p.cfg.Telemetry == nil {
		return nil, false
	}
	end := now.Truncate(idleStep)
	oldest := end.Add(-idleHistory)
	p.utilMu.Lock()
	if p.util == nil {
		p.util = utilization{}
	}
	if p.utilUntil.Before(oldest) {
		p.utilUntil = oldest
	}
	from, read := p.utilUntil, true
	due := end.Sub(from) >= idleReadEvery
	if due && p.utilReading {
		due, read = false, false
	}
	p.utilReading = p.utilReading || due
	p.utilMu.Unlock()
	if due {
		// The last minutes again: samples that arrived late complete them.
		lo := from.Add(-idleReread)
		if lo.Before(oldest) {
			lo = oldest
		}
		got, until, ok := p.queryUtilization(ctx, lo, end)
		read = ok
		p.utilMu.Lock()
		for _, s := range got {
			us := p.util[s.GPU]
			if us == nil {
				us = &utilSeries{}
				p.util[s.GPU] = us
			}
			if s.Node != "" {
				us.node = s.Node
			}
			for _, pt := range s.Points {
				us.set(minuteOf(pt.Time), pt.Value)
			}
		}
		if until.After(p.utilUntil) {
			p.utilUntil = until
		}
	} else {
		p.utilMu.Lock()
	}
	defer p.utilMu.Unlock()
	// Drop what is older than the history kept, and GPUs gone quiet.
	for id, us := range p.util {
		if !us.trim(minuteOf(oldest)) {
			delete(p.util, id)
		}
	}
	return p.util.grids(uuids, now, threshold), read
}

// grids is the idleness grids of the GPUs named that have recent samples.
func (u utilization) grids(uuids []string, now time.Time, threshold float64) map[string]idle.Grid {
	out := make(map[string]idle.Grid, len(uuids))
	for _, id := range uuids {
		if g, ok := u.grid(id, now, threshold); ok {
			out[id] = g
		}
	}
	return out
}

// byNode is the GPUs (UUIDs, sorted) whose samples name each node, of
// those sampled in the last idle.MaxGap before now (a GPU replaced, or
// gone to another node, is left out).
func (u utilization) byNode(now time.Time) map[string][]string {
	out := map[string][]string{}
	recent := minuteOf(now) - int64(idle.MaxGap/time.Minute)
	for id, s := range u {
		if s.node != "" && s.last >= recent {
			out[s.node] = append(out[s.node], id)
		}
	}
	for _, ids := range out {
		slices.Sort(ids)
	}
	return out
}

// queryUtilization is the one reader's read of every GPU's per-minute
// utilization from lo to end, a chunk at a time; it returns what it read,
// how far it got and whether it got to end, and clears the reading flag
// however the read ends (a store that panics included).
func (p *Plane) queryUtilization(ctx context.Context, lo, end time.Time) ([]collector.Series, time.Time, bool) {
	defer func() {
		p.utilMu.Lock()
		p.utilReading = false
		p.utilMu.Unlock()
	}()
	var got []collector.Series
	for lo.Before(end) {
		hi := lo.Add(idleChunk)
		if hi.After(end) {
			hi = end
		}
		qctx, cancel := context.WithTimeout(ctx, idleTimeout)
		series, err := p.cfg.Telemetry.Query(qctx, collector.SeriesQuery{Field: "util_gpu_pct", Start: lo, End: hi, Step: idleStep, Agg: "mean"})
		cancel()
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				p.log.Warn("idle forecast: utilization not read; the forecast rests on the running jobs and the queue", "error", err)
			}
			return got, lo, false
		}
		got = append(got, series...)
		lo = hi
	}
	return got, end, true
}

// advice.Idle is the kind of the recommendations about jobs that hold idle

// idleJob is a running job all of whose GPUs have been idle for idleFor.
type idleJob struct {
	gpus    []string
	idleFor time.Duration
}

// watchIdle starts, at most every idleReadEvery and one at a time, a read
// of the running jobs' GPUs' utilization (readUtilization), and keeps
// which jobs hold only idle GPUs for recommendIdle. It runs beside the
// plan loop, so a slow telemetry store never delays a plan. With idle
// recommendations off (IdleJobAfter negative) it still finds the GPUs of
// the jobs the backend does not name by their processes, for the idle
// forecast, and reads nothing else.
func (p *Plane) watchIdle(ctx context.Context, lv *live.State) {
	if p.cfg.Telemetry == nil {
		return
	}
	lookupOnly := p.cfg.IdleJobAfter < 0
	p.mu.Lock()
	due := !p.idleReading && (p.idleReadAt.IsZero() || lv.Now.Sub(p.idleReadAt) >= idleReadEvery)
	if due {
		p.idleReading, p.idleReadAt = true, lv.Now
	}
	p.mu.Unlock()
	if !due {
		return
	}
	uuidOf := map[cluster.GPURef]string{}
	for i := range lv.Nodes {
		for _, g := range lv.Nodes[i].GPUs {
			uuidOf[cluster.GPURef{Node: lv.Nodes[i].Name, Index: g.Index}] = g.UUID
		}
	}
	type held struct {
		id           cluster.JobID
		uuids, names []string
		// Of a job whose GPUs the backend does not name: its attempt, when
		// it started, and its GPUs.
		attempt int
		started time.Time
		refs    []cluster.GPURef
	}
	var jobs []held
	var uuids []string
	unnamed := map[cluster.JobID]time.Time{} // jobs whose GPUs are read from their processes, since when
	p.mu.Lock()
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
	if lookupOnly && len(unnamed) == 0 {
		p.idleReading = false // nothing to look up
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	_, threshold := p.servedIdle()
	p.beside(&p.idleReading, func() { // the plan loop's context
		found, looked := p.gpusOfProcesses(ctx, lv.Now, unnamed)
		for _, us := range found {
			uuids = append(uuids, us...) // read with the others
		}
		grids, read := p.readUtilization(ctx, lv.Now, threshold, uuids)
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
					p.procGPUs[h.id] = attemptGPUs{attempt: h.attempt, tried: lv.Now}
				}
				p.mu.Unlock()
			}
		}
		p.mu.Lock()
		before := p.idleJobs
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
		p.idleJobs, p.idleThreshold = out, threshold
		p.mu.Unlock()
	})
}

// uuidsByProcess is the UUIDs of the GPUs of the jobs whose GPUs were
// found by their processes (watchIdle), each of a job's GPUs paired with
// one on its node.
func (p *Plane) uuidsByProcess() map[cluster.GPURef]string {
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
func (p *Plane) pairByNode(refs []cluster.GPURef, uuids []string) map[cluster.GPURef]string {
	if len(refs) == 0 || len(refs) != len(uuids) {
		return nil
	}
	p.utilMu.Lock()
	onNode := map[string][]string{}
	for _, u := range uuids {
		s := p.util[u]
		if s == nil || s.node == "" {
			p.utilMu.Unlock()
			return nil
		}
		onNode[s.node] = append(onNode[s.node], u)
	}
	p.utilMu.Unlock()
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
func (p *Plane) gpusOfProcesses(ctx context.Context, now time.Time, jobs map[cluster.JobID]time.Time) (map[string][]string, bool) {
	js, ok := p.cfg.Telemetry.(collector.JobGPUStore)
	if !ok || len(jobs) == 0 {
		return nil, false
	}
	since := map[time.Time][]string{}
	for id, t := range jobs {
		since[t] = append(since[t], string(id))
	}
	out := map[string][]string{}
	for t, ids := range since {
		qctx, cancel := context.WithTimeout(ctx, idleTimeout)
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

// recommendIdle records, in either mode, an "idle" recommendation for each
// running job whose every GPU has been below the idle threshold for at
// least IdleJobAfter (as watchIdle last read), once while it stays idle,
// and dismisses those whose job is busy again or gone.
func (p *Plane) recommendIdle(ctx context.Context, lv *live.State) {
	if p.cfg.IdleJobAfter < 0 || p.cfg.Telemetry == nil {
		// Off: the open ones (from before a restart) are dismissed.
		p.advice.Dismiss(ctx, map[string]bool{}, advice.Idle)
		return
	}
	after := p.cfg.IdleJobAfter
	if after == 0 {
		after = DefaultIdleJobAfter
	}
	p.mu.Lock()
	jobs, threshold := p.idleJobs, p.idleThreshold
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
