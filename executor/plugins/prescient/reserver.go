package prescient

import (
	"fmt"
	"time"

	"github.com/prescient-sched/prescient/executor"
)

// ReserverName is the reserver's name.
const ReserverName = "prescient-reserve"

// Reserver gives reservations to urgent deadline jobs, to jobs that waited
// ReserveAfter and to jobs of tenants that are behind (their jobs wait
// BehindRatio times the fleet's), up to MaxReservations a cycle.
type Reserver struct{ args Args }

var _ executor.Reserver = (*Reserver)(nil)

// NewReserver returns the reserver.
func NewReserver(a Args) (*Reserver, error) {
	if err := a.Validate(); err != nil {
		return nil, err
	}
	return &Reserver{args: a}, nil
}

// Reserve implements executor.Reserver.
func (r *Reserver) Reserve(v *executor.JobView, reserved int, ctx *executor.OrderContext) (bool, string) {
	now := ctx.Now
	switch {
	case reserved >= r.args.MaxReservations:
		return false, ""
	case executor.Urgent(v, now, r.args.UrgencyWindow):
		return true, "deadline slack ran out"
	case now.Sub(v.QueuedSince) >= r.args.ReserveAfter:
		return true, "waited " + now.Sub(v.QueuedSince).Round(time.Minute).String()
	}
	// The tenant's share last: most blocked jobs are turned down before it
	// is looked up (a map look-up for each, most cycles).
	if fs, _ := ctx.Share(v.Job.Spec.Tenant); r.args.behind(fs) {
		return true, fmt.Sprintf("tenant %s waits %.1f× the fleet's average", v.Job.Spec.Tenant, fs.WaitRatio)
	}
	return false, ""
}
