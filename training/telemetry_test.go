package training_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/collector"
	"github.com/prescient-sched/prescient/collector/nvml"
	"github.com/prescient-sched/prescient/datasets"
	"github.com/prescient-sched/prescient/internal/influxtest"
	"github.com/prescient-sched/prescient/models"
	"github.com/prescient-sched/prescient/store"
	"github.com/prescient-sched/prescient/training"
)

// fleetHistory is a synthetic history as the job store holds it before
// anyone has recorded peaks (every PeakGPUMemoryBytes zero), with the
// telemetry the collector took of it: each finished job's process on its
// GPU, sampled at its start, middle and end, peaking in the middle at the
// generator's label (a second process of the job adds a quarter of it at
// the end). Every fifth job left no telemetry. It returns the jobs, the
// samples and the true peaks of the jobs with telemetry.
func fleetHistory(t testing.TB, n int) ([]cluster.Job, []collector.Sample, map[cluster.JobID]int64) {
	t.Helper()
	cfg := datasets.DefaultGenerateConfig()
	cfg.Jobs = n
	jobs, err := datasets.Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	truth := map[cluster.JobID]int64{}
	var samples []collector.Sample
	for i := range jobs {
		j := &jobs[i]
		peak := j.Outcome.PeakGPUMemoryBytes
		j.Outcome.PeakGPUMemoryBytes = 0
		if !j.State.Terminal() || j.StartTime.IsZero() || peak <= 0 || i%5 == 0 {
			continue
		}
		truth[j.ID] = peak
		uuid := "GPU-" + string(j.ID)
		for k, v := range []int64{peak / 2, peak, peak / 2} {
			s := collector.Sample{Time: j.StartTime.Add(time.Duration(k) * j.EndTime.Sub(j.StartTime) / 2), Node: "node-1",
				DeviceInfo:   nvml.DeviceInfo{UUID: uuid, Model: "NVIDIA A100-SXM4-80GB", MemoryTotalBytes: 80 << 30},
				DeviceSample: nvml.DeviceSample{UtilGPUPct: 90, MemUsedBytes: uint64(v), MemTotalBytes: 80 << 30},
				Processes:    []collector.ProcessSample{{PID: 100, JobID: string(j.ID), MemUsedBytes: uint64(v)}}}
			if k == 2 {
				s.Processes = append(s.Processes, collector.ProcessSample{PID: 101, JobID: string(j.ID), MemUsedBytes: uint64(peak / 4)})
			}
			samples = append(samples, s)
		}
	}
	return jobs, samples, truth
}

func embeddedTelemetry(t testing.TB, samples []collector.Sample) (*store.Store, *collector.EmbeddedSink) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "p.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	emb := collector.NewEmbeddedSink(st)
	if err := emb.Write(ctx, samples); err != nil {
		t.Fatal(err)
	}
	return st, emb
}

// influxTelemetry writes samples to a bucket of their own (named from
// prefix) of the shared InfluxDB and returns a query of it; both close
// when the test ends.
func influxTelemetry(t testing.TB, prefix string, samples []collector.Sample) *collector.InfluxQuery {
	t.Helper()
	srv := influxtest.Shared(t)
	o := collector.InfluxOptions{URL: srv.URL, Bucket: fmt.Sprintf("%s_%d/autogen", prefix, time.Now().UnixNano())}
	sink, err := collector.NewInfluxSink(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sink.Close() })
	if err := sink.Write(context.Background(), samples); err != nil {
		t.Fatal(err)
	}
	iq, err := collector.NewInfluxQuery(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(iq.Close)
	return iq
}

