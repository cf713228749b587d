package controltest

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/service"
)

// Stats computes the dashboard's figures from the fake's jobs and samples:
// GPUs busy and queue length at each step from the jobs' run intervals,
// utilization and power from the latest sample at or before each step, and
// costs from the GPU-hours run in the window at the configured prices.
func (f *Fake) Stats(_ context.Context, q service.StatsQuery) (service.Stats, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.failure("Stats"); err != nil {
		return service.Stats{}, err
	}
	if q.Window < 0 || q.Step < 0 {
		return service.Stats{}, fmt.Errorf("window %s, step %s: negative: %w", q.Window, q.Step, service.ErrInvalid)
	}
	window := cmp.Or(q.Window, 24*time.Hour)
	step := cmp.Or(q.Step, window/96)
	if window/step > 10_000 {
		return service.Stats{}, fmt.Errorf("step: %s gives more than 10000 points over %s: %w", step, window, service.ErrInvalid)
	}
	now := f.clock()
	st := service.Stats{
		From: now.Add(-window), Until: now,
		Series: []service.StatsPoint{}, WaitByTier: []service.WaitStat{}, WaitByTenant: []service.WaitStat{},
		Failures: []service.FailureReason{}, Cost: []service.CostStat{}, Forecasts: []service.ForecastCheck{},
		Quotas: append([]service.QuotaUsage{}, f.quotas...),
	}
	for t := st.From; !t.After(now); t = t.Add(step) {
		st.Series = append(st.Series, f.point(t, now))
	}
	f.waits(&st)
	f.outcomes(&st)
	f.costs(&st, now)
	return st, nil
}

func (f *Fake) point(t, now time.Time) service.StatsPoint {
	p := service.StatsPoint{Time: t}
	for _, e := range f.jobs {
		if !e.job.SubmitTime.After(t) && (e.firstStart.IsZero() || e.firstStart.After(t)) && (e.job.EndTime.IsZero() || e.job.EndTime.After(t)) {
			p.Queued++
		}
		for _, r := range e.runs {
			if !r.from.After(t) && (r.to.IsZero() || r.to.After(t)) {
				p.GPUsBusy += float64(e.job.Spec.MilliGPUs()) / cluster.MilliGPU
			}
		}
	}
	// The last sample at or before t.
	if i := sort.Search(len(f.samples), func(i int) bool { return f.samples[i].t.After(t) }); i > 0 {
		p.UtilizationPct, p.PowerW = f.samples[i-1].utilPct, f.samples[i-1].power
	}
	return p
}

// waits is the queue wait of jobs that first started in the window.
func (f *Fake) waits(st *service.Stats) {
	byTier, byTenant := map[string][]float64{}, map[string][]float64{}
	for _, e := range f.jobs {
		if e.firstStart.IsZero() || e.firstStart.Before(st.From) {
			continue
		}
		w := e.firstStart.Sub(e.job.SubmitTime).Seconds()
		byTier[e.job.Spec.Tier.String()] = append(byTier[e.job.Spec.Tier.String()], w)
		byTenant[e.job.Spec.Tenant] = append(byTenant[e.job.Spec.Tenant], w)
	}
	st.WaitByTier, st.WaitByTenant = waitStats(byTier), waitStats(byTenant)
}

func waitStats(groups map[string][]float64) []service.WaitStat {
	out := []service.WaitStat{}
	for k, ws := range groups {
		slices.Sort(ws)
		sum := 0.0
		for _, w := range ws {
			sum += w
		}
		p90 := ws[int(math.Ceil(0.9*float64(len(ws))))-1] // nearest rank
		out = append(out, service.WaitStat{Key: k, Jobs: len(ws), MeanS: sum / float64(len(ws)), P90S: p90})
	}
	slices.SortFunc(out, func(a, b service.WaitStat) int { return cmp.Compare(a.Key, b.Key) })
	return out
}

// outcomes counts completions and failures that ended in the window and
// compares finished jobs' forecasts with their run time.
func (f *Fake) outcomes(st *service.Stats) {
	reasons := map[string]int{}
	for _, e := range f.jobs {
		if e.job.EndTime.IsZero() || e.job.EndTime.Before(st.From) {
			continue
		}
		switch e.job.State {
		case cluster.StateSucceeded:
			st.Completed++
			st.Forecasts = append(st.Forecasts, service.ForecastCheck{
				Job: e.job.ID, DurationP50S: e.forecast.DurationP50S, DurationP90S: e.forecast.DurationP90S,
				ActualS: e.job.Outcome.RunTime.Seconds(),
			})
		case cluster.StateFailed:
			st.Failed++
			reasons[e.failure]++
		}
	}
	for r, n := range reasons {
		st.Failures = append(st.Failures, service.FailureReason{Reason: r, Count: n})
	}
	slices.SortFunc(st.Failures, func(a, b service.FailureReason) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Reason, b.Reason))
	})
	slices.SortFunc(st.Forecasts, func(a, b service.ForecastCheck) int { return cmp.Compare(a.Job, b.Job) })
}

// costs sums the GPU-hours each workload ran in the window: the tenant, or
// "tenant/workload" when the job has the label "workload".
func (f *Fake) costs(st *service.Stats, now time.Time) {
	hours := map[string]float64{}
	for _, e := range f.jobs {
		key := e.job.Spec.Tenant
		if w := e.job.Spec.Labels["workload"]; w != "" {
			key += "/" + w
		}
		for _, r := range e.runs {
			from, to := later(r.from, st.From), cmp.Or(r.to, now)
			if to.After(from) {
				hours[key] += to.Sub(from).Hours() * float64(e.job.Spec.MilliGPUs()) / cluster.MilliGPU
			}
		}
	}
	for k, h := range hours {
		kwh := h * f.prices.GPUPowerW / 1000
		st.Cost = append(st.Cost, service.CostStat{
			Workload: k, GPUHours: h, EnergyKWh: kwh,
			Cost: h*f.prices.PerGPUHour + kwh*f.prices.PerKWh, Currency: f.prices.Currency,
		})
	}
	slices.SortFunc(st.Cost, func(a, b service.CostStat) int { return cmp.Compare(a.Workload, b.Workload) })
}

// Tenants lists the tenants of SetQuotaUsage's figures, source "none"
// when there are none, "fleet" otherwise.
func (f *Fake) Tenants(context.Context) (service.TenantsInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.failure("Tenants"); err != nil {
		return service.TenantsInfo{}, err
	}
	info := service.TenantsInfo{Source: "none", Tenants: []service.TenantInfo{}, At: f.clock()}
	for _, q := range f.quotas {
		i := slices.IndexFunc(info.Tenants, func(t service.TenantInfo) bool { return t.Name == q.Tenant })
		if i < 0 {
			info.Source = "fleet"
			var tiers []string
			for _, tier := range (&cluster.Tenant{Name: q.Tenant}).AllowedTiers() {
				tiers = append(tiers, tier.String())
			}
			info.Tenants = append(info.Tenants, service.TenantInfo{Name: q.Tenant, Weight: 1, Cohort: q.Cohort,
				Tiers: tiers, Reclaim: string(cluster.ReclaimAny), Quotas: []service.QuotaUsage{}})
			i = len(info.Tenants) - 1
		}
		info.Tenants[i].Quotas = append(info.Tenants[i].Quotas, q)
	}
	return info, nil
}
