package leastlostwork

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
)

func TestLongerComparesTheLastKeyElementWithinTheSameClass(t *testing.T) {
	l, err := New(Args{ShorterBy: 2, Margin: 600})
	if err != nil {
		t.Fatal(err)
	}
	job := executor.Key{0, 2, 600}
	for _, tc := range []struct {
		victim executor.Key
		want   bool
	}{
		{executor.Key{0, 2, 1800}, true},  // 2 × 600 + 600
		{executor.Key{0, 2, 1799}, false}, // not enough longer
		{executor.Key{0, 1, 9999}, false}, // another class (a starving job)
		{executor.Key{-1, 2, 9999}, false},
	} {
		if got := l.longer(job, tc.victim); got != tc.want {
			t.Errorf("longer(%v, %v) = %v, want %v", job, tc.victim, got, tc.want)
		}
	}
	off, _ := New(Args{})
	if off.longer(job, executor.Key{0, 2, 1e9}) {
		t.Error("ShorterBy 0 preempted by length")
	}
}

func TestArgsAreValidated(t *testing.T) {
	for _, a := range []Args{{MinRun: -time.Second}, {ShorterBy: 0.5}, {ShorterBy: 2, Margin: -1}} {
		if _, err := New(a); err == nil {
			t.Errorf("New(%+v) accepted", a)
		}
	}
}

// victimsOf runs Victims for a queued job of key jobKey against running jobs
// of the same tier with the given keys, attempts and run times.
func victimsOf(t *testing.T, l *LeastLostWork, jobKey executor.Key, keys []executor.Key, attempts []int, ran []time.Duration) []string {
	t.Helper()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	job := &executor.JobView{Job: &cluster.Job{ID: "queued"}}
	var running []*executor.RunningJob
	for i := range keys {
		running = append(running, &executor.RunningJob{
			JobView: executor.JobView{Job: &cluster.Job{ID: cluster.JobID(fmt.Sprintf("r%d", i)), Attempts: attempts[i]}},
			Started: now.Add(-ran[i]),
		})
	}
	var ids []string
	for _, r := range l.Victims(job, jobKey, executor.NewCandidates(running, keys), &executor.OrderContext{Now: now}, len(running)) {
		ids = append(ids, string(r.Job.ID))
	}
	slices.Sort(ids)
	return ids
}

func TestBackOffDoublesMinRunWithEachAttempt(t *testing.T) {
	l, err := New(Args{MinRun: 10 * time.Minute, ShorterBy: 2, BackOff: true})
	if err != nil {
		t.Fatal(err)
	}
	long := executor.Key{0, 3, 1e6}
	keys := []executor.Key{long, long, long, long}
	attempts := []int{1, 2, 3, 3}
	ran := []time.Duration{15 * time.Minute, 15 * time.Minute, 30 * time.Minute, 45 * time.Minute}
	// r0: first attempt, past 10m; r1: second, under 20m; r2: third, under
	// 40m; r3: third, past 40m.
	if got, want := victimsOf(t, l, executor.Key{0, 3, 60}, keys, attempts, ran), []string{"r0", "r3"}; !slices.Equal(got, want) {
		t.Errorf("victims with back-off = %v, want %v", got, want)
	}
	l.args.BackOff = false
	if got, want := victimsOf(t, l, executor.Key{0, 3, 60}, keys, attempts, ran), []string{"r0", "r1", "r2", "r3"}; !slices.Equal(got, want) {
		t.Errorf("victims without back-off = %v, want %v", got, want)
	}
}

func TestByClassLetsAnEarlierClassDisplaceALaterOne(t *testing.T) {
	l, err := New(Args{ByClass: true})
	if err != nil {
		t.Fatal(err)
	}
	keys := []executor.Key{{0, 3, 60}, {0, 2, 60}, {1, 3, 60}}
	one := []int{1, 1, 1}
	ran := []time.Duration{time.Hour, time.Hour, time.Hour}
	// A class-2 job displaces the class-3 job, not one of its own class,
	// and not one whose key's first element (the tier) differs.
	if got, want := victimsOf(t, l, executor.Key{0, 2, 1e6}, keys, one, ran), []string{"r0"}; !slices.Equal(got, want) {
		t.Errorf("victims by class = %v, want %v", got, want)
	}
	l.args.ByClass = false
	if got := victimsOf(t, l, executor.Key{0, 2, 1e6}, keys, one, ran); len(got) != 0 {
		t.Errorf("victims without ByClass = %v, want none", got)
	}
}

func TestBackOffDoesNotShieldFromHigherTiers(t *testing.T) {
	l, err := New(Args{MinRun: 10 * time.Minute, BackOff: true})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	victim := &executor.RunningJob{
		JobView: executor.JobView{Job: &cluster.Job{ID: "batch", Attempts: 5, Spec: cluster.JobSpec{Tier: cluster.TierBatch}}},
		Started: now.Add(-15 * time.Minute), // under its backed-off 160 min, past MinRun
	}
	job := &executor.JobView{Job: &cluster.Job{ID: "prod", Spec: cluster.JobSpec{Tier: cluster.TierProduction}}}
	got := l.Victims(job, executor.Key{-float64(cluster.TierProduction), 3, 60},
		executor.NewCandidates([]*executor.RunningJob{victim}, []executor.Key{{-float64(cluster.TierBatch), 3, 60}}), &executor.OrderContext{Now: now}, 1)
	if len(got) != 1 {
		t.Errorf("a production job found victims %v, want the batch job whose back-off holds only against its tier", got)
	}
}
