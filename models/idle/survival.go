package idle

import (
	"math"
	"sort"
	"time"
)

// runBuckets are the lower bounds, in minutes, of the idle-run lengths the
// survival table tells apart; 0 is a device that is busy now.
var runBuckets = []float64{0, 1, 2, 5, 10, 15, 30, 60, 120, 240}

// Survival is what per-device history says about idle runs: for a device
// that has been idle for a while (a bucket of run lengths), the chance that
// it is idle k steps later (Marginal) and that it stays idle through all of
// the next k steps (Through). Row b is bucket runBuckets[b]; column k-1 is
// k steps ahead.
type Survival struct {
	Step     time.Duration
	Marginal [][]float64
	Through  [][]float64
	Count    []int // devices-times seen per bucket
}

// runBucket is the bucket of an idle run of the given length.
func runBucket(run time.Duration) int {
	return sort.SearchFloat64s(runBuckets, run.Minutes()+1e-9) - 1
}

// FitSurvival counts, on each device grid, how idle runs went on over the
// next maxSteps steps. Grid points without a value end a run.
func FitSurvival(grids []Grid, maxSteps int) *Survival {
	if len(grids) == 0 || maxSteps < 1 {
		return nil
	}
	nb := len(runBuckets)
	s := &Survival{Step: grids[0].Step, Marginal: make([][]float64, nb), Through: make([][]float64, nb), Count: make([]int, nb)}
	seen := make([][]float64, nb) // origins with k steps ahead on record
	for b := range nb {
		s.Marginal[b], s.Through[b], seen[b] = make([]float64, maxSteps), make([]float64, maxSteps), make([]float64, maxSteps)
	}
	for _, g := range grids {
		run := 0
		for i, v := range g.Idle {
			switch {
			case math.IsNaN(v):
				run = 0
				continue
			case v > 0:
				run++
			default:
				run = 0
			}
			b := runBucket(time.Duration(run) * g.Step)
			s.Count[b]++
			through := true
			for k := 1; k <= maxSteps && i+k < len(g.Idle); k++ {
				w := g.Idle[i+k]
				if math.IsNaN(w) {
					break
				}
				seen[b][k-1]++
				if w > 0 {
					s.Marginal[b][k-1]++
				} else {
					through = false
				}
				if through {
					s.Through[b][k-1]++
				}
			}
		}
	}
	for b := range nb {
		for k := range maxSteps {
			// A Beta(1,1) prior keeps empty cells at one half.
			s.Marginal[b][k] = (s.Marginal[b][k] + 1) / (seen[b][k] + 2)
			s.Through[b][k] = (s.Through[b][k] + 1) / (seen[b][k] + 2)
		}
	}
	return s
}

// col is the table column for a lead time, clamped to the table.
func (s *Survival) col(lead time.Duration) int {
	k := int((lead+s.Step/2)/s.Step) - 1
	return min(max(k, 0), len(s.Marginal[0])-1)
}

// IdleAt is the chance that a device idle for run (0: busy now) is idle
// lead from now.
func (s *Survival) IdleAt(run, lead time.Duration) float64 {
	return s.Marginal[runBucket(run)][s.col(lead)]
}

// IdleThrough is the chance that a device idle for run stays idle through
// the next lead.
func (s *Survival) IdleThrough(run, lead time.Duration) float64 {
	if run <= 0 {
		return 0
	}
	return s.Through[runBucket(run)][s.col(lead)]
}

func (s *Survival) validate() bool {
	if s == nil {
		return true
	}
	nb := len(runBuckets)
	if s.Step <= 0 || len(s.Marginal) != nb || len(s.Through) != nb || len(s.Count) != nb || len(s.Marginal[0]) == 0 {
		return false
	}
	for b := range nb {
		if len(s.Marginal[b]) != len(s.Marginal[0]) || len(s.Through[b]) != len(s.Marginal[0]) {
			return false
		}
		for k := range s.Marginal[b] {
			if !(s.Marginal[b][k] >= 0 && s.Marginal[b][k] <= 1 && s.Through[b][k] >= 0 && s.Through[b][k] <= 1) {
				return false
			}
		}
	}
	return true
}
