package prescient

import (
	"errors"
	"fmt"
	"math"
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
type Order struct{ args Args }

var (
	_ executor.QueueOrder  = (*Order)(nil)
	_ executor.Waker       = (*Order)(nil)
	_ executor.PartedOrder = (*Order)(nil)
)

// NewOrder returns the order.
func NewOrder(a Args) (*Order, error) {
	if err := a.Validate(); err != nil {
		return nil, err
	}
	return &Order{args: a}, nil
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
	return o.key(v, ctx, -1)
}

// QueuedPart implements executor.PartedOrder: the job's Gittins length,
// which stays while it waits.
func (o *Order) QueuedPart(v *executor.JobView) float64 { return gittinsLength(v) }

// KeyFrom implements executor.PartedOrder: Key with the job's Gittins
// length given.
func (o *Order) KeyFrom(v *executor.JobView, length float64, ctx *executor.OrderContext) executor.Key {
	return o.key(v, ctx, length)
}

// key is Key with the Gittins length given, or, when length is negative,
// computed where the key needs it (not for an urgent or starving job).
func (o *Order) key(v *executor.JobView, ctx *executor.OrderContext, length float64) executor.Key {
	tier := -float64(v.Job.Spec.Tier)
	if executor.Urgent(v, ctx.Now, o.args.UrgencyWindow) {
		latest := v.Job.Spec.Deadline.Add(-v.RemainingP90())
		return executor.Key{tier, classUrgent, float64(latest.Unix())}
	}
	queued := v.Job.State == cluster.StateQueued
	wait := max(ctx.Now.Sub(v.QueuedSince), 0)
	if queued && wait >= o.args.ReserveAfter {
		return executor.Key{tier, classStarving, float64(v.QueuedSince.Unix())}
	}
	if length < 0 {
		length = gittinsLength(v)
	}
	t := o.tenant(v.Job.Spec.Tenant, ctx)
	age := 1.0
	if queued { // a running job ages no more
		age += wait.Seconds() / o.args.AgingHorizon.Seconds()
	}
	return executor.Key{tier, t.class, length * t.fair / age}
}

// tenantWeight is what the key of every job of one tenant shares.
type tenantWeight struct{ fair, class float64 }

// tenantWeights are the weights one order gave the tenants a context has
// seen (OrderContext.Memo).
type tenantWeights struct {
	order *Order
	of    map[string]tenantWeight
}

// tenant is the tenant's fair-share and wait weight and its jobs' class,
// computed once per context.
func (o *Order) tenant(name string, ctx *executor.OrderContext) tenantWeight {
	memo, _ := ctx.Memo.(*tenantWeights)
	if memo == nil || memo.order != o {
		memo = &tenantWeights{order: o, of: make(map[string]tenantWeight, len(ctx.Shares))}
		ctx.Memo = memo
	}
	if w, ok := memo.of[name]; ok {
		return w
	}
	w := tenantWeight{fair: 1, class: classOther}
	if fs, ok := ctx.Shares[name]; ok {
		w.fair = fs.Factor
		if o.args.behind(fs) {
			w.fair, w.class = 1, classBehind
		}
		if r := fs.WaitRatio; r > o.args.WaitFloor && o.args.WaitExponent > 0 {
			w.fair *= math.Pow(o.args.WaitFloor/r, o.args.WaitExponent)
		}
	}
	memo.of[name] = w
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
	next := v.QueuedSince.Add(o.args.ReserveAfter)
	if v.Job.Spec.HasDeadline() {
		urgent := v.Job.Spec.Deadline.Add(-v.RemainingP90() - o.args.UrgencyWindow)
		if urgent.After(now) && urgent.Before(next) {
			next = urgent
		}
	}
	return next
}
