package collector

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prescient-sched/prescient/store"
)

// JobMemoryStore answers how much GPU memory jobs' processes held, from the
// gpu_process measurement (the process samples the collector tags with
// their job). Training reads finished jobs' peaks through it, the control
// plane running jobs' series.
type JobMemoryStore interface {
	JobMemory(ctx context.Context, q JobMemoryQuery) ([]JobMemorySeries, error)
}

// JobMemoryQuery asks for the GPU memory of jobs over [Start, End) in
// windows of Step, aligned as in SeriesQuery. A job's value at a sample
// time is the memory its processes hold on one GPU, summed over the
// processes, on the GPU where that is most (the job's footprint per GPU);
// a window's point is the highest of its sample times.
type JobMemoryQuery struct {
	Jobs       []string // job IDs; none means every job a process was known to belong to
	Start, End time.Time
	Step       time.Duration
}

// Validate checks the query.
func (q JobMemoryQuery) Validate() error {
	if q.Step <= 0 {
		return fmt.Errorf("step %s: want a positive duration", q.Step)
	}
	return validJobsRange(q.Jobs, q.Start, q.End)
}

// validJobsRange checks a job query's jobs and range.
func validJobsRange(jobs []string, start, end time.Time) error {
	if !end.After(start) {
		return fmt.Errorf("range [%s, %s) is empty", start.Format(time.RFC3339Nano), end.Format(time.RFC3339Nano))
	}
	for i, j := range jobs {
		if j == "" {
			return fmt.Errorf("job %d: empty job ID", i)
		}
	}
	return nil
}

// JobMemorySeries is one job's GPU memory in bytes, per window.
type JobMemorySeries struct {
	Job    string
	Points []Point
}

// Peak is the highest point of the series; 0 when it has none.
func (s JobMemorySeries) Peak() float64 {
	peak := 0.0
	for _, p := range s.Points {
		peak = max(peak, p.Value)
	}
	return peak
}

var (
	_ JobMemoryStore = (*EmbeddedSink)(nil)
	_ JobMemoryStore = (*InfluxQuery)(nil)
)

// JobMemory answers a job memory query from the store.
func (s *EmbeddedSink) JobMemory(ctx context.Context, q JobMemoryQuery) ([]JobMemorySeries, error) {
	if err := q.Validate(); err != nil {
		return nil, fmt.Errorf("job memory query: %w", err)
	}
	res, err := s.st.QueryJobMemory(ctx, store.JobMemoryQuery{Jobs: q.Jobs, Start: q.Start, End: q.End, Step: q.Step})
	if err != nil {
		return nil, err
	}
	out := make([]JobMemorySeries, len(res))
	for i, r := range res {
		out[i] = JobMemorySeries{Job: r.JobID, Points: make([]Point, len(r.Points))}
		for j, p := range r.Points {
			out[i].Points[j] = Point{Time: p.Time, Value: p.Value}
		}
	}
	return out, nil
}

// JobMemoryFlux returns the Flux program that answers q: the process
// samples of the jobs, summed per job, GPU and sample time, then the most
// of each window per job. (Summing each process's window maxima instead
// was 2 to 2.5 times faster on InfluxDB 1.8 at 1,000 running jobs, but is
// only an upper bound when a job runs several processes on one GPU.)
func (q *InfluxQuery) JobMemoryFlux(jq JobMemoryQuery) string {
	var b strings.Builder
	q.processSamplesFlux(&b, jq.Jobs, jq.Start, jq.End)
	b.WriteString("  |> toFloat()\n")
	b.WriteString("  |> group(columns: [\"job_id\", \"gpu_uuid\", \"_time\", \"_start\", \"_stop\"])\n")
	b.WriteString("  |> sum()\n")
	b.WriteString("  |> group(columns: [\"job_id\", \"_start\", \"_stop\"])\n")
	b.WriteString("  |> sort(columns: [\"_time\"])\n")
	fmt.Fprintf(&b, "  |> aggregateWindow(every: %dns, fn: max, createEmpty: false, timeSrc: \"_start\")\n", jq.Step.Nanoseconds())
	return b.String()
}

// processSamplesFlux writes the start of a Flux program that reads the
// memory samples of jobs' processes over [start, end): of the jobs named
// (filtered in Flux up to maxFluxJobFilter of them), or of every job.
func (q *InfluxQuery) processSamplesFlux(b *strings.Builder, jobs []string, start, end time.Time) {
	stop := end.UTC().Format(time.RFC3339Nano)
	fmt.Fprintf(b, "from(bucket: %s)\n", strconv.Quote(q.o.Bucket))
	fmt.Fprintf(b, "  |> range(start: %s, stop: %s)\n", start.UTC().Format(time.RFC3339Nano), stop)
	// InfluxDB 1.8 returns points at the stop time too: keep [start, end).
	fmt.Fprintf(b, "  |> filter(fn: (r) => r._measurement == %s and r._field == \"mem_used_bytes\" and r._time < %s and exists r.job_id)\n",
		strconv.Quote(MeasurementProcess), stop)
	if len(jobs) > 0 && len(jobs) <= maxFluxJobFilter {
		b.WriteString("  |> filter(fn: (r) => ")
		for i, j := range jobs {
			if i > 0 {
				b.WriteString(" or ")
			}
			fmt.Fprintf(b, "r.job_id == %s", strconv.Quote(j))
		}
		b.WriteString(")\n")
	}
}

