package executor

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/prescient-sched/prescient/cluster"
)

// Quotas is the account, in one plan, of the GPUs tenants hold against
// their quotas, and the one place the quota rules are written (Kueue's
// semantics, with GPU models as resource flavours):
//
//   - A tenant's GPUs of a model count against its quota naming that model,
//     else against its quota for any model (Quota.Model ""); a tenant with
//     quotas uses no flavour it lacks one for. A tenant without quotas or a
//     cohort is not counted.
//   - It may always use its nominal quota. Beyond it, it borrows from its
//     cohort: the members' lendable quota (LendingLimit, default all of
//     the nominal) of the same flavour, pooled, less what members already
//     use beyond the part they do not lend. BorrowingLimit caps what it
//     borrows. A tenant without a cohort borrows nothing.
//   - Quota whose owner has jobs queued for it is not idle: a job that
//     would borrow is admitted only if the pool keeps room for what the
//     other members want up to their nominal quota (Want). So, as in
//     Kueue, jobs within nominal quota go before jobs that borrow,
//     whatever the queue's order.
//   - A tenant within its nominal quota whose job does not fit may take
//     back what it lent: jobs of members that borrow that flavour are its
//     victims, whatever their tier (Kueue's reclaimWithinCohort: Any).
//   - Tiers and MaxRunningJobs gate a job before any of that.
//
// Jobs that are stopping are not counted: their GPUs are as good as
// returned.
type Quotas struct {
	modelOf func(cluster.GPURef) string
	acct    map[string]*quotaAccount
	order   []*quotaAccount            // acct in the tenants' order
	cohorts map[string][]*quotaAccount // the members of each cohort, in that order
	lends   bool                       // Reclaims: a plan may preempt for a lender
	pools   map[poolKey]*quotaPool
}

type quotaAccount struct {
	t       *cluster.Tenant
	used    map[string]int // by flavour (Quota.Model)
	wanted  map[string]int // by flavour: GPUs its queued jobs ask for (Want)
	running int
	// jobs are its running jobs when the plan began, not stopping, the
	// cheapest to stop first: the victims Borrowers looks among.
	jobs []*RunningJob
}

// poolKey names a cohort's pool of one flavour; a tenant without a cohort
// is a cohort of its own, named by the tenant with a prefix no cohort has.
type poolKey struct{ cohort, model string }

// quotaPool is a cohort's flavour: the members' lendable quota and what
// they use of it (each member's use beyond the part it does not lend).
type quotaPool struct{ lendable, used int }

// Reclaims reports whether the tenants lend quota (a cohort with quotas),
// so that a plan may preempt for an arrival even under a policy that
// preempts nothing itself.
func Reclaims(tenants []cluster.Tenant) bool {
	for i := range tenants {
		if tenants[i].Cohort != "" && len(tenants[i].Quota) > 0 {
			return true
		}
	}
	return false
}

// NewQuotas accounts the running jobs of the tenants that have quotas, a
// cohort or a cap on running jobs; modelOf names a GPU's model. It returns
// nil when no tenant has any: nothing is gated.
func NewQuotas(tenants []cluster.Tenant, running []*RunningJob, modelOf func(cluster.GPURef) string) *Quotas {
	q := &Quotas{modelOf: modelOf, lends: Reclaims(tenants)}
	for i := range tenants {
		t := &tenants[i]
		if len(t.Quota) == 0 && t.Cohort == "" && t.MaxRunningJobs == 0 && len(t.Tiers) == 0 {
			continue
		}
		if q.acct == nil {
			q.acct, q.pools = map[string]*quotaAccount{}, map[poolKey]*quotaPool{}
		}
		q.acct[t.Name] = &quotaAccount{t: t, used: map[string]int{}}
		q.order = append(q.order, q.acct[t.Name])
		if t.Cohort != "" {
			if q.cohorts == nil {
				q.cohorts = map[string][]*quotaAccount{}
			}
			q.cohorts[t.Cohort] = append(q.cohorts[t.Cohort], q.acct[t.Name])
		}
		for _, qu := range t.Quota {
			q.pool(t, qu.Model).lendable += lendable(&qu)
		}
	}
	if q.acct == nil {
		return nil
	}
	for _, r := range running {
		if !r.Stopping {
			q.Take(r.Job, r.Allocations)
			if a := q.acct[r.Job.Spec.Tenant]; a != nil && a.t.Cohort != "" {
				a.jobs = append(a.jobs, r)
			}
		}
	}
	for _, a := range q.order {
		slices.SortFunc(a.jobs, cheaperToStop)
	}
	return q
}

