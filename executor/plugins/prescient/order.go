package prescient

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
)

// Name is the order's name.
const Name = "prescient"

// Args configure the order and the reserver.
type Args struct {
	// UrgencyWindow: a deadline job with at most this much slack (deadline
	// less now less remaining P90) is urgent: it runs before every
	// non-urgent job of its tier, by latest start.
	UrgencyWindow time.Duration
	// AgingHorizon halves a job's effective length after it waited this
	// long (a third after twice as long, ...), so no job waits forever.
	AgingHorizon time.Duration
	// ReserveAfter: a job that waited this long starves: it runs before
	// every non-urgent job of its tier (in the order they were queued) and,
	// when blocked, gets a reservation.
	ReserveAfter time.Duration
	// MaxReservations bounds the reservations of one cycle.
	MaxReservations int
	// WaitFloor and WaitExponent weigh a tenant's jobs by how long its jobs
	// wait against everyone's (executor.FairShare.WaitRatio, r): a tenant
	// with r above WaitFloor has its jobs' lengths scaled by
	// (WaitFloor/r)^WaitExponent, so its jobs move ahead of shorter ones of
	// tenants that wait less. Exponent 0 turns it off.
	WaitFloor, WaitExponent float64
	// BehindRatio: a tenant whose jobs wait more than this many times the
	// fleet's average is behind: its jobs run before every other
	// non-urgent, non-starving job of their tier, are not displaced by
	// them, and get reservations when blocked. 0 turns it off.
	BehindRatio float64
}

// DefaultArgs are the values the prescient policy uses.
func DefaultArgs() Args {
	return Args{UrgencyWindow: 30 * time.Minute, AgingHorizon: 6 * time.Hour, ReserveAfter: 24 * time.Hour, MaxReservations: 4,
		WaitFloor: 0.7, WaitExponent: 8, BehindRatio: 1.5}
}

// Validate rejects non-positive durations and counts.
func (a Args) Validate() error {
	var errs []error
	if a.UrgencyWindow < 0 {
		errs = append(errs, fmt.Errorf("prescient: urgency window %s is negative", a.UrgencyWindow))
	}
	if a.AgingHorizon <= 0 {
		errs = append(errs, fmt.Errorf("prescient: aging horizon %s must be positive", a.AgingHorizon))
	}
	if a.ReserveAfter <= 0 {
		errs = append(errs, fmt.Errorf("prescient: reserve-after %s must be positive", a.ReserveAfter))
	}
	if a.MaxReservations < 1 {
		errs = append(errs, fmt.Errorf("prescient: max reservations %d must be at least 1", a.MaxReservations))
	}
	if !(a.WaitFloor > 0) || math.IsInf(a.WaitFloor, 0) || !(a.WaitExponent >= 0) || math.IsInf(a.WaitExponent, 0) {
		errs = append(errs, fmt.Errorf("prescient: wait floor %g must be positive and wait exponent %g non-negative, both finite", a.WaitFloor, a.WaitExponent))
	}
	if !(a.BehindRatio == 0 || a.BehindRatio >= 1) || math.IsInf(a.BehindRatio, 0) {
		errs = append(errs, fmt.Errorf("prescient: behind ratio %g must be 0 or at least 1", a.BehindRatio))
	}
	return errors.Join(errs...)
}

// Order is the queue order.
type Order struct {
	args Args

	// tenants numbers the tenants of the queued jobs' parts (tenantID), for
	// every simulation the order serves.
	mu      sync.Mutex
	tenants map[string]int32
}

var (
	_ executor.QueueOrder         = (*Order)(nil)
	_ executor.Waker              = (*Order)(nil)
	_ executor.PartedOrder        = (*Order)(nil)
	_ executor.RunningPartedOrder = (*Order)(nil)
)

// NewOrder returns the order.
func NewOrder(a Args) (*Order, error) {
	if err := a.Validate(); err != nil {
		return nil, err
	}
	return &Order{args: a, tenants: map[string]int32{}}, nil
}

// Name implements executor.QueueOrder.
func (*Order) Name() string { return Name }

// Classes of the key's second element, in the order they run.
const (
	classUrgent   = 0 // deadline slack ran out: by latest start
	classStarving = 1 // waited ReserveAfter: in the order queued
	classBehind   = 2 // of a tenant that waits BehindRatio × the fleet
	classOther    = 3
)