// maxFluxJobFilter is the most jobs the Flux program filters on: Flux
// evaluates the filter row by row (with 1,000 jobs, reading 5 minutes of a
// 1,000-GPU fleet took 3 to 4 times longer than reading it all), so more
// are filtered here, after the read.
const maxFluxJobFilter = 16

// filterAfterRead is the jobs a Flux read did not filter on (more than
// maxFluxJobFilter), to keep from what it returns; nil when it filtered.
func filterAfterRead(jobs []string) map[string]bool {
	if len(jobs) <= maxFluxJobFilter {
		return nil
	}
	want := make(map[string]bool, len(jobs))
	for _, j := range jobs {
		want[j] = true
	}
	return want
}

// JobMemory runs the Flux program and gathers one series per job, ordered
// by job ID.
func (q *InfluxQuery) JobMemory(ctx context.Context, jq JobMemoryQuery) ([]JobMemorySeries, error) {
	if err := jq.Validate(); err != nil {
		return nil, fmt.Errorf("job memory query: %w", err)
	}
	res, err := q.client.QueryAPI(q.o.Org).Query(ctx, q.JobMemoryFlux(jq))
	if err != nil {
		return nil, fmt.Errorf("job memory query: influx %s: %w", q.o.URL, err)
	}
	defer res.Close()
	want := filterAfterRead(jq.Jobs)
	byJob := map[string]int{}
	var out []JobMemorySeries
	for res.Next() {
		r := res.Record()
		job, _ := r.ValueByKey("job_id").(string)
		v, ok := r.Value().(float64)
		if !ok || job == "" || (want != nil && !want[job]) {
			continue
		}
		i, seen := byJob[job]
		if !seen {
			i = len(out)
			byJob[job] = i
			out = append(out, JobMemorySeries{Job: job})
		}
		out[i].Points = append(out[i].Points, Point{Time: r.Time().UTC(), Value: v})
	}
	if err := res.Err(); err != nil {
		return nil, fmt.Errorf("job memory query: influx %s: %w", q.o.URL, err)
	}
	slices.SortFunc(out, func(a, b JobMemorySeries) int { return strings.Compare(a.Job, b.Job) })
	return out, nil
}

// JobGPUStore answers on which GPUs jobs' processes ran, from the
// gpu_process measurement: the control plane finds by it the GPUs of a job
// whose backend does not name them (on Kubernetes the device plugin, not
// the scheduler, picks a pod's GPUs).
type JobGPUStore interface {
	JobGPUs(ctx context.Context, q JobGPUsQuery) (map[string][]string, error)
}

// JobGPUsQuery asks, for jobs, the GPUs (UUIDs) their processes were
// sampled on over [Start, End).
type JobGPUsQuery struct {
	Jobs       []string // job IDs; none means every job a process was known to belong to
	Start, End time.Time
}

// Validate checks the query.
func (q JobGPUsQuery) Validate() error { return validJobsRange(q.Jobs, q.Start, q.End) }

var (
	_ JobGPUStore = (*EmbeddedSink)(nil)
	_ JobGPUStore = (*InfluxQuery)(nil)
)

// JobGPUs answers a job GPU query from the store: each job's GPUs, sorted.
func (s *EmbeddedSink) JobGPUs(ctx context.Context, q JobGPUsQuery) (map[string][]string, error) {
	if err := q.Validate(); err != nil {
		return nil, fmt.Errorf("job GPU query: %w", err)
	}
	return s.st.QueryJobGPUs(ctx, q.Jobs, q.Start, q.End)
}

// JobGPUsFlux returns the Flux program that answers q: the last process
// sample of each job and GPU.
func (q *InfluxQuery) JobGPUsFlux(jq JobGPUsQuery) string {
	var b strings.Builder
	q.processSamplesFlux(&b, jq.Jobs, jq.Start, jq.End)
	b.WriteString("  |> keep(columns: [\"_time\", \"_value\", \"job_id\", \"gpu_uuid\"])\n")
	b.WriteString("  |> group(columns: [\"job_id\", \"gpu_uuid\"])\n")
	b.WriteString("  |> last()\n")
	return b.String()
}

// JobGPUs runs the Flux program and gathers each job's GPUs, sorted.
func (q *InfluxQuery) JobGPUs(ctx context.Context, jq JobGPUsQuery) (map[string][]string, error) {
	if err := jq.Validate(); err != nil {
		return nil, fmt.Errorf("job GPU query: %w", err)
	}
	res, err := q.client.QueryAPI(q.o.Org).Query(ctx, q.JobGPUsFlux(jq))
	if err != nil {
		return nil, fmt.Errorf("job GPU query: influx %s: %w", q.o.URL, err)
	}
	defer res.Close()
	want := filterAfterRead(jq.Jobs)
	out := map[string][]string{}
	for res.Next() {
		r := res.Record()
		job, _ := r.ValueByKey("job_id").(string)
		gpu, _ := r.ValueByKey("gpu_uuid").(string)
		if job == "" || gpu == "" || (want != nil && !want[job]) {
			continue
		}
		out[job] = append(out[job], gpu)
	}
	if err := res.Err(); err != nil {
		return nil, fmt.Errorf("job GPU query: influx %s: %w", q.o.URL, err)
	}
	for _, gpus := range out {
		slices.Sort(gpus)
	}
	return out, nil
}
