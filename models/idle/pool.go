package idle

import (
	"cmp"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"time"
)

// Pool is a pool's count series on a regular grid: at Start + i·Step,
// Idle[i] of Capacity[i] units were idle and Demand[i] units were asked for
// by queued work. Samples without a value are NaN in Idle and Capacity;
// Demand is 0 where unknown.
type Pool struct {
	ID                     string
	Start                  time.Time
	Step                   time.Duration
	Idle, Capacity, Demand []float64
}

// Len is the number of grid points.
func (p *Pool) Len() int { return len(p.Idle) }

// Time is when grid point i is.
func (p *Pool) Time(i int) time.Time { return p.Start.Add(time.Duration(i) * p.Step) }

// known says whether grid point i has a value.
func (p *Pool) known(i int) bool {
	return i >= 0 && i < len(p.Idle) && !math.IsNaN(p.Idle[i]) && p.Capacity[i] > 0
}

// frac is the idle share at i, NaN when unknown.
func (p *Pool) frac(i int) float64 {
	if !p.known(i) {
		return math.NaN()
	}
	return p.Idle[i] / p.Capacity[i]
}

// Index is the grid point at or before t, and whether t is on the grid's span.
func (p *Pool) Index(t time.Time) (int, bool) {
	if t.Before(p.Start) {
		return 0, false
	}
	i := int(t.Sub(p.Start) / p.Step)
	return i, i < p.Len()
}

// MaxGap is how long a sample stands for the grid points after it: a
// longer gap leaves grid points unknown.
const MaxGap = 5 * time.Minute

// NewPool puts a count series on a grid of step: each grid point takes the
// last sample at or before it, if that sample is at most MaxGap old.
// demand may be nil. times must be strictly increasing.
func NewPool(id string, times []time.Time, idle, capacity, demand []float64, step time.Duration) (*Pool, error) {
	if step <= 0 {
		return nil, fmt.Errorf("pool %s: step %s is not positive", id, step)
	}
	if len(times) == 0 {
		return nil, fmt.Errorf("pool %s: no samples", id)
	}
	if len(idle) != len(times) || len(capacity) != len(times) || (demand != nil && len(demand) != len(times)) {
		return nil, fmt.Errorf("pool %s: %d times, %d idle, %d capacity, %d demand values", id, len(times), len(idle), len(capacity), len(demand))
	}
	start := times[0].Truncate(step)
	if start.Before(times[0]) {
		start = start.Add(step)
	}
	n := int(times[len(times)-1].Sub(start)/step) + 1
	if n <= 0 {
		return nil, fmt.Errorf("pool %s: spans less than one step of %s", id, step)
	}
	p := &Pool{ID: id, Start: start, Step: step, Idle: make([]float64, n), Capacity: make([]float64, n), Demand: make([]float64, n)}
	j := 0
	for i := range n {
		t := p.Time(i)
		for j+1 < len(times) && !times[j+1].After(t) {
			j++
		}
		if times[j].After(t) || t.Sub(times[j]) > MaxGap {
			p.Idle[i], p.Capacity[i] = math.NaN(), math.NaN()
			continue
		}
		p.Idle[i], p.Capacity[i] = idle[j], capacity[j]
		if demand != nil {
			p.Demand[i] = demand[j]
		}
	}
	return p, nil
}

// Device is one device's utilization series (percent), as the GenAI trace
// or the collector records it.
type Device struct {
	ID     string
	Times  []time.Time
	Values []float64 // utilization, %
}

// Grid is a device's idleness on a grid: 1 idle (below the threshold), 0
// busy, NaN unknown.
type Grid struct {
	ID    string
	Start time.Time
	Step  time.Duration
	Idle  []float64
}

// DeviceGrids puts each device on one common grid of step spanning every
// device's samples; a grid point is idle when the last sample at or
// before it (at most MaxGap old) is below thresholdPct.
func DeviceGrids(devs []Device, thresholdPct float64, step time.Duration) ([]Grid, error) {
	if step <= 0 {
		return nil, fmt.Errorf("step %s is not positive", step)
	}
	var first, last time.Time
	for _, d := range devs {
		if len(d.Times) == 0 || len(d.Times) != len(d.Values) {
			return nil, fmt.Errorf("device %s: %d times, %d values", d.ID, len(d.Times), len(d.Values))
		}
		if first.IsZero() || d.Times[0].Before(first) {
			first = d.Times[0]
		}
		if l := d.Times[len(d.Times)-1]; l.After(last) {
			last = l
		}
	}
	if len(devs) == 0 {
		return nil, errors.New("no devices")
	}
	start := first.Truncate(step)
	if start.Before(first) {
		start = start.Add(step)
	}
	n := int(last.Sub(start)/step) + 1
	out := make([]Grid, len(devs))
	for k, d := range devs {
		g := Grid{ID: d.ID, Start: start, Step: step, Idle: make([]float64, n)}
		j := -1
		for i := range n {
			t := start.Add(time.Duration(i) * step)
			for j+1 < len(d.Times) && !d.Times[j+1].After(t) {
				j++
			}
			switch {
			case j < 0 || t.Sub(d.Times[j]) > MaxGap:
				g.Idle[i] = math.NaN()
			case d.Values[j] < thresholdPct:
				g.Idle[i] = 1
			}
		}
		out[k] = g
	}
	return out, nil
}