// Key implements executor.QueueOrder: the tier (higher first); then urgent
// deadline jobs by latest start; then jobs that waited ReserveAfter
// (starving) in the order they were queued; then jobs of tenants that are
// behind; then the others. Within the last two classes jobs go by their
// Gittins length (see gittinsLength: the predicted remaining time when the
// forecast is sure, shorter when it is wide and the job has not run, longer
// once a wide forecast has been run well past), scaled by the tenant's fair-share
// factor 2^(usage/share − 1) and its wait weight, and divided by
// 1 + wait/AgingHorizon.
func (o *Order) Key(v *executor.JobView, ctx *executor.OrderContext) executor.Key {
	p := o.part(v, -1, false)
	return o.keyOf(&p, ctx)
}

// QueuedPart implements executor.PartedOrder: what the key of a queued job
// reads of it, which stays while it waits.
func (o *Order) QueuedPart(v *executor.JobView) any {
	p := o.part(v, o.tenantID(v.Job.Spec.Tenant), true)
	return &p
}

// KeyFrom implements executor.PartedOrder: Key and NextChange of a queued
// job from its part (computed now when p is nil).
func (o *Order) KeyFrom(v *executor.JobView, p any, ctx *executor.OrderContext) (executor.Key, time.Time) {
	q, ok := p.(*part)
	if !ok {
		kept := o.part(v, -1, true)
		q = &kept
	}
	return o.keyOf(q, ctx), q.next(ctx.Now)
}

// RunningPart implements executor.RunningPartedOrder: what the key of a
// running job reads of it besides its progress, which stays while it runs;
// nil for a deadline job, whose latest start moves with its progress.
func (o *Order) RunningPart(v *executor.JobView) any {
	if v.Job.Spec.HasDeadline() {
		return nil
	}
	return &runningPart{part: o.part(v, o.tenantID(v.Job.Spec.Tenant), false), spread: spreadOf(v)}
}

// KeyRunning implements executor.RunningPartedOrder.
func (o *Order) KeyRunning(v *executor.JobView, p any, ctx *executor.OrderContext) executor.Key {
	rp, ok := p.(*runningPart)
	if !ok {
		return o.Key(v, ctx)
	}
	q := rp.part
	q.length = rp.spread.length(v)
	return o.keyOf(&q, ctx)
}

// runningPart is a running job's part, its length left to compute from
// its progress and its forecast's spread.
type runningPart struct {
	part
	spread spread
}

// part is what a job's key reads of it: for a queued job all of it stays
// while the job waits (the Gittins length as well: the job does not run).
type part struct {
	length float64 // the Gittins length
	tier   float64 // the key's first element
	tenant int32   // its tenantID; -1: look it up by name
	name   string  // the tenant
	queued bool    // the job's state is queued: it ages and may starve
	// since is when it was queued, starve when it starves (since +
	// ReserveAfter), sinceS since's Unix seconds (the starving key).
	since, starve time.Time
	sinceS        float64
	// With a deadline, the job is urgent from urgent on, its key latest
	// (the latest start's Unix seconds).
	deadline bool
	urgent   time.Time
	latest   float64
}

// part is v's part, its tenant numbered id; of a job in the queue
// (inQueue) it has when the job starves, whatever its state.
func (o *Order) part(v *executor.JobView, id int32, inQueue bool) part {
	p := part{
		length: gittinsLength(v), tier: -float64(v.Job.Spec.Tier), tenant: id, name: v.Job.Spec.Tenant,
		queued: v.Job.State == cluster.StateQueued, deadline: v.Job.Spec.HasDeadline(),
	}
	if p.queued || inQueue { // a running job neither ages nor starves
		p.since, p.starve, p.sinceS = v.QueuedSince, v.QueuedSince.Add(o.args.ReserveAfter), float64(v.QueuedSince.Unix())
	}
	if p.deadline {
		latest := executor.LatestStart(v)
		p.urgent, p.latest = executor.UrgentFrom(v, o.args.UrgencyWindow), float64(latest.Unix())
	}
	return p
}

// keyOf is the key of a job with part p (Key).
func (o *Order) keyOf(p *part, ctx *executor.OrderContext) executor.Key {
	if s := o.stateOf(p, ctx.Now); s != bucketed {
		return p.fixedKey(s)
	}
	return o.weighed(p, o.tenantOf(p.tenant, p.name, ctx), ctx.Now)
}

// stateOf is whether a job with part p is urgent at now (a deadline job
// whose slack ran out: executor.Urgent), else starving (queued, it waited
// ReserveAfter), else neither.
func (o *Order) stateOf(p *part, now time.Time) state {
	switch {
	case p.deadline && !now.Before(p.urgent):
		return urgent
	case p.queued && max(now.Sub(p.since), 0) >= o.args.ReserveAfter:
		return starving
	}
	return bucketed
}

// fixedKey is the key of an urgent or starving job, which stays.
func (p *part) fixedKey(s state) executor.Key {
	if s == urgent {
		return executor.Key{p.tier, classUrgent, p.latest}
	}
	return executor.Key{p.tier, classStarving, p.sinceS}
}

