package telemetry

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/collector"
	"github.com/prescient-sched/prescient/control/live"
	"github.com/prescient-sched/prescient/datasets"
	"github.com/prescient-sched/prescient/models"
	"github.com/prescient-sched/prescient/predictor"
)

// PeakRefiner forecasts a running job's peak GPU memory over the next
// hours from its memory series so far: the predictor's published peak
// model (predictor.Predictor.RefinePeak) in production.
type PeakRefiner interface {
	RefinePeak(ctx context.Context, s datasets.Series) (predictor.PeakForecast, error)
}

const (
	// DefaultRefineEvery is how often running jobs' memory is re-forecast
	// unless told.
	DefaultRefineEvery = 5 * time.Minute
	// MinRefineRun is how long a job must have run before its memory is
	// re-forecast: the peak model watches the first 10 minutes.
	MinRefineRun = 10 * time.Minute
	// refineStep is the spacing of the memory series read: about the
	// cadence of the series the peak model learns from (GenAI's ~1 min).
	refineStep = time.Minute
	// refineChunk is the most time one telemetry query of a refinement
	// spans, and refineTimeout bounds it (refinements run beside the plan
	// loop). 30 minutes of 1,000 jobs took about 15 s from InfluxDB 1.8 on
	// a loaded 2-core machine.
	refineChunk   = 30 * time.Minute
	refineTimeout = 2 * time.Minute
)

// Refiner re-forecasts running jobs' peak GPU memory from their memory
// series (Config.PeakRefiner), so that the planner places shares beside
// them by the refined P90. Refine is the plan loop's hook; Memory
// answers from any goroutine.
type Refiner struct {
	refiner PeakRefiner
	mem     collector.JobMemoryStore
	every   time.Duration
	log     *slog.Logger
	task    live.Task // the refinement beside the loop

	mu      sync.Mutex
	refined map[cluster.JobID]int64 // the running jobs' refined P90 memory
	// refineMu is held by refine; memSeries are its reads so far.
	refineMu  sync.Mutex
	memSeries map[cluster.JobID]*jobSeries
}

// NewRefiner refines with r (nil: never) from the memory series st
// answers, when it answers them (collector.JobMemoryStore), every every
// (zero: DefaultRefineEvery).
func NewRefiner(r PeakRefiner, st collector.TelemetryStore, every time.Duration, log *slog.Logger) *Refiner {
	mem, _ := st.(collector.JobMemoryStore)
	return &Refiner{refiner: r, mem: mem, every: cmp.Or(every, DefaultRefineEvery), log: log}
}

// Wait waits for the refinement under way.
func (p *Refiner) Wait() { p.task.Wait() }

// Refine starts, at most every RefineEvery and one at a time, a
// re-forecast of the peak GPU memory of the running jobs that have run at
// least MinRefineRun (refine). It runs beside the plan loop, so a slow
// telemetry store never delays a plan: plans use the latest refinement
// that finished (Memory).
func (p *Refiner) Refine(ctx context.Context, lv *live.State) {
	if p.refiner == nil || p.mem == nil {
		return
	}
	if !p.task.Due(lv.Now, p.every) {
		return
	}
	var jobs []refineJob
	for i := range lv.Active {
		j := &lv.Active[i]
		if !j.StartTime.IsZero() && lv.Now.Sub(j.StartTime) >= MinRefineRun {
			jobs = append(jobs, refineJob{id: j.ID, start: j.StartTime, before: lv.Forecasts[j.ID].MemoryP90Bytes})
		}
	}
	// Not the caller's context: what-if's request may end first.
	p.task.Go(func() { p.refine(context.WithoutCancel(ctx), lv.Now, jobs) })
}

// refineJob is a running job as refine needs it: its attempt's start and
// its P90 memory before the refinement.
type refineJob struct {
	id     cluster.JobID
	start  time.Time
	before int64
}

