package executor

import (
	"errors"
	"fmt"
	"time"

	"github.com/prescient-sched/prescient/cluster"
)

// Carbon is the grid's carbon intensity, known or forecast: At is the
// intensity at t (gCO2/kWh); Cleanest is the earliest time in [from, to]
// at which it is lowest, with that intensity.
type Carbon interface {
	At(t time.Time) float64
	Cleanest(from, to time.Time) (time.Time, float64)
}

// Holder keeps a queued job from starting for now: hold reports until when
// (the planner plans again then) and why.
type Holder interface {
	Hold(v *JobView, in *PlanInput) (until time.Time, why string, hold bool)
}

// CarbonHold lets jobs of the given tiers wait for cleaner power: a job is
// held while, within MaxWait of entering the queue (and, for a job with a
// deadline, early enough to meet it by its P90), the grid will be at least
// Saving cleaner (a fraction, 0.2: 20%) than it is now. It holds nothing
// without PlanInput.Carbon.
type CarbonHold struct {
	Tiers   []cluster.Tier
	MaxWait time.Duration
	Saving  float64
}

// NewCarbonHold validates its arguments.
func NewCarbonHold(tiers []cluster.Tier, maxWait time.Duration, saving float64) (*CarbonHold, error) {
	if len(tiers) == 0 || maxWait <= 0 || !(saving > 0 && saving < 1) {
		return nil, errors.New("carbon hold: want tiers, a positive wait and a saving between 0 and 1")
	}
	return &CarbonHold{Tiers: tiers, MaxWait: maxWait, Saving: saving}, nil
}

// Hold implements Holder.
func (h *CarbonHold) Hold(v *JobView, in *PlanInput) (time.Time, string, bool) {
	if in.Carbon == nil || !h.tier(v.Job.Spec.Tier) {
		return time.Time{}, "", false
	}
	last := v.QueuedSince.Add(h.MaxWait)
	if v.Job.Spec.HasDeadline() {
		last = minTime(last, LatestStart(v))
	}
	if !last.After(in.Now) {
		return time.Time{}, "", false
	}
	now := in.Carbon.At(in.Now)
	at, best := in.Carbon.Cleanest(in.Now, last)
	if !(best <= (1-h.Saving)*now) || !at.After(in.Now) {
		return time.Time{}, "", false
	}
	return at, fmt.Sprintf("waits for cleaner power: %.0f gCO2/kWh now, %.0f from %s", now, best, at.UTC().Format(time.RFC3339)), true
}

func (h *CarbonHold) tier(t cluster.Tier) bool {
	for _, x := range h.Tiers {
		if x == t {
			return true
		}
	}
	return false
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