// weighed is the key at now of a job neither urgent nor starving, its
// tenant weighing w: its length scaled by the weight and, queued, divided
// by its age.
func (o *Order) weighed(p *part, w tenantWeight, now time.Time) executor.Key {
	if !p.queued { // a running job neither ages nor starves
		return executor.Key{p.tier, w.class, p.length * w.fair}
	}
	age := 1 + max(now.Sub(p.since), 0).Seconds()/o.args.AgingHorizon.Seconds()
	return executor.Key{p.tier, w.class, p.length * w.fair / age}
}

// next is when a queued job with part p turns urgent or starves, the
// earlier after now.
func (p *part) next(now time.Time) time.Time {
	urgent, starve := p.changes()
	if !urgent.IsZero() && urgent.After(now) {
		return urgent
	}
	return starve
}

// changes are the times next gives, whatever the clock: when the job
// turns urgent, if before it starves (zero otherwise), and when it
// starves.
func (p *part) changes() (urgent, starve time.Time) {
	if p.deadline && p.urgent.Before(p.starve) {
		return p.urgent, p.starve
	}
	return time.Time{}, p.starve
}

// tenantID numbers a tenant for the parts of queued jobs.
func (o *Order) tenantID(name string) int32 {
	o.mu.Lock()
	defer o.mu.Unlock()
	id, ok := o.tenants[name]
	if !ok {
		id = int32(len(o.tenants))
		o.tenants[name] = id
	}
	return id
}

// tenantWeight is what the key of every job of one tenant shares.
type tenantWeight struct{ fair, class float64 }

// tenantWeights are the weights one order gave the tenants a context has
// seen (OrderContext.Memo), by name and by tenantID.
type tenantWeights struct {
	order *Order
	of    map[string]tenantWeight
	byID  []tenantWeight // class 0: not yet computed (no weight has it)
}

// memo is the order's weights of ctx.
func (o *Order) memo(ctx *executor.OrderContext) *tenantWeights {
	m, _ := ctx.Memo.(*tenantWeights)
	if m == nil || m.order != o {
		m = &tenantWeights{order: o}
		ctx.Memo = m
	}
	return m
}

// tenant is the tenant's fair-share and wait weight and its jobs' class,
// computed once per context.
func (o *Order) tenant(name string, ctx *executor.OrderContext) tenantWeight {
	m := o.memo(ctx)
	if w, ok := m.of[name]; ok {
		return w
	}
	w := o.weigh(name, ctx)
	if m.of == nil {
		m.of = make(map[string]tenantWeight)
	}
	m.of[name] = w
	return w
}

// maxTenantIDs bounds the weights a context keeps by number: the numbers
// grow with every tenant the order has seen, in every simulation, and
// beyond this many a tenant is looked up by name.
const maxTenantIDs = 4096

// tenantOf is tenant for a tenant numbered id (tenantID).
func (o *Order) tenantOf(id int32, name string, ctx *executor.OrderContext) tenantWeight {
	if id < 0 || id >= maxTenantIDs {
		return o.tenant(name, ctx)
	}
	m := o.memo(ctx)
	if int(id) < len(m.byID) && m.byID[id].class != 0 {
		return m.byID[id]
	}
	w := o.weigh(name, ctx)
	if int(id) >= len(m.byID) {
		m.byID = append(m.byID, make([]tenantWeight, int(id)+1-len(m.byID))...)
	}
	m.byID[id] = w
	return w
}

// weigh is a tenant's weight and class from the context's fair shares.
func (o *Order) weigh(name string, ctx *executor.OrderContext) tenantWeight {
	w := tenantWeight{fair: 1, class: classOther}
	if fs, ok := ctx.Share(name); ok {
		w.fair = fs.Factor
		if o.args.behind(fs) {
			w.fair, w.class = 1, classBehind
		}
		if r := fs.WaitRatio; r > o.args.WaitFloor && o.args.WaitExponent > 0 {
			w.fair *= math.Pow(o.args.WaitFloor/r, o.args.WaitExponent)
		}
	}
	return w
}

// behind reports whether a tenant's jobs wait more than BehindRatio times
// the fleet's.
func (a Args) behind(fs executor.FairShare) bool {
	return a.BehindRatio > 0 && fs.WaitRatio > a.BehindRatio
}

// NextChange implements executor.Waker: when a queued deadline job turns
// urgent, or a queued job has waited long enough for a reservation.
func (o *Order) NextChange(v *executor.JobView, running bool, now time.Time) time.Time {
	if running {
		return time.Time{}
	}
	p := o.part(v, -1, true)
	return p.next(now)
}
