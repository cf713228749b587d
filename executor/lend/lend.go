// Package lend decides when an inference pool's idle GPUs are lent to
// training and when they are taken back, on a forecast of the pool's idle
// GPUs. The simulator (executor/sim's Lending) and the control plane
// (control's lending) both decide with it: a Lender forecasts, and
// Policy.Decide turns the forecast into loans and take-backs of whole
// nodes.
package lend

import (
	"cmp"
	"math"
	"strconv"
	"time"

	"github.com/prescient-sched/prescient/models/idle"
)

// Lender forecasts an inference pool's idle GPUs.
type Lender interface {
	// IdleAhead answers, for each of q.Leads steps of q.Step after q.Now,
	// how many of the pool's GPUs can be counted on to be idle until then:
	// a low quantile of the forecast, the GPUs that may be lent.
	IdleAhead(q Query) ([]float64, error)
}

// Query is what a Lender is asked.
type Query struct {
	Now time.Time
	// SeriesNow is Now on the replicas' own clock, for forecasts that read
	// the time of day (a replay's replicas may come from another day);
	// zero: Now.
	SeriesNow time.Time
	GPUs      int // the pool's GPUs, lent ones included
	// History is the pool's idle GPUs per minute, oldest first, the last
	// at Now; Replicas the same minutes' idleness of each GPU (or replica)
	// that serves (1 idle, 0 busy, NaN not running or not seen), read-only:
	// they may share the caller's.
	History  []float64
	Replicas [][]float64
	Step     time.Duration
	Leads    int
	// Future is the truth: the pool's idle GPUs per minute after Now,
	// Leads × Step long. Only Oracle reads it.
	Future []float64
}

func (q Query) seriesNow() time.Time { return cmp.Or(q.SeriesNow, q.Now) }

// Oracle knows the future: at each lead, the fewest idle GPUs of the
// minutes up to it since the lead before.
type Oracle struct{}

// IdleAhead implements Lender.
func (Oracle) IdleAhead(q Query) ([]float64, error) {
	per := int(q.Step / time.Minute)
	out := make([]float64, q.Leads)
	for l := range out {
		out[l] = math.Inf(1)
		for m := l * per; m < (l+1)*per && m < len(q.Future); m++ {
			out[l] = math.Min(out[l], q.Future[m])
		}
	}
	return out, nil
}

// Recent lends what has been idle throughout the last Window: the fewest
// idle GPUs of that window, at every lead (the reactive rule).
type Recent struct{ Window time.Duration }

// IdleAhead implements Lender.
func (r Recent) IdleAhead(q Query) ([]float64, error) {
	out := make([]float64, q.Leads)
	n := min(max(int(r.Window/time.Minute), 1), len(q.History))
	if n == 0 {
		return out, nil // nothing seen: nothing is spare
	}
	low := math.Inf(1)
	for _, v := range q.History[len(q.History)-n:] {
		low = math.Min(low, v)
	}
	for l := range out {
		out[l] = low
	}
	return out, nil
}

// Model lends on the idle model's forecasts. The model forecasts pools of
// its own size (Config.PoolSize replicas), so the replicas are taken in
// pools of that size, in order; the pool's busy replicas at each lead are
// the sum of theirs, taken as independent and normal with the pools' P50
// and their P10–P90 spread; the idle GPUs lent are the Level quantile of
// the forecast (0.1: as many as are idle nine times in ten). With Recent,
// it lends no
// more than was idle throughout that last stretch: the model's 5-minute
// leads do not see the minute-to-minute swings.
type Model struct {
	Model  *idle.Model
	Level  float64
	Recent time.Duration
}

// IdleAhead implements Lender: the pool's GPUs less the busy replicas'
// 1 − Level quantile at each lead (the model's last lead beyond its horizon);
// none while there is less history than the model's features look back
// on (4 hours). The time of day is read on the replicas' clock
// (SeriesNow).
func (l Model) IdleAhead(q Query) ([]float64, error) {
	out := make([]float64, q.Leads)
	n := len(q.History)
	if l.Model == nil || n < idle.HistoryNeeded(time.Minute) || len(q.Replicas) == 0 {
		return out, nil
	}
	leads := make([]int, q.Leads)
	for k := range leads {
		leads[k] = int(min(time.Duration(k+1)*q.Step, l.Model.Config.Horizon) / time.Minute)
	}
	start := q.seriesNow().Add(-time.Duration(n-1) * time.Minute)
	grids := make([]idle.Grid, len(q.Replicas))
	for r, rep := range q.Replicas {
		grids[r] = idle.Grid{ID: strconv.Itoa(r), Start: start, Step: time.Minute, Idle: rep}
	}
	var queries []idle.Query
	for _, group := range idle.Groups(grids, l.Model.Config.PoolSize) {
		queries = append(queries, idle.Query{Pool: idle.PoolFromGrids("inference", group), I: n - 1, Leads: leads})
	}
	pred, err := l.Model.Predict(queries, []float64{0.1, 0.5, 0.9})
	if err != nil {
		return nil, err
	}
	z := NormalQuantile(1 - l.Level)
	for k := range out {
		mean, variance := 0.0, 0.0
		for qi, qu := range queries {
			if pred[qi] == nil { // no replica runs there now: none is busy
				continue
			}
			capNow := qu.Pool.Capacity[n-1]
			mean += capNow - pred[qi][k][1]
			sd := (pred[qi][k][2] - pred[qi][k][0]) / (2 * NormalQuantile(0.9))
			variance += sd * sd
		}
		out[k] = math.Max(float64(q.GPUs)-(mean+z*math.Sqrt(variance)), 0)
	}
	if l.Recent > 0 {
		floor, err := Recent{Window: l.Recent}.IdleAhead(q)
		if err != nil {
			return nil, err
		}
		for k := range out {
			out[k] = math.Min(out[k], floor[k])
		}
	}
	return out, nil
}

// NormalQuantile is the standard normal's quantile function.
func NormalQuantile(p float64) float64 { return math.Sqrt2 * math.Erfinv(2*p-1) }