func (q *Quotas) pool(t *cluster.Tenant, model string) *quotaPool {
	k := poolKey{t.Cohort, model}
	if t.Cohort == "" {
		k.cohort = "\x00" + t.Name
	}
	p := q.pools[k]
	if p == nil {
		p = &quotaPool{}
		q.pools[k] = p
	}
	return p
}

func lendable(qu *cluster.Quota) int {
	if qu.LendingLimit != nil {
		return *qu.LendingLimit
	}
	return qu.GPUs
}

// kept is the part of a quota its tenant does not lend.
func kept(qu *cluster.Quota) int { return qu.GPUs - lendable(qu) }

// flavourCount is a job's GPUs of one flavour (Quota.Model).
type flavourCount struct {
	model string
	n     int
}

// byFlavour appends to buf a job's GPUs by the flavour of its tenant they
// count against: its whole GPUs by model, a share of a GPU as its GPUs;
// model and false name a GPU model the tenant has no quota of. A tenant
// whose one quota is for any model needs no model looked up.
func (q *Quotas) byFlavour(a *quotaAccount, j *cluster.Job, allocs []cluster.Allocation, buf []flavourCount) ([]flavourCount, string, bool) {
	if len(a.t.Quota) == 0 || len(allocs) == 0 {
		return buf, "", true
	}
	if j.Spec.Fractional() {
		allocs = allocs[:1]
	}
	one := len(a.t.Quota) == 1 && a.t.Quota[0].Model == ""
	if one && !j.Spec.Fractional() {
		return append(buf, flavourCount{"", len(allocs)}), "", true
	}
	start := len(buf)
	for _, al := range allocs {
		m := ""
		if !one {
			model := q.modelOf(al.GPU)
			qu, ok := a.t.QuotaFor(model)
			if !ok {
				return buf[:start], model, false
			}
			m = qu.Model
		}
		n := 1
		if j.Spec.Fractional() {
			n = gpusOf(j)
		}
		k := start
		for k < len(buf) && buf[k].model != m {
			k++
		}
		if k == len(buf) {
			buf = append(buf, flavourCount{model: m})
		}
		buf[k].n += n
	}
	return buf, "", true
}

// Lends reports whether the tenants lend quota (Reclaims): only then may
// a job reclaim, and only then do queued jobs hold quota back (Want).
func (q *Quotas) Lends() bool { return q.lends }

// Want records what the queued jobs ask for, by tenant and flavour (a
// job's first quota that may count it), before any of them is placed. A
// job that cannot start whatever the pool lends holds nothing back: one
// of a tier its tenant may not use, one no node may take, and those
// beyond its tenant's cap on running jobs.
func (q *Quotas) Want(queue []*JobView) {
	slots := map[*quotaAccount]int{} // jobs each capped tenant may still start
	for _, v := range queue {
		a := q.acct[v.Job.Spec.Tenant]
		if a == nil || len(a.t.Quota) == 0 || !a.t.AllowsTier(v.Job.Spec.Tier) || v.Unplaceable != "" {
			continue
		}
		if a.t.MaxRunningJobs > 0 {
			n, ok := slots[a]
			if !ok {
				n = a.t.MaxRunningJobs - a.running
			}
			if n <= 0 {
				continue
			}
			slots[a] = n - 1
		}
		for i := range a.t.Quota {
			if m := a.t.Quota[i].Model; mayCount(v.Job, m) {
				if a.wanted == nil {
					a.wanted = map[string]int{}
				}
				a.wanted[m] += gpusOf(v.Job)
				break
			}
		}
	}
}

