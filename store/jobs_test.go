package store

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
)

func TestSubmitJobRoundTripsEveryField(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	berlin := time.FixedZone("CET", 3600)
	jobs := []cluster.Job{
		fullJob("full"),
		testJob("minimal").Obj(),
		testJob("local-times").Submitted(t0.In(berlin)).Deadline(t0.Add(time.Hour).In(berlin)).Obj(),
		testJob("cpu-only").GPUs(0).Obj(),
		testJob("before-1970").Submitted(time.Date(1969, 7, 20, 20, 17, 40, 1, time.UTC)).Obj(),
	}
	jobs[3].Spec.GPUMilli = 0
	mustSubmit(t, s, jobs...)
	for _, want := range jobs {
		got, err := s.GetJob(ctx, want.ID)
		if err != nil {
			t.Fatalf("GetJob(%s): %v", want.ID, err)
		}
		if !sameJob(got, want) {
			t.Errorf("GetJob(%s) =\n%+v\nwant\n%+v", want.ID, got, want)
		}
		if got.SubmitTime.Location() != time.UTC {
			t.Errorf("GetJob(%s).SubmitTime is in %v, want UTC", want.ID, got.SubmitTime.Location())
		}
	}
}

func TestSubmitJobRecordsSubmittedEvent(t *testing.T) {
	s, _ := openTest(t)
	mustSubmit(t, s, testJob("j1").Obj())
	events, err := s.Events(context.Background(), "j1")
	if err != nil {
		t.Fatal(err)
	}
	want := []Event{{ID: events[0].ID, JobID: "j1", Time: t0, Type: EventSubmitted, To: cluster.StateQueued}}
	if !reflect.DeepEqual(events, want) {
		t.Errorf("Events = %+v, want %+v", events, want)
	}
}

func TestSubmitJobRejects(t *testing.T) {
	tests := []struct {
		name string
		job  cluster.Job
		is   error
	}{
		{"a second job with a stored ID", testJob("dup").Obj(), ErrExists},
		{"a job that is not queued", testJob("running").State(cluster.StateRunning).Obj(), nil},
		{"a job without an ID", testJob("").Obj(), nil},
		{"a job with an invalid tier", testJob("bad-tier").Tier(cluster.Tier(9)).Obj(), nil},
		{"a job without a submit time", testJob("no-submit").Submitted(time.Time{}).Obj(), nil},
		{"a deadline the store cannot hold", testJob("far").Deadline(time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)).Obj(), nil},
	}
	ctx := context.Background()
	s, _ := openTest(t)
	mustSubmit(t, s, testJob("dup").Obj())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := s.SubmitJob(ctx, tt.job)
			if err == nil {
				t.Fatal("SubmitJob succeeded, want an error")
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("SubmitJob: %v, want an error wrapping %v", err, tt.is)
			}
			t.Logf("error: %v", err)
		})
	}
	if n := count(t, s, "SELECT COUNT(*) FROM jobs"); n != 1 {
		t.Errorf("%d jobs stored, want only the first dup", n)
	}
	if n := count(t, s, "SELECT COUNT(*) FROM job_events"); n != 1 {
		t.Errorf("%d events stored, want only the first dup's", n)
	}
}

func TestGetJobAndEventsOfMissingJob(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	if _, err := s.GetJob(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetJob: %v, want ErrNotFound", err)
	}
	if _, err := s.Events(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Events: %v, want ErrNotFound", err)
	}
	if _, err := s.JobTenant(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("JobTenant: %v, want ErrNotFound", err)
	}
	mustSubmit(t, s, testJob("yes").Tenant("team-a").Obj())
	if tenant, err := s.JobTenant(ctx, "yes"); err != nil || tenant != "team-a" {
		t.Errorf("JobTenant(yes) = %q, %v; want team-a", tenant, err)
	}
}