// PoolsFromGrids groups device grids (all on one grid, as DeviceGrids
// makes them) into pools of size devices, ordered by a hash of the device
// ID salted with seed, so that each seed gives other groupings; a last
// group smaller than size/2 joins the one before. A pool's capacity at a
// grid point is its devices with a value there.
func PoolsFromGrids(grids []Grid, size int, seed uint64) []*Pool {
	if size < 1 || len(grids) == 0 {
		return nil
	}
	order := slices.Clone(grids)
	slices.SortFunc(order, func(a, b Grid) int { return cmp.Compare(hashID(a.ID, seed), hashID(b.ID, seed)) })
	groups := Groups(order, size)
	pools := make([]*Pool, len(groups))
	for k, g := range groups {
		pools[k] = PoolFromGrids(fmt.Sprintf("pool-%d-%d", seed, k), g)
	}
	return pools
}

// Groups splits xs, in order, into groups of size (at least 1); a last
// group smaller than half of size joins the one before. The groups share
// xs's backing array except the joined one.
func Groups[T any](xs []T, size int) [][]T {
	size = max(size, 1)
	var groups [][]T
	for lo := 0; lo < len(xs); lo += size {
		groups = append(groups, xs[lo:min(lo+size, len(xs)):min(lo+size, len(xs))])
	}
	if n := len(groups); n > 1 && len(groups[n-1]) < (size+1)/2 {
		groups[n-2] = append(groups[n-2], groups[n-1]...)
		groups = groups[:n-1]
	}
	return groups
}

// PoolFromGrids sums device grids (all on one grid, as DeviceGrids makes
// them) into one pool: at each grid point its idle devices of the devices
// with a value there (unknown where none has one).
func PoolFromGrids(id string, grids []Grid) *Pool {
	if len(grids) == 0 {
		return nil
	}
	n := len(grids[0].Idle)
	p := &Pool{ID: id, Start: grids[0].Start, Step: grids[0].Step,
		Idle: make([]float64, n), Capacity: make([]float64, n), Demand: make([]float64, n)}
	for i := range n {
		for _, d := range grids {
			if i < len(d.Idle) && !math.IsNaN(d.Idle[i]) {
				p.Idle[i] += d.Idle[i]
				p.Capacity[i]++
			}
		}
		if p.Capacity[i] == 0 {
			p.Idle[i], p.Capacity[i] = math.NaN(), math.NaN()
		}
	}
	return p
}

// IdleRun is how long the device has been idle at the grid's last point:
// the run of idle points ending there, each a step long; 0 when the last
// point is busy or unknown.
func (g *Grid) IdleRun() time.Duration {
	k := 0
	for i := len(g.Idle) - 1; i >= 0 && g.Idle[i] == 1; i-- {
		k++
	}
	return time.Duration(k) * g.Step
}

func hashID(id string, seed uint64) uint64 {
	h := fnv.New64a()
	var b [8]byte
	for i := range b {
		b[i] = byte(seed >> (8 * i))
	}
	h.Write(b[:])
	h.Write([]byte(id))
	return h.Sum64()
}

// HeldOut picks the series held out from training: the ceil(share·n)
// IDs with the lowest hash, so that the split is the same on every run.
// With share > 0 and at least two IDs, at least one is held out and one
// kept.
func HeldOut(ids []string, share float64) map[string]bool {
	order := slices.Clone(ids)
	slices.SortFunc(order, func(a, b string) int { return cmp.Compare(hashID(a, 0), hashID(b, 0)) })
	k := int(math.Ceil(share * float64(len(order))))
	if k >= len(order) {
		k = len(order) - 1
	}
	out := make(map[string]bool, k)
	for _, id := range order[:max(k, 0)] {
		out[id] = true
	}
	return out
}