// mayCount reports whether a quota of model may count a job's GPUs before
// they are chosen: a quota for any model, or one of the models it asks.
func mayCount(j *cluster.Job, model string) bool {
	return model == "" || len(j.Spec.GPUModels) == 0 || slices.Contains(j.Spec.GPUModels, model)
}

// Take counts a job's allocations against its tenant's quota; a job of
// the queue so placed is no longer wanted.
func (q *Quotas) Take(j *cluster.Job, allocs []cluster.Allocation) {
	q.add(j, allocs, 1)
	if a := q.acct[j.Spec.Tenant]; a != nil && a.wanted != nil {
		var buf [4]flavourCount
		counts, _, _ := q.byFlavour(a, j, allocs, buf[:0])
		for _, c := range counts {
			a.wanted[c.model] = max(0, a.wanted[c.model]-c.n)
		}
	}
}

// Give returns them (a victim chosen in this plan).
func (q *Quotas) Give(j *cluster.Job, allocs []cluster.Allocation) { q.add(j, allocs, -1) }

func (q *Quotas) add(j *cluster.Job, allocs []cluster.Allocation, sign int) {
	a := q.acct[j.Spec.Tenant]
	if a == nil {
		return
	}
	a.running += sign
	var buf [4]flavourCount
	counts, _, _ := q.byFlavour(a, j, allocs, buf[:0])
	for _, c := range counts {
		q.addFlavour(a, c.model, sign*c.n)
	}
}

func (q *Quotas) addFlavour(a *quotaAccount, model string, n int) {
	qu, _ := a.t.QuotaFor(model)
	p := q.pool(a.t, qu.Model)
	p.used -= max(0, a.used[qu.Model]-kept(qu))
	a.used[qu.Model] += n
	p.used += max(0, a.used[qu.Model]-kept(qu))
}

// Reserve counts a queued job whose GPUs are not chosen yet against the
// first of its tenant's quotas that admits it whole, and reports whether
// one did (its gate included): what demand estimates (parking) need.
func (q *Quotas) Reserve(j *cluster.Job) bool {
	a := q.acct[j.Spec.Tenant]
	if a == nil {
		return true
	}
	if _, ok := q.Gate(j); !ok {
		return false
	}
	if len(a.t.Quota) == 0 {
		a.running++
		return true
	}
	for i := range a.t.Quota {
		m := a.t.Quota[i].Model
		if !mayCount(j, m) {
			continue
		}
		if _, ok := q.admitFlavour(a, m, gpusOf(j)); ok {
			q.addFlavour(a, m, gpusOf(j))
			a.running++
			return true
		}
	}
	return false
}

// Gate checks what holds a job back before its GPUs are chosen: its tier
// and its tenant's cap on running jobs.
func (q *Quotas) Gate(j *cluster.Job) (string, bool) {
	a := q.acct[j.Spec.Tenant]
	if a == nil {
		return "", true
	}
	if !a.t.AllowsTier(j.Spec.Tier) {
		return fmt.Sprintf("tenant %s may not use tier %s", a.t.Name, j.Spec.Tier), false
	}
	if a.t.MaxRunningJobs > 0 && a.running >= a.t.MaxRunningJobs {
		return fmt.Sprintf("tenant %s runs %d jobs, its most", a.t.Name, a.t.MaxRunningJobs), false
	}
	return "", true
}

