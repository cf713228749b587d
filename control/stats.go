package control

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/collector"
	"github.com/prescient-sched/prescient/service"
	"github.com/prescient-sched/prescient/store"
)

// Limits of a stats query.
const (
	DefaultStatsWindow = 24 * time.Hour
	MaxStatsWindow     = 90 * 24 * time.Hour
	MaxStatsPoints     = 10000
	// WorkloadLabel names the label that groups jobs into workloads for
	// cost; without it a job's workload is its tenant.
	WorkloadLabel = "workload"
)

// interval is a span of one job in one state.
type interval struct {
	from, until time.Time
	state       cluster.JobState
}

// Stats implements Service. It reads the jobs live in the window and the
// events recorded in it from the store: each job's states over the window
// give the busy GPUs and the queue length of every step, the waits of the
// attempts that started, the completions and failures, and the GPU-hours
// of each workload; telemetry gives utilization and power.
func (p *Plane) Stats(ctx context.Context, q service.StatsQuery) (service.Stats, error) {
	window, step, err := statsSteps(q)
	if err != nil {
		return service.Stats{}, err
	}
	until := p.cfg.Clock().UTC()
	from := until.Add(-window)
	jobs, err := p.cfg.Store.JobsLiveIn(ctx, from, until)
	if err != nil {
		return service.Stats{}, fmt.Errorf("stats: %w", err)
	}
	events, err := p.cfg.Store.EventsIn(ctx, from, until)
	if err != nil {
		return service.Stats{}, fmt.Errorf("stats: %w", err)
	}
	byJob := map[cluster.JobID][]store.Event{}
	for _, e := range events {
		byJob[e.JobID] = append(byJob[e.JobID], e)
	}
	st := service.Stats{From: from, Until: until, WaitByTier: []service.WaitStat{}, WaitByTenant: []service.WaitStat{}, Failures: []service.FailureReason{},
		Cost: []service.CostStat{}, Forecasts: []service.ForecastCheck{}, Quotas: []service.QuotaUsage{}}
	p.mu.Lock()
	st.Quotas = append(st.Quotas, p.quotaUse...)
	p.mu.Unlock()
	n := int(window / step)
	if window%step != 0 {
		n++
	}
	st.Series = make([]service.StatsPoint, n)
	for i := range st.Series {
		st.Series[i].Time = from.Add(time.Duration(i) * step)
	}
	acc := statsAccount{gpuHours: map[string]float64{}, tierWaits: map[string][]float64{}, tenantWaits: map[string][]float64{},
		failures: map[string]int{}}
	for i := range jobs {
		acc.add(&st, &jobs[i], byJob[jobs[i].ID], from, until, step)
	}
	st.WaitByTier, st.WaitByTenant = waitStats(acc.tierWaits), waitStats(acc.tenantWaits)
	for reason, count := range acc.failures {
		st.Failures = append(st.Failures, service.FailureReason{Reason: reason, Count: count})
	}
	slices.SortFunc(st.Failures, func(a, b service.FailureReason) int { return cmp.Or(b.Count-a.Count, cmp.Compare(a.Reason, b.Reason)) })
	meanPowerW := p.telemetrySeries(ctx, st.Series, from, until, step)
	st.Cost = p.costs(acc.gpuHours, meanPowerW)
	if st.Forecasts, err = p.forecastChecks(ctx, jobs, acc.finished); err != nil {
		return service.Stats{}, fmt.Errorf("stats: %w", err)
	}
	return st, nil
}

// statsAccount is what Stats sums over the jobs of its window.
type statsAccount struct {
	gpuHours               map[string]float64 // by workload
	tierWaits, tenantWaits map[string][]float64
	failures               map[string]int // by reason
	finished               []cluster.JobID
}

