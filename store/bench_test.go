package store

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
)

// BenchmarkSubmitJob measures one durable submit: a transaction with the
// job and its event, and the fsync of synchronous=FULL.
func BenchmarkSubmitJob(b *testing.B) {
	ctx := context.Background()
	s, _ := openTest(b)
	job := fullJob("")
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		job.ID = cluster.JobID(fmt.Sprintf("bench-%09d", i))
		if err := s.SubmitJob(ctx, job); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUpdateJob measures a read-modify-write: a checkpoint of a
// running job, with its event.
func BenchmarkUpdateJob(b *testing.B) {
	ctx := context.Background()
	s, _ := openTest(b)
	mustSubmit(b, s, fullJob("j1"))
	_, err := s.UpdateJob(ctx, "j1", func(j *cluster.Job) (EventType, string, error) {
		return EventStarted, "", j.Transition(cluster.StateRunning, t0.Add(time.Hour))
	})
	if err != nil {
		b.Fatal(err)
	}
	step := int64(0)
	checkpoint := func(j *cluster.Job) (EventType, string, error) {
		step++
		return EventCheckpointed, "", j.Checkpointed(cluster.Checkpoint{Time: t0.Add(2 * time.Hour), Step: step, Path: "/ckpt"})
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.UpdateJob(ctx, "j1", checkpoint); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkListJobs measures reading a page of 500 of 10,000 jobs, in the
// middle of the listing, for everyone and for one tenant's queued jobs.
func BenchmarkListJobs(b *testing.B) {
	s, _ := openTest(b)
	seedJobs(b, s, 10_000, func(i int) cluster.Job {
		j := fullJob(fmt.Sprintf("j%05d", i))
		j.SubmitTime = t0.Add(time.Duration(i) * time.Second)
		j.Spec.Tenant = fmt.Sprintf("tenant-%d", i%4)
		return j
	})
	filters := map[string]JobFilter{
		"all":              {Limit: 500, After: "j05000"},
		"tenant-and-state": {Limit: 500, Tenant: "tenant-1", States: []cluster.JobState{cluster.StateQueued}},
	}
	for name, f := range filters {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				jobs, err := s.ListJobs(context.Background(), f)
				if err != nil || len(jobs) != 500 {
					b.Fatalf("ListJobs: %d jobs, %v", len(jobs), err)
				}
			}
		})
	}
}

// BenchmarkSubmitJobConcurrent is BenchmarkSubmitJob from 4 goroutines
// per CPU: their submissions share transactions (group commit).
func BenchmarkSubmitJobConcurrent(b *testing.B) {
	ctx := context.Background()
	s, _ := openTest(b)
	var next atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(4)
	b.RunParallel(func(pb *testing.PB) {
		job := fullJob("")
		for pb.Next() {
			job.ID = cluster.JobID(fmt.Sprintf("bench-%09d", next.Add(1)))
			if err := s.SubmitJob(ctx, job); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
}
