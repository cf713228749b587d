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
	runs := map[string]jobRun{}
	for i := range jobs {
		j := &jobs[i]
		if !j.State.Terminal() || j.Outcome.PeakGPUMemoryBytes > 0 || j.StartTime.IsZero() || !j.EndTime.After(j.StartTime) {
			continue
		}
		want[string(j.ID)] = i
		runs[string(j.ID)] = jobRun{j.StartTime, j.EndTime}
	}
	fill.Candidates = len(want)
	peaks := map[string]float64{}
	queries, err := jobMemoryByDay(ctx, mem, runs, telemetryChunk, "telemetry peaks", func(s collector.JobMemorySeries, _ jobRun) {
		peaks[s.Job] = max(peaks[s.Job], s.Peak())
	})
	fill.Queries = queries
	if err != nil {
		return fill, err
	}
	for id, peak := range peaks {
		if peak >= 1 {
			jobs[want[id]].Outcome.PeakGPUMemoryBytes = int64(peak)
			fill.Filled++
		}
	}
	return fill, nil
}

// jobRun is when a job ran: from its start to its end.
type jobRun struct{ start, end time.Time }

// jobMemoryByDay reads from telemetry the memory series of the jobs of
// runs, a day (telemetryChunk) per query at step, only for the days some
// run covers (the last sample may be stamped at its end: that day counts),
// and hands visit each series of a job of runs with its run. It returns
// how many queries it made; what names the reading in errors.
func jobMemoryByDay(ctx context.Context, mem JobMemoryReader, runs map[string]jobRun, step time.Duration, what string,
	visit func(s collector.JobMemorySeries, run jobRun)) (int, error) {
	days := map[int64]bool{} // by Unix start
	for _, r := range runs {
		for d := r.start.Truncate(telemetryChunk); !d.After(r.end); d = d.Add(telemetryChunk) {
			days[d.Unix()] = true
		}
	}
	queries := 0
	for _, day := range slices.Sorted(maps.Keys(days)) {
		lo := time.Unix(day, 0).UTC()
		hi := lo.Add(telemetryChunk)
		queries++
		series, err := mem.JobMemory(ctx, collector.JobMemoryQuery{Start: lo, End: hi, Step: step})
		if err != nil {
			return queries, fmt.Errorf("%s [%s, %s): %w", what, lo.Format(time.RFC3339), hi.Format(time.RFC3339), err)
		}
		for _, s := range series {
			if r, ok := runs[s.Job]; ok {
				visit(s, r)
			}
		}
	}
	return queries, nil
}