// Admit checks that a job on allocs keeps its tenant within its quotas
// (nominal plus what it may borrow); why says which quota holds it back.
func (q *Quotas) Admit(j *cluster.Job, allocs []cluster.Allocation) (string, bool) {
	a := q.acct[j.Spec.Tenant]
	if a == nil {
		return "", true
	}
	var buf [4]flavourCount
	counts, model, ok := q.byFlavour(a, j, allocs, buf[:0])
	if !ok {
		return fmt.Sprintf("tenant %s has no quota of %s GPUs", a.t.Name, model), false
	}
	slices.SortFunc(counts, func(x, y flavourCount) int { return cmp.Compare(x.model, y.model) })
	for _, c := range counts {
		if why, ok := q.admitFlavour(a, c.model, c.n); !ok {
			return why, false
		}
	}
	return "", true
}

func (q *Quotas) admitFlavour(a *quotaAccount, model string, n int) (string, bool) {
	qu, _ := a.t.QuotaFor(model)
	used := a.used[qu.Model] + n
	if qu.BorrowingLimit != nil && used > qu.GPUs+*qu.BorrowingLimit {
		return fmt.Sprintf("tenant %s would hold %d %s GPUs, above its quota of %d plus its borrowing limit of %d",
			a.t.Name, used, flavourName(qu.Model), qu.GPUs, *qu.BorrowingLimit), false
	}
	p := q.pool(a.t, qu.Model)
	after := p.used - max(0, a.used[qu.Model]-kept(qu)) + max(0, used-kept(qu))
	held := 0
	if used > qu.GPUs {
		held = q.heldFor(a, qu.Model)
	}
	if after+held <= p.lendable {
		return "", true
	}
	if after <= p.lendable {
		return fmt.Sprintf("tenant %s would borrow %s GPUs that other members of cohort %s have %d of their own quota's jobs queued for",
			a.t.Name, flavourName(qu.Model), a.t.Cohort, held), false
	}
	if a.t.Cohort == "" {
		return fmt.Sprintf("tenant %s at its quota of %d %s GPUs", a.t.Name, qu.GPUs, flavourName(qu.Model)), false
	}
	return fmt.Sprintf("cohort %s's quota of %s GPUs is in use (%d of %d lendable; tenant %s holds %d of its %d)",
		a.t.Cohort, flavourName(qu.Model), p.used, p.lendable, a.t.Name, a.used[qu.Model], qu.GPUs), false
}

// heldFor is the pool of a's flavour that other members of its cohort
// want back for their queued jobs: each one's wanted GPUs up to its
// nominal quota's room.
func (q *Quotas) heldFor(a *quotaAccount, model string) int {
	if a.t.Cohort == "" {
		return 0
	}
	n := 0
	for _, b := range q.acct {
		if b == a || b.t.Cohort != a.t.Cohort || b.wanted[model] == 0 {
			continue
		}
		if qu, ok := quotaNamed(b.t, model); ok {
			n += min(b.wanted[model], max(0, qu.GPUs-b.used[model]))
		}
	}
	return n
}

func flavourName(model string) string {
	if model == "" {
		return "any-model"
	}
	return model
}

// Models are the GPU models a job may be placed on for its tenant's
// quotas: nil for any (the tenant has no quota naming a model), else those
// of fleetModels it has a quota for (of their own or under its any-model
// quota), only those with room for the job if some have.
func (q *Quotas) Models(j *cluster.Job, fleetModels []string) []string {
	a := q.acct[j.Spec.Tenant]
	if a == nil || len(a.t.Quota) == 0 || len(a.t.Quota) == 1 && a.t.Quota[0].Model == "" {
		return nil
	}
	var allowed, roomy []string
	for _, m := range fleetModels {
		if len(j.Spec.GPUModels) > 0 && !slices.Contains(j.Spec.GPUModels, m) {
			continue
		}
		if _, ok := a.t.QuotaFor(m); !ok {
			continue
		}
		allowed = append(allowed, m)
		if _, ok := q.admitFlavour(a, m, gpusOf(j)); ok {
			roomy = append(roomy, m)
		}
	}
	if len(roomy) > 0 {
		return roomy
	}
	if allowed == nil {
		return []string{} // none: not nil, which would mean any
	}
	return allowed
}