func TestListJobs(t *testing.T) {
	s, _ := openTest(t)
	// Submitted out of order; b1 and a2 share a submit time, so the ID breaks the tie.
	mustSubmit(t, s,
		testJob("c1").Tenant("c").Submitted(t0.Add(3*time.Minute)).Obj(),
		testJob("b1").Tenant("b").Submitted(t0.Add(time.Minute)).Obj(),
		testJob("a2").Tenant("a").Submitted(t0.Add(time.Minute)).Obj(),
		testJob("a1").Tenant("a").Submitted(t0).Obj(),
		testJob("a3").Tenant("a").Submitted(t0.Add(2*time.Minute)).Obj(),
	)
	start := func(j *cluster.Job) (EventType, string, error) {
		return EventStarted, "", j.Transition(cluster.StateRunning, t0.Add(time.Hour))
	}
	for _, id := range []cluster.JobID{"a2", "c1"} {
		if _, err := s.UpdateJob(context.Background(), id, start); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name   string
		filter JobFilter
		want   []cluster.JobID
	}{
		{"everything in submit order, ties by ID", JobFilter{}, []cluster.JobID{"a1", "a2", "b1", "a3", "c1"}},
		{"one tenant", JobFilter{Tenant: "a"}, []cluster.JobID{"a1", "a2", "a3"}},
		{"one state", JobFilter{States: []cluster.JobState{cluster.StateRunning}}, []cluster.JobID{"a2", "c1"}},
		{"several states", JobFilter{States: []cluster.JobState{cluster.StateQueued, cluster.StateRunning}}, []cluster.JobID{"a1", "a2", "b1", "a3", "c1"}},
		{"tenant and state", JobFilter{Tenant: "a", States: []cluster.JobState{cluster.StateQueued}}, []cluster.JobID{"a1", "a3"}},
		{"a limit", JobFilter{Limit: 2}, []cluster.JobID{"a1", "a2"}},
		{"after a job with a tied submit time", JobFilter{After: "a2"}, []cluster.JobID{"b1", "a3", "c1"}},
		{"after, within a tenant", JobFilter{Tenant: "a", After: "a1", Limit: 1}, []cluster.JobID{"a2"}},
		{"after the last job", JobFilter{After: "c1"}, []cluster.JobID{}},
		{"a tenant with no jobs", JobFilter{Tenant: "z"}, []cluster.JobID{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			jobs, err := s.ListJobs(context.Background(), tt.filter)
			if err != nil {
				t.Fatal(err)
			}
			if got := ids(jobs); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ListJobs(%+v) = %v, want %v", tt.filter, got, tt.want)
			}
		})
	}
}

func TestListJobsPagesThroughEveryJobOnce(t *testing.T) {
	s, _ := openTest(t)
	var want []cluster.JobID
	seedJobs(t, s, 95, func(i int) cluster.Job {
		// Ten jobs per submit time, so pages break inside ties.
		j := testJob(fmt.Sprintf("j%03d", i)).Submitted(t0.Add(time.Duration(i/10) * time.Second)).Obj()
		want = append(want, j.ID)
		return j
	})
	var got []cluster.JobID
	f := JobFilter{Limit: 7}
	for {
		page, err := s.ListJobs(context.Background(), f)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ids(page)...)
		if len(page) < f.Limit {
			break
		}
		f.After = page[len(page)-1].ID
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("pages = %v\nwant %v", got, want)
	}
}

func TestListJobsRejects(t *testing.T) {
	s, _ := openTest(t)
	tests := []struct {
		name   string
		filter JobFilter
		is     error
	}{
		{"a negative limit", JobFilter{Limit: -1}, nil},
		{"an unknown state", JobFilter{States: []cluster.JobState{"sleeping"}}, nil},
		{"a cursor that is not a stored job", JobFilter{After: "nope"}, ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.ListJobs(context.Background(), tt.filter)
			if err == nil || (tt.is != nil && !errors.Is(err, tt.is)) {
				t.Errorf("ListJobs(%+v): %v, want an error wrapping %v", tt.filter, err, tt.is)
			}
		})
	}
}

// TestListedSpecsAreTheCallersOwn lists the same jobs twice (the second
// time from the decoded-spec cache): the two listings are equal, and
// changing what the first returned changes neither the second nor the
// store.
func TestListedSpecsAreTheCallersOwn(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	mustSubmit(t, s, fullJob("j1"))
	first, err := s.ListJobs(ctx, JobFilter{})
	if err != nil || len(first) != 1 {
		t.Fatalf("ListJobs: %d jobs, %v", len(first), err)
	}
	want := first[0].Clone()
	first[0].Spec.Labels["changed"] = "yes"
	first[0].Spec.GPUModels[0] = "changed"
	first[0].Spec.Data.Nodes[0] = "changed"
	second, err := s.ListJobs(ctx, JobFilter{})
	if err != nil || len(second) != 1 {
		t.Fatalf("ListJobs again: %d jobs, %v", len(second), err)
	}
	if !reflect.DeepEqual(second[0], want) {
		t.Errorf("second listing:\n%+v\nwant\n%+v", second[0], want)
	}
}
