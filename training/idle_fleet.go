package training

import (
	"cmp"
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"time"

	"github.com/prescient-sched/prescient/collector"
	"github.com/prescient-sched/prescient/datasets"
)

const (
	// IdleFleetHistory is how much of the fleet's utilization RetrainIdle
	// learns from: two days, so that the same time a day before is on
	// record for the second.
	IdleFleetHistory = 48 * time.Hour
	// IdleFleetMaxGPUs bounds the GPUs whose series RetrainIdle reads,
	// chosen by a hash of their UUIDs so that the same ones come back at
	// every retraining: 512 GPUs of two days are 1.5 million points.
	IdleFleetMaxGPUs = 512
	// idleFleetChunk is the span of one query of it.
	idleFleetChunk = 6 * time.Hour
)

// RetrainIdle fits the idle model on the fleet's own utilization, the last
// IdleFleetHistory of util_gpu_pct on a 1-minute grid from the telemetry
// store for at most IdleFleetMaxGPUs of the GPUs that reported in the last
// hour, and publishes it through TrainIdle's gate (the series held out by
// cfg.TestShare). Fewer GPUs than two pools of cfg.Model.PoolSize is
// ErrNoSeriesData.
func RetrainIdle(ctx context.Context, ts collector.TelemetryStore, reg Registry, cfg IdleConfig, now time.Time) (IdleReport, error) {
	now = now.UTC().Truncate(time.Minute)
	// 1. The GPUs that report now.
	recent, err := ts.Query(ctx, collector.SeriesQuery{Field: "util_gpu_pct", Start: now.Add(-time.Hour), End: now,
		Step: time.Hour, Agg: "last"})
	if err != nil {
		return IdleReport{}, fmt.Errorf("idle: the GPUs that report: %w", err)
	}
	var gpus []string
	for _, s := range recent {
		if len(s.Points) > 0 && s.GPU != "" {
			gpus = append(gpus, s.GPU)
		}
	}
	slices.Sort(gpus)
	gpus = slices.Compact(gpus)
	if len(gpus) < 2*cfg.Model.PoolSize {
		return IdleReport{}, fmt.Errorf("idle: %w: %d GPUs reported utilization in the last hour, at least %d (two pools) needed",
			ErrNoSeriesData, len(gpus), 2*cfg.Model.PoolSize)
	}
	slices.SortFunc(gpus, func(a, b string) int { return cmp.Compare(uuidHash(a), uuidHash(b)) })
	gpus = gpus[:min(len(gpus), IdleFleetMaxGPUs)]
	// 2. Their series, a chunk at a time.
	byID := map[string]*datasets.Series{}
	for lo := now.Add(-IdleFleetHistory); lo.Before(now); lo = lo.Add(idleFleetChunk) {
		hi := lo.Add(idleFleetChunk)
		if hi.After(now) {
			hi = now
		}
		got, err := collector.ReadSeries(ctx, ts, collector.SeriesQuery{Field: "util_gpu_pct", GPUs: gpus, Start: lo, End: hi,
			Step: time.Minute, Agg: "mean"})
		if err != nil {
			return IdleReport{}, fmt.Errorf("idle: utilization from %s: %w", lo.Format(time.RFC3339), err)
		}
		for _, s := range got {
			d := byID[s.ID]
			if d == nil {
				d = &datasets.Series{ID: s.ID}
				byID[s.ID] = d
			}
			for i, t := range s.Times {
				if n := len(d.Times); n == 0 || t.After(d.Times[n-1]) {
					d.Times, d.Values = append(d.Times, t), append(d.Values, s.Values[i])
				}
			}
		}
	}
	series := make([]datasets.Series, 0, len(byID))
	for _, d := range byID {
		series = append(series, *d)
	}
	slices.SortFunc(series, func(a, b datasets.Series) int { return cmp.Compare(a.ID, b.ID) })
	cfg.SeriesFormat = "telemetry"
	return TrainIdle(ctx, cfg, series, reg)
}

func uuidHash(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}