// refine re-forecasts the jobs' peak GPU memory from their memory series
// in the telemetry store (read incrementally: only what is new since the
// last refinement) and keeps the P90 for the planner. The P90 is never
// below what the job holds now. A job the model cannot refine keeps its
// forecast from submission.
func (p *Refiner) refine(ctx context.Context, now time.Time, jobs []refineJob) {
	p.refineMu.Lock()
	defer p.refineMu.Unlock()
	// 1. What is new of their memory series since the last refinement.
	seriesOf, ok := p.readSeries(ctx, now, jobs)
	if !ok {
		return
	}
	// 2. Each job's peak over the model's horizon.
	refined := map[cluster.JobID]int64{}
	raised, lowered := 0, 0
	for _, j := range jobs {
		js := seriesOf[string(j.id)]
		if len(js.s.Values) == 0 {
			continue
		}
		fc, err := p.refiner.RefinePeak(ctx, js.s)
		switch {
		case errors.Is(err, predictor.ErrNoPeakModel):
			p.log.Debug("no peak model published: running jobs' memory is not refined")
			p.mu.Lock()
			p.refined = nil
			p.mu.Unlock()
			return
		case errors.Is(err, models.ErrTooLittleSeen):
			continue
		case err != nil:
			p.log.Warn("memory refinement failed", "job", j.id, "error", err)
			continue
		}
		p90 := int64(max(fc.P90Bytes, js.s.Values[len(js.s.Values)-1]))
		refined[j.id] = p90
		if p90 > j.before {
			raised++
		} else if p90 < j.before {
			lowered++
		}
	}
	p.mu.Lock()
	p.refined = refined
	p.mu.Unlock()
	if len(refined) > 0 {
		p.log.Info("running jobs' memory refined", "jobs", len(refined), "eligible", len(jobs), "raised", raised, "lowered", lowered)
	}
}

// readSeries reads what is new of the jobs' memory series since the last
// refinement, and keeps it; false when the store did not answer.
func (p *Refiner) readSeries(ctx context.Context, now time.Time, jobs []refineJob) (map[string]*jobSeries, bool) {
	// What is new of their memory series since the last refinement, in
	// one query of whole windows (p.memSeries keeps what was read; a job
	// restarted since is read again from its new start).
	end := now.Truncate(refineStep)
	var from time.Time
	ids := make([]string, len(jobs))
	seriesOf := map[string]*jobSeries{}
	next := map[cluster.JobID]*jobSeries{} // only the jobs still eligible stay
	for i, j := range jobs {
		ids[i] = string(j.id)
		js := p.memSeries[j.id]
		if js == nil || !js.start.Equal(j.start) {
			js = &jobSeries{start: j.start, until: j.start.Truncate(refineStep), s: datasets.Series{ID: ids[i]}}
		}
		seriesOf[ids[i]], next[j.id] = js, js
		if from.IsZero() || js.until.Before(from) {
			from = js.until
		}
	}
	p.memSeries = next
	// A long history (the first refinement after a restart) is read a
	// chunk at a time, each query bounded; what was read stays read.
	for lo := from; len(ids) > 0 && lo.Before(end); {
		hi := lo.Add(refineChunk)
		if hi.After(end) {
			hi = end
		}
		qctx, cancel := context.WithTimeout(ctx, refineTimeout)
		series, err := p.mem.JobMemory(qctx, collector.JobMemoryQuery{Jobs: ids, Start: lo, End: hi, Step: refineStep})
		cancel()
		if err != nil {
			p.log.Warn("running jobs' memory not refined: telemetry unreadable; the previous refinement stands", "jobs", len(ids), "error", err)
			return nil, false
		}
		for _, s := range series {
			if js := seriesOf[s.Job]; js != nil {
				for _, pt := range s.Points {
					if !pt.Time.Before(js.until) {
						js.s.Times, js.s.Values = append(js.s.Times, pt.Time), append(js.s.Values, pt.Value)
					}
				}
			}
		}
		for _, js := range seriesOf {
			if js.until.Before(hi) {
				js.until = hi
			}
		}
		lo = hi
	}
	return seriesOf, true
}

// Memory is the refined P90 peak memory of a running job, if any.
func (p *Refiner) Memory(id cluster.JobID) (int64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m, ok := p.refined[id]
	return m, ok
}

// jobSeries is what has been read of a running job's memory series: from
// its attempt's start up to until (exclusive, a window boundary).
type jobSeries struct {
	start time.Time
	until time.Time
	s     datasets.Series
}
