package sim

import "github.com/prescient-sched/prescient/cluster"

// PowerModel is a GPU's draw: IdleW when nothing runs on it, BusyW when it
// is wholly allocated (a share draws in proportion).
type PowerModel struct {
	IdleW, BusyW float64
}

// IdleFraction is the idle draw as a fraction of the board power limit in
// DefaultPower: datacenter GPUs idle at roughly 10-20% of their limit
// (V100: ~40 of 300 W; A100: ~55 of 400 W).
const IdleFraction = 0.15

// fallbackLimitW is the power limit assumed for GPUs the catalog lacks.
const fallbackLimitW = 300

// DefaultPower is the documented model the placement issue refines: a busy
// GPU draws its board power limit (training keeps GPUs near it), an idle one
// IdleFraction of it; failed nodes draw nothing.
func DefaultPower(g cluster.GPU) PowerModel {
	limit := g.PowerLimitW
	if limit <= 0 {
		limit = fallbackLimitW
	}
	return PowerModel{IdleW: IdleFraction * limit, BusyW: limit}
}