// MayReclaim reports whether a job of gpus GPUs keeps its tenant within
// its nominal quota of some flavour other members of its cohort borrow:
// then the borrowers' jobs may be preempted for it (Borrowers).
func (q *Quotas) MayReclaim(j *cluster.Job) bool {
	if !q.lends {
		return false
	}
	a := q.acct[j.Spec.Tenant]
	if a == nil || a.t.Cohort == "" {
		return false
	}
	for _, b := range q.cohorts[a.t.Cohort] {
		if b != a && q.borrowsFrom(a, b, gpusOf(j)) {
			return true
		}
	}
	return false
}

func quotaNamed(t *cluster.Tenant, model string) (*cluster.Quota, bool) {
	for i := range t.Quota {
		if t.Quota[i].Model == model {
			return &t.Quota[i], true
		}
	}
	return nil, false
}

// Borrowers are the running jobs j's tenant may take its quota back from,
// the cheapest to stop first (least work lost, then the latest started):
// the jobs of other members of its cohort that hold more of a flavour j's
// tenant is within its nominal quota of than their own nominal quota, and
// that its reclaim policy lets j preempt (cluster.Tenant.Reclaims).
func (q *Quotas) Borrowers(j *cluster.Job, skip map[cluster.JobID]bool) []*RunningJob {
	a := q.acct[j.Spec.Tenant]
	if a == nil || a.t.Cohort == "" || a.t.Reclaim == cluster.ReclaimNever {
		return nil
	}
	var out []*RunningJob
	var buf [4]flavourCount
	lenders := 0
	for _, b := range q.cohorts[a.t.Cohort] {
		if b == a || !q.borrowsFrom(a, b, gpusOf(j)) {
			continue
		}
		lenders++
		for _, r := range b.jobs {
			if skip[r.Job.ID] || !a.t.Reclaims(j.Spec.Tier, r.Job.Spec.Tier) {
				continue
			}
			counts, _, _ := q.byFlavour(b, r.Job, r.Allocations, buf[:0])
			for _, c := range counts {
				if q.reclaimable(a, b, c.model, gpusOf(j)) {
					out = append(out, r)
					break
				}
			}
		}
	}
	if lenders > 1 {
		slices.SortFunc(out, cheaperToStop)
	}
	return out
}

// cheaperToStop orders victims: least work lost, then the latest started.
func cheaperToStop(x, y *RunningJob) int {
	return cmp.Or(cmp.Compare(x.WorkSinceCheckpoint, y.WorkSinceCheckpoint), y.Started.Compare(x.Started), cmp.Compare(x.Job.ID, y.Job.ID))
}

// borrowsFrom reports whether b holds, of some flavour a has room for n
// more GPUs of within its nominal quota, more than its own nominal quota.
func (q *Quotas) borrowsFrom(a, b *quotaAccount, n int) bool {
	for model := range b.used {
		if q.reclaimable(a, b, model, n) {
			return true
		}
	}
	return false
}

// reclaimable reports whether a may take back from b GPUs of a flavour: a
// has room for n more within its nominal quota of it, and b holds more of
// it than its own nominal quota (or has none of it).
func (q *Quotas) reclaimable(a, b *quotaAccount, model string, n int) bool {
	mine, ok := quotaNamed(a.t, model)
	if !ok || a.used[model]+n > mine.GPUs {
		return false
	}
	theirs, named := quotaNamed(b.t, model)
	return b.used[model] > 0 && (!named || b.used[model] > theirs.GPUs)
}

// Running is how many of a tenant's jobs the account counts.
func (q *Quotas) Running(tenant string) int {
	if a := q.acct[tenant]; a != nil {
		return a.running
	}
	return 0
}

// Usage is a tenant's GPUs held by flavour in this account (nil for a
// tenant not counted).
func (q *Quotas) Usage(tenant string) map[string]int {
	if a := q.acct[tenant]; a != nil {
		return a.used
	}
	return nil
}