// Peaks come out of telemetry as they went in, from InfluxDB and from the
// embedded store alike; jobs without telemetry stay unlabelled.
func TestFillPeakMemoryFromTelemetry(t *testing.T) {
	ctx := context.Background()
	jobs, samples, truth := fleetHistory(t, 600)
	_, emb := embeddedTelemetry(t, samples)
	iq := influxTelemetry(t, "peaks", samples)
	for name, src := range map[string]training.JobMemoryReader{"embedded": emb, "influxdb": iq} {
		t.Run(name, func(t *testing.T) {
			got := append([]cluster.Job(nil), jobs...)
			fill, err := training.FillPeakMemory(ctx, src, got)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d jobs, %d without a peak, %d filled from telemetry in %d queries", len(got), fill.Candidates, fill.Filled, fill.Queries)
			if fill.Filled != len(truth) || fill.Candidates <= fill.Filled {
				t.Fatalf("filled %d of %d candidates; want the %d with telemetry", fill.Filled, fill.Candidates, len(truth))
			}
			for _, j := range got {
				if want := truth[j.ID]; j.Outcome.PeakGPUMemoryBytes != want {
					t.Fatalf("job %s: peak %d, want %d", j.ID, j.Outcome.PeakGPUMemoryBytes, want)
				}
			}
		})
	}
	t.Run("a peak the job store recorded is kept", func(t *testing.T) {
		got := append([]cluster.Job(nil), jobs...)
		var id cluster.JobID
		for i := range got {
			if truth[got[i].ID] > 0 {
				got[i].Outcome.PeakGPUMemoryBytes, id = 7, got[i].ID
				break
			}
		}
		if _, err := training.FillPeakMemory(ctx, emb, got); err != nil {
			t.Fatal(err)
		}
		for _, j := range got {
			if j.ID == id && j.Outcome.PeakGPUMemoryBytes != 7 {
				t.Fatalf("job %s: recorded peak 7 replaced by %d", id, j.Outcome.PeakGPUMemoryBytes)
			}
		}
	})
}

// Retraining learns memory from the fleet's telemetry: without it the job
// store's history has no memory labels and only duration is published.
func TestRetrainLearnsMemoryFromTelemetry(t *testing.T) {
	ctx := context.Background()
	jobs, samples, truth := fleetHistory(t, 3000)
	_, emb := embeddedTelemetry(t, samples)
	st := &pagedStore{jobs: jobs}
	cfg := training.Config{Learners: quick, Seed: 1}

	without := training.Registry{Dir: t.TempDir()}
	if err := training.Retrain(ctx, st, nil, without, cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := without.Current(models.TargetMemory); err == nil {
		t.Fatal("a memory model was published from a history without memory labels")
	}
	with := training.Registry{Dir: t.TempDir()}
	start := time.Now()
	if err := training.Retrain(ctx, st, emb, with, cfg); err != nil {
		t.Fatal(err)
	}
	t.Logf("retrained on %d jobs (%d with telemetry peaks) in %s", len(jobs), len(truth), time.Since(start).Round(time.Millisecond))
	art, err := with.LoadCurrent(models.TargetMemory)
	if err != nil {
		t.Fatalf("no memory model published from telemetry: %v", err)
	}
	if art.Rows < len(truth)*8/10 || art.Rows > len(truth) {
		t.Errorf("memory model trained on %d rows; %d jobs had telemetry peaks", art.Rows, len(truth))
	}
	for i := range jobs {
		if jobs[i].Outcome.PeakGPUMemoryBytes != 0 {
			t.Fatal("Retrain changed the job store's jobs")
		}
	}
}

// Peaks of 10,000 finished jobs (8,000 with telemetry) from the embedded
// store, as every retraining reads them.
func BenchmarkFillPeakMemory10kJobs(b *testing.B) {
	jobs, samples, truth := fleetHistory(b, 10000)
	_, emb := embeddedTelemetry(b, samples)
	for b.Loop() {
		got := append([]cluster.Job(nil), jobs...)
		fill, err := training.FillPeakMemory(context.Background(), emb, got)
		if err != nil || fill.Filled != len(truth) {
			b.Fatalf("filled %d of %d: %v", fill.Filled, len(truth), err)
		}
		b.ReportMetric(float64(fill.Queries), "queries/op")
	}
}
