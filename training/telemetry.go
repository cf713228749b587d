package training

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/collector"
)

// JobMemoryReader is the part of the telemetry store (InfluxDB or the
// embedded store) retraining reads: the GPU memory of jobs' processes, as
// the collector tags them with their job.
type JobMemoryReader interface {
	JobMemory(ctx context.Context, q collector.JobMemoryQuery) ([]collector.JobMemorySeries, error)
}

// telemetryChunk is the time one query of FillPeakMemory spans; a job that
// spans several chunks has the most of them.
const telemetryChunk = 24 * time.Hour

// PeakFill says what FillPeakMemory did.
type PeakFill struct {
	// Candidates are the finished jobs that ran and had no peak recorded.
	Candidates int
	// Filled of them got a peak from telemetry.
	Filled int
	// Queries is how many telemetry queries it took.
	Queries int
}

// FillPeakMemory sets Outcome.PeakGPUMemoryBytes of the finished jobs that
// ran (StartTime and EndTime known) and have no peak yet, from telemetry:
// the most memory the job's processes held on any one GPU at one sample
// time. A job with no process samples is left as it is. Peaks the job
// store recorded are kept. The telemetry is read a day at a time, only for
// the days some candidate ran.
func FillPeakMemory(ctx context.Context, mem JobMemoryReader, jobs []cluster.Job) (PeakFill, error) {
	var fill PeakFill
	want := map[string]int{} // job ID → index in jobs
	days := map[int64]bool{} // the chunks some candidate ran in, by Unix start
	for i := range jobs {
		j := &jobs[i]
		if !j.State.Terminal() || j.Outcome.PeakGPUMemoryBytes > 0 || j.StartTime.IsZero() || !j.EndTime.After(j.StartTime) {
			continue
		}
		want[string(j.ID)] = i
		// The last sample may be stamped at the end: its chunk counts.
		for d := j.StartTime.Truncate(telemetryChunk); !d.After(j.EndTime); d = d.Add(telemetryChunk) {
			days[d.Unix()] = true
		}
	}
	fill.Candidates = len(want)
	peaks := map[string]float64{}
	for _, day := range slices.Sorted(maps.Keys(days)) {
		lo := time.Unix(day, 0).UTC()
		hi := lo.Add(telemetryChunk)
		fill.Queries++
		series, err := mem.JobMemory(ctx, collector.JobMemoryQuery{Start: lo, End: hi, Step: telemetryChunk})
		if err != nil {
			return fill, fmt.Errorf("telemetry peaks [%s, %s): %w", lo.Format(time.RFC3339), hi.Format(time.RFC3339), err)
		}
		for _, s := range series {
			if _, ok := want[s.Job]; ok {
				peaks[s.Job] = max(peaks[s.Job], s.Peak())
			}
		}
	}
	for id, peak := range peaks {
		if peak >= 1 {
			jobs[want[id]].Outcome.PeakGPUMemoryBytes = int64(peak)
			fill.Filled++
		}
	}
	return fill, nil
}
