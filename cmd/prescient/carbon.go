package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/datasets"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/executor/sim"
)

// carbonSaving is how much cleaner power must get for a carbon hold to
// hold a job: 20%.
const carbonSaving = 0.2

// carbonHold is the hold of simulate --carbon-wait and prescient slurm
// --hold-qos: an opportunistic-tier job waits up to wait after it was
// queued for power carbonSaving cleaner than now.
func carbonHold(wait time.Duration) (*executor.CarbonHold, error) {
	return executor.NewCarbonHold([]cluster.Tier{cluster.TierOpportunistic}, wait, carbonSaving)
}

// readCarbonSeries reads a carbon-intensity CSV (time,gco2_per_kwh).
func readCarbonSeries(path string) (*sim.CarbonSeries, error) {
	pts, err := datasets.ReadCarbon(path)
	if err != nil {
		return nil, fmt.Errorf("--carbon: %w", err)
	}
	times, values := make([]time.Time, len(pts)), make([]float64, len(pts))
	for i, p := range pts {
		times[i], values[i] = p.Time, p.GPerKWh
	}
	c, err := sim.NewCarbonSeries(times, values)
	if err != nil {
		return nil, fmt.Errorf("--carbon %s: %w", path, err)
	}
	return c, nil
}

// carbonFile is a carbon-intensity file read again whenever it changes
// (its modification time or size): a forecast that a timer rewrites is
// seen at the next read.
type carbonFile struct {
	path string

	mu     sync.Mutex
	mod    time.Time
	size   int64
	series *sim.CarbonSeries
}

// Read returns the series as the file now holds it.
func (f *carbonFile) Read(context.Context) (executor.Carbon, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, err := os.Stat(f.path)
	if err != nil {
		return nil, fmt.Errorf("--carbon: %w", err)
	}
	if f.series == nil || !st.ModTime().Equal(f.mod) || st.Size() != f.size {
		s, err := readCarbonSeries(f.path)
		if err != nil {
			return nil, err
		}
		f.series, f.mod, f.size = s, st.ModTime(), st.Size()
	}
	return f.series, nil
}
