package control

import (
	"cmp"
	"context"
	"maps"
	"slices"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/control/live"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/service"
)

// quotaUsage is what the tenants of a live state hold against their
// quotas, counted by the planner's own ledger (executor.Quotas): one entry
// per tenant and flavour, in the tenants' order.
func quotaUsage(lv *live.State) []service.QuotaUsage {
	ts := lv.Snap.Tenants
	q := executor.NewQuotas(ts, lv.In.Running, lv.Snap.GPUModel)
	if q == nil {
		return nil
	}
	var out []service.QuotaUsage
	for i := range ts {
		t := &ts[i]
		held := q.Usage(t.Name)
		for _, qu := range t.Quota {
			u := service.QuotaUsage{Tenant: t.Name, Cohort: t.Cohort, Model: qu.Model, NominalGPUs: qu.GPUs,
				BorrowingLimitGPUs: qu.BorrowingLimit, LendingLimitGPUs: qu.LendingLimit, HeldGPUs: held[qu.Model]}
			u.BorrowedGPUs = max(0, u.HeldGPUs-u.NominalGPUs)
			out = append(out, u)
		}
	}
	return out
}

// Tenants says which tenants are in force, from where, and their use of
// their quotas as of the last plan cycle.
func (p *Plane) Tenants(context.Context) (service.TenantsInfo, error) {
	ts := p.tenantsNow()
	info := service.TenantsInfo{Source: "none", Tenants: make([]service.TenantInfo, 0, len(ts))}
	switch {
	case p.cfg.TenantsFile != nil:
		st := p.cfg.TenantsFile.Status()
		info.Source = "file"
		info.File = &service.TenantsFileStatus{Path: st.Path, LoadedAt: st.LoadedAt, SHA256: st.SHA256, LastError: st.LastError}
	case len(ts) > 0:
		info.Source = "fleet"
	}
	p.mu.Lock()
	use, at, running := slices.Clone(p.quotaUse), p.lastPlan, maps.Clone(p.runningBy)
	p.mu.Unlock()
	info.At = at
	for i := range ts {
		t := &ts[i]
		ti := service.TenantInfo{Name: t.Name, Weight: t.Weight, Cohort: t.Cohort, Tiers: tierNames(t), MaxRunningJobs: t.MaxRunningJobs, Reclaim: string(cmp.Or(t.Reclaim, cluster.ReclaimAny)),
			RunningJobs: running[t.Name], Quotas: []service.QuotaUsage{}}
		for _, u := range use {
			if u.Tenant == t.Name {
				ti.Quotas = append(ti.Quotas, u)
			}
		}
		info.Tenants = append(info.Tenants, ti)
	}
	return info, nil
}

// tierNames are the tiers a tenant may use, all of them when it names
// none.
func tierNames(t *cluster.Tenant) []string {
	tiers := t.AllowedTiers()
	out := make([]string, len(tiers))
	for i, tier := range tiers {
		out[i] = tier.String()
	}
	return out
}