// add accounts job j, with its events evs, to st's series and counts and
// to what a sums.
func (a *statsAccount) add(st *service.Stats, j *cluster.Job, evs []store.Event, from, until time.Time, step time.Duration) {
	weight := float64(j.Spec.GPUs) * float64(max(j.Spec.GPUMilli, 0)) / cluster.MilliGPU
	for _, iv := range timeline(j, evs, from, until) {
		switch {
		case iv.state.Active():
			addOver(st.Series, from, step, iv, func(pt *service.StatsPoint, frac float64) { pt.GPUsBusy += weight * frac })
			a.gpuHours[workloadOf(j)] += weight * iv.until.Sub(iv.from).Hours()
		case iv.state == cluster.StateQueued:
			addOver(st.Series, from, step, iv, func(pt *service.StatsPoint, frac float64) {
				if frac > 0.5 {
					pt.Queued++
				}
			})
		}
	}
	queuedSince := j.SubmitTime
	for _, e := range evs {
		switch e.Type {
		case store.EventStarted:
			w := e.Time.Sub(queuedSince).Seconds()
			a.tierWaits[j.Spec.Tier.String()] = append(a.tierWaits[j.Spec.Tier.String()], w)
			a.tenantWaits[j.Spec.Tenant] = append(a.tenantWaits[j.Spec.Tenant], w)
		case store.EventFinished:
			st.Completed++
			a.finished = append(a.finished, j.ID)
		case store.EventFailed:
			st.Failed++
			a.failures[cmp.Or(e.Message, "unknown")]++
		}
		if e.To == cluster.StateQueued {
			queuedSince = e.Time
		}
	}
}

// statsSteps checks a query and applies the defaults.
func statsSteps(q service.StatsQuery) (window, step time.Duration, err error) {
	window, step = q.Window, q.Step
	if window == 0 {
		window = DefaultStatsWindow
	}
	if step == 0 {
		step = window / 96
	}
	switch {
	case window < 0 || window > MaxStatsWindow:
		return 0, 0, fmt.Errorf("window %s: want up to %s: %w", window, MaxStatsWindow, service.ErrInvalid)
	case step < time.Second:
		return 0, 0, fmt.Errorf("step %s: want at least 1s: %w", step, service.ErrInvalid)
	case step > window:
		return 0, 0, fmt.Errorf("step %s is longer than the window %s: %w", step, window, service.ErrInvalid)
	case window/step > MaxStatsPoints:
		return 0, 0, fmt.Errorf("window %s in steps of %s is over %d points: %w", window, step, MaxStatsPoints, service.ErrInvalid)
	}
	return window, step, nil
}

// timeline is a job's states over [from, until) from its events in the
// window: before its first event it was in that event's from-state (or did
// not exist, for a submission); without events, in its state now.
func timeline(j *cluster.Job, evs []store.Event, from, until time.Time) []interval {
	var out []interval
	at, state := from, j.State
	if len(evs) > 0 {
		state = evs[0].From
	}
	for _, e := range evs {
		if state != "" && e.Time.After(at) {
			out = append(out, interval{from: at, until: e.Time, state: state})
		}
		at, state = e.Time, e.To
	}
	if state != "" && until.After(at) && !state.Terminal() {
		out = append(out, interval{from: at, until: until, state: state})
	}
	return out
}

