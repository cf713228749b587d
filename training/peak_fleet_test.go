package training_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/collector"
	"github.com/prescient-sched/prescient/collector/nvml"
	"github.com/prescient-sched/prescient/models"
	"github.com/prescient-sched/prescient/training"
)

// longJobs are n finished jobs of 3 hours whose process's GPU memory,
// sampled every minute, climbs towards a job's own ceiling at its own
// pace (the shape that makes "peak so far" a poor reservation early on).
// It returns the jobs, the samples and each job's true peak.
func longJobs(t testing.TB, n int) ([]cluster.Job, []collector.Sample, map[cluster.JobID]float64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, 11))
	t0 := time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)
	var jobs []cluster.Job
	var samples []collector.Sample
	peaks := map[cluster.JobID]float64{}
	for i := range n {
		id := cluster.JobID(fmt.Sprintf("long-%03d", i))
		start := t0.Add(time.Duration(i) * 7 * time.Minute)
		end := start.Add(3 * time.Hour)
		ceiling := (10 + 50*rng.Float64()) * (1 << 30)
		tau := 20 + 70*rng.Float64() // minutes
		jobs = append(jobs, cluster.Job{ID: id, State: cluster.StateSucceeded, SubmitTime: start, StartTime: start, EndTime: end,
			Spec: cluster.JobSpec{Tenant: "t", GPUs: 1, GPUMilli: cluster.MilliGPU}})
		for m := 0; m <= 180; m++ {
			v := ceiling * (1 - 0.7*math.Exp(-float64(m)/tau)) * (1 + 0.02*rng.NormFloat64())
			peaks[id] = math.Max(peaks[id], float64(uint64(v)))
			samples = append(samples, collector.Sample{Time: start.Add(time.Duration(m) * time.Minute), Node: "node-1",
				DeviceInfo:   nvml.DeviceInfo{UUID: "GPU-" + string(id), Model: "NVIDIA A100-SXM4-80GB", MemoryTotalBytes: 80 << 30},
				DeviceSample: nvml.DeviceSample{MemUsedBytes: uint64(v), MemTotalBytes: 80 << 30},
				Processes:    []collector.ProcessSample{{PID: 100, JobID: string(id), MemUsedBytes: uint64(v)}}})
		}
	}
	return jobs, samples, peaks
}

// The peak refinement learns from the fleet's own finished jobs: their
// series come out of telemetry whole, a first version is published, and a
// retraining on the same history passes the gate (not worse).
func TestRetrainPeakLearnsFromTheFleetBehindAGate(t *testing.T) {
	ctx := context.Background()
	jobs, samples, peaks := longJobs(t, 200)
	short := cluster.Job{ID: "short", State: cluster.StateSucceeded, StartTime: jobs[0].StartTime,
		EndTime: jobs[0].StartTime.Add(time.Hour)} // too short to learn from
	jobs = append(jobs, short)
	_, emb := embeddedTelemetry(t, samples)
	pc := training.DefaultPeakConfig()
	series, err := training.FleetPeakSeries(ctx, emb, jobs, pc.Window, training.PeakSeriesStep)
	if err != nil {
		t.Fatal(err)
	}
	if len(series) != 200 {
		t.Fatalf("%d series; want one per long job (200)", len(series))
	}
	for _, s := range series {
		peak := 0.0
		for _, v := range s.Values {
			peak = math.Max(peak, v)
		}
		if len(s.Values) < 170 || math.Abs(peak-peaks[cluster.JobID(s.ID)]) > 1 {
			t.Fatalf("series %s: %d points, peak %.0f; want about 181 and %.0f", s.ID, len(s.Values), peak, peaks[cluster.JobID(s.ID)])
		}
	}

	reg := training.Registry{Dir: t.TempDir()}
	pc.Learners = []string{models.GlobalMedianName, models.ForestName}
	first, err := training.RetrainPeak(ctx, pc, series, reg)
	if err != nil {
		t.Fatal(err)
	}
	if first.Published == nil || !*first.Published || first.ModelVersion != 1 || first.Gate != "no serving model" {
		t.Fatalf("first retraining: published %v, version %d, gate %q; want version 1 with no serving model", first.Published,
			first.ModelVersion, first.Gate)
	}
	m := first.Models[models.ForestName]
	t.Logf("forest: p90_coverage %.3f, reservation %.3f × peak-so-far×1.2; peak so far covers %.3f", m["p90_coverage"],
		m["mean_reservation_vs_peak_x1_2"], first.Baselines["peak_so_far"]["p90_coverage"])
	if m["p90_coverage"] <= first.Baselines["peak_so_far"]["p90_coverage"] {
		t.Errorf("the refinement covers %.3f of the peaks, no more than the peak so far (%.3f)", m["p90_coverage"],
			first.Baselines["peak_so_far"]["p90_coverage"])
	}
	// The forest's fit varies from run to run: the retraining is published
	// when it is not worse than version 1 on the same windows, refused
	// when it is, and the registry serves what the gate said.
	again, err := training.RetrainPeak(ctx, pc, series, reg)
	if err != nil {
		t.Fatal(err)
	}
	cur, err := reg.Current(models.TargetPeak)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("second retraining: %s", again.Gate)
	switch {
	case strings.HasPrefix(again.Gate, "passed: "):
		if !*again.Published || again.ModelVersion != 2 || cur != 2 {
			t.Errorf("passed the gate: published %v, version %d, serving %d; want version 2 serving", *again.Published, again.ModelVersion, cur)
		}
	case strings.HasPrefix(again.Gate, "refused: "):
		if *again.Published || cur != 1 {
			t.Errorf("refused by the gate: published %v, serving %d; want version 1 still serving", *again.Published, cur)
		}
	default:
		t.Errorf("gate %q: want passed or refused against version 1", again.Gate)
	}
}

// The series of 1,000 finished 3-hour jobs (181,000 samples over 5 days)
// from the embedded store, as a retraining reads them.
func BenchmarkFleetPeakSeries1kJobs(b *testing.B) {
	jobs, samples, _ := longJobs(b, 1000)
	_, emb := embeddedTelemetry(b, samples)
	w := training.DefaultPeakConfig().Window
	for b.Loop() {
		series, err := training.FleetPeakSeries(context.Background(), emb, jobs, w, training.PeakSeriesStep)
		if err != nil || len(series) != 1000 {
			b.Fatalf("%d series: %v", len(series), err)
		}
	}
}
