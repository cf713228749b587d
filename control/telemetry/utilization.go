package telemetry

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/prescient-sched/prescient/collector"
	"github.com/prescient-sched/prescient/models/idle"
)

// The utilization the plane keeps.
const (
	// History is how far back each GPU's utilization is kept: the idle
	// model's longest look back (4 h) and some.
	History = 4*time.Hour + 10*time.Minute
	// Step is the grid of the utilization kept, the idle model's.
	Step = time.Minute
	// ReadEvery is how often the utilization is read again; readChunk
	// and ReadTimeout bound one query of it, and the last reread minutes
	// are read again (samples that arrive late complete them).
	ReadEvery   = time.Minute
	readChunk   = 30 * time.Minute
	ReadTimeout = 2 * time.Minute
	reread      = 2 * time.Minute
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

// Served is the model f serves (nil when none, or f is nil) and the
// threshold it counts a GPU idle below (the default without a model).
func Served(f IdleForecaster) (*idle.Model, float64) {
	var model *idle.Model
	if f != nil {
		model, _ = f.Current()
	}
	return model, ThresholdOf(model)
}

// ThresholdOf is the utilization below which m counts a GPU idle, the
// default without a model.
func ThresholdOf(m *idle.Model) float64 {
	if m != nil {
		return m.Config.ThresholdPct
	}
	return idle.DefaultConfig().ThresholdPct
}

// Utilization is the plane's copy of every GPU's recent utilization,
// read from the telemetry store once for every reader (the idle jobs,
// the idle forecast, lending). Safe for concurrent use.
type Utilization struct {
	store collector.TelemetryStore // nil: nothing is read
	log   *slog.Logger

	mu      sync.Mutex
	reading bool // a read runs (outside the lock)
	series  utilization
	until   time.Time // read up to
}

// NewUtilization reads from st (nil: nothing).
func NewUtilization(st collector.TelemetryStore, log *slog.Logger) *Utilization {
	return &Utilization{store: st, log: log, series: utilization{}}
}

// ReadUnderWay reports whether a read runs.
func (p *Utilization) ReadUnderWay() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.reading
}

// Grids is the idleness grids of the GPUs named that have recent samples,
// from the copy as it is.
func (p *Utilization) Grids(uuids []string, now time.Time, threshold float64) map[string]idle.Grid {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.series.grids(uuids, now, threshold)
}

// ByNode is the GPUs (UUIDs, sorted) whose recent samples name each node
// (utilization.byNode).
func (p *Utilization) ByNode(now time.Time) map[string][]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.series.byNode(now)
}

// NodeOf is the node a GPU's samples name; "" when unknown.
func (p *Utilization) NodeOf(uuid string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s := p.series[uuid]; s != nil {
		return s.node
	}
	return ""
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

// grid is the GPU's idleness on the Step grid of the last History
// up to now (a minute's value stands for up to idle.MaxGap after it);
// false when it has no sample in the last idle.MaxGap.
func (u utilization) grid(uuid string, now time.Time, threshold float64) (idle.Grid, bool) {
	s := u[uuid]
	end := minuteOf(now)
	gap := int64(idle.MaxGap / time.Minute)
	if uuid == "" || s == nil || len(s.values) == 0 || end-s.last > gap {
		return idle.Grid{}, false
	}
	n := int64(History / Step)
	start := end - n + 1
	g := idle.Grid{ID: uuid, Start: time.Unix(start*60, 0).UTC(), Step: Step, Idle: make([]float64, n)}
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

// Read brings the plane's copy of every GPU's utilization up to
// now, at most every ReadEvery, reading only what is new (a chunk per
// query, each bounded by ReadTimeout), and returns the idleness grids of
// the GPUs named (by UUID) that have recent samples, and whether the read
// (when one was due) succeeded. One read runs at a time, outside the lock:
// a caller that finds one under way does not wait for it but answers from
// the copy as it is (and reports no read). A telemetry store that does not
// answer leaves the copy as it was: the forecast then rests on the jobs
// and the queue.
func (p *Utilization) Read(ctx context.Context, now time.Time, threshold float64, uuids []string) (map[string]idle.Grid, bool) {
	if p.store == nil {
		return nil, false
	}
	end := now.Truncate(Step)
	oldest := end.Add(-History)
	p.mu.Lock()
	if p.until.Before(oldest) {
		p.until = oldest
	}
	from, read := p.until, true
	due := end.Sub(from) >= ReadEvery
	if due && p.reading {
		due, read = false, false
	}
	p.reading = p.reading || due
	p.mu.Unlock()
	if due {
		// The last minutes again: samples that arrived late complete them.
		lo := from.Add(-reread)
		if lo.Before(oldest) {
			lo = oldest
		}
		got, until, ok := p.query(ctx, lo, end)
		read = ok
		p.mu.Lock()
		for _, s := range got {
			us := p.series[s.GPU]
			if us == nil {
				us = &utilSeries{}
				p.series[s.GPU] = us
			}
			if s.Node != "" {
				us.node = s.Node
			}
			for _, pt := range s.Points {
				us.set(minuteOf(pt.Time), pt.Value)
			}
		}
		if until.After(p.until) {
			p.until = until
		}
	} else {
		p.mu.Lock()
	}
	defer p.mu.Unlock()
	// Drop what is older than the history kept, and GPUs gone quiet.
	for id, us := range p.series {
		if !us.trim(minuteOf(oldest)) {
			delete(p.series, id)
		}
	}
	return p.series.grids(uuids, now, threshold), read
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

// query is the one reader's read of every GPU's per-minute
// utilization from lo to end, a chunk at a time; it returns what it read,
// how far it got and whether it got to end, and clears the reading flag
// however the read ends (a store that panics included).
func (p *Utilization) query(ctx context.Context, lo, end time.Time) ([]collector.Series, time.Time, bool) {
	defer func() {
		p.mu.Lock()
		p.reading = false
		p.mu.Unlock()
	}()
	var got []collector.Series
	for lo.Before(end) {
		hi := lo.Add(readChunk)
		if hi.After(end) {
			hi = end
		}
		qctx, cancel := context.WithTimeout(ctx, ReadTimeout)
		series, err := p.store.Query(qctx, collector.SeriesQuery{Field: "util_gpu_pct", Start: lo, End: hi, Step: Step, Agg: "mean"})
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