// addOver calls add for each step the interval overlaps, with the fraction
// of the step it covers.
func addOver(series []service.StatsPoint, from time.Time, step time.Duration, iv interval, add func(*service.StatsPoint, float64)) {
	first := max(int(iv.from.Sub(from)/step), 0)
	for k := first; k < len(series); k++ {
		s := from.Add(time.Duration(k) * step)
		e := s.Add(step)
		if !s.Before(iv.until) {
			return
		}
		lo, hi := maxTime(s, iv.from), minTime(e, iv.until)
		if hi.After(lo) {
			add(&series[k], float64(hi.Sub(lo))/float64(step))
		}
	}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func workloadOf(j *cluster.Job) string {
	if w := j.Spec.Labels[WorkloadLabel]; w != "" {
		return j.Spec.Tenant + "/" + w
	}
	return j.Spec.Tenant
}

func waitStats(m map[string][]float64) []service.WaitStat {
	out := []service.WaitStat{}
	for k, ws := range m {
		slices.Sort(ws)
		sum := 0.0
		for _, w := range ws {
			sum += w
		}
		i := max(int(math.Ceil(0.9*float64(len(ws))))-1, 0)
		out = append(out, service.WaitStat{Key: k, Jobs: len(ws), MeanS: sum / float64(len(ws)), P90S: ws[i]})
	}
	slices.SortFunc(out, func(a, b service.WaitStat) int { return cmp.Compare(a.Key, b.Key) })
	return out
}

// telemetrySeries fills utilization and power into the series from the
// telemetry (windows aligned as the store aligns them) and returns the
// mean power of one GPU over the window (0 without telemetry).
func (p *Plane) telemetrySeries(ctx context.Context, series []service.StatsPoint, from, until time.Time, step time.Duration) float64 {
	if p.cfg.Telemetry == nil {
		return 0
	}
	index := func(t time.Time) int {
		k := int(t.Sub(from) / step)
		return min(max(k, 0), len(series)-1)
	}
	var powerSum float64
	var powerN int
	for _, field := range []string{"util_gpu_pct", "power_w"} {
		ss, err := p.cfg.Telemetry.Query(ctx, collector.SeriesQuery{Field: field, Start: from, End: until, Step: step})
		if err != nil {
			p.log.Warn("stats: telemetry not read", "field", field, "error", err)
			continue
		}
		counts := make([]int, len(series))
		for _, s := range ss {
			for _, pt := range s.Points {
				k := index(pt.Time)
				if field == "util_gpu_pct" {
					series[k].UtilizationPct += pt.Value
					counts[k]++
				} else {
					series[k].PowerW += pt.Value
					powerSum += pt.Value
					powerN++
				}
			}
		}
		if field == "util_gpu_pct" {
			for k := range series {
				if counts[k] > 0 {
					series[k].UtilizationPct /= float64(counts[k])
				}
			}
		}
	}
	if powerN == 0 {
		return 0
	}
	return powerSum / float64(powerN)
}

// costs prices each workload's GPU-hours and their energy, estimated at
// the fleet's mean GPU power from telemetry.
func (p *Plane) costs(gpuHours map[string]float64, meanPowerW float64) []service.CostStat {
	out := []service.CostStat{}
	for w, h := range gpuHours {
		kwh := h * meanPowerW / 1000
		out = append(out, service.CostStat{Workload: w, GPUHours: h, EnergyKWh: kwh,
			Cost: h*p.cfg.Prices.PerGPUHour + kwh*p.cfg.Prices.PerKWh, Currency: p.cfg.Prices.Currency})
	}
	slices.SortFunc(out, func(a, b service.CostStat) int { return cmp.Compare(a.Workload, b.Workload) })
	return out
}

// forecastChecks pairs the finished jobs' stored forecasts with their run
// times.
func (p *Plane) forecastChecks(ctx context.Context, jobs []cluster.Job, finished []cluster.JobID) ([]service.ForecastCheck, error) {
	out := []service.ForecastCheck{}
	if len(finished) == 0 {
		return out, nil
	}
	fs, err := p.cfg.Store.Forecasts(ctx, finished)
	if err != nil {
		return nil, err
	}
	for i := range jobs {
		f, ok := fs[jobs[i].ID]
		if !ok || jobs[i].State != cluster.StateSucceeded {
			continue
		}
		out = append(out, service.ForecastCheck{Job: jobs[i].ID, DurationP50S: apiSeconds(f.DurationP50), DurationP90S: apiSeconds(f.DurationP90),
			ActualS: jobs[i].Outcome.RunTime.Seconds()})
	}
	return out, nil
}
