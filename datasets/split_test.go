package datasets

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
)

var t0 = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// jobsAt returns one job per offset (in minutes from t0), IDs j0, j1, ...
func jobsAt(minutes ...int) []cluster.Job {
	jobs := make([]cluster.Job, len(minutes))
	for i, m := range minutes {
		jobs[i] = cluster.NewJob(cluster.JobID(fmt.Sprintf("j%d", i)), cluster.JobSpec{Tier: cluster.DefaultTier}, t0.Add(time.Duration(m)*time.Minute))
	}
	return jobs
}

func ids(jobs []cluster.Job) []string {
	var out []string
	for _, j := range jobs {
		out = append(out, string(j.ID))
	}
	return out
}

func TestSplitByTime(t *testing.T) {
	jobs := jobsAt(5, 0, 10, 20, 10)
	before, after := SplitByTime(jobs, t0.Add(10*time.Minute))
	if got, want := ids(before), []string{"j0", "j1"}; !slices.Equal(got, want) {
		t.Errorf("before = %v, want %v", got, want)
	}
	if got, want := ids(after), []string{"j2", "j3", "j4"}; !slices.Equal(got, want) {
		t.Errorf("a job submitted exactly at the split time goes after: after = %v, want %v", got, want)
	}
	if b, a := SplitByTime(nil, t0); b != nil || a != nil {
		t.Error("splitting nothing gives something")
	}
}

func TestSplitFraction(t *testing.T) {
	tests := []struct {
		name        string
		minutes     []int
		fraction    float64
		train, test []string
		atMinute    int
	}{
		{"the earliest 70% train", []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, 0.7,
			[]string{"j0", "j1", "j2", "j3", "j4", "j5", "j6"}, []string{"j7", "j8", "j9"}, 7},
		{"unsorted input is split by time", []int{9, 8, 7, 6, 5, 4, 3, 2, 1, 0}, 0.5,
			[]string{"j9", "j8", "j7", "j6", "j5"}, []string{"j4", "j3", "j2", "j1", "j0"}, 5},
		{"jobs submitted at the boundary instant all go to test", []int{0, 1, 2, 2, 2, 3}, 0.5,
			[]string{"j0", "j1"}, []string{"j2", "j3", "j4", "j5"}, 2},
		{"a tiny fraction can leave train empty", []int{0, 1}, 0.1,
			nil, []string{"j0", "j1"}, 0},
		{"a fraction near 1 keeps one test job", []int{0, 1, 2}, 0.9999999999999999,
			[]string{"j0", "j1"}, []string{"j2"}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			jobs := jobsAt(tt.minutes...)
			orig := slices.Clone(jobs)
			train, test, at, err := SplitFraction(jobs, tt.fraction)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(ids(train), tt.train) || !slices.Equal(ids(test), tt.test) {
				t.Errorf("train %v test %v, want %v %v", ids(train), ids(test), tt.train, tt.test)
			}
			if want := t0.Add(time.Duration(tt.atMinute) * time.Minute); !at.Equal(want) {
				t.Errorf("at = %v, want %v", at, want)
			}
			if !slices.EqualFunc(jobs, orig, func(a, b cluster.Job) bool { return a.ID == b.ID }) {
				t.Error("the input was reordered")
			}
			if len(train) > 0 {
				train = append(train, cluster.Job{}) // must not overwrite test[0]
				if test[0].ID == "" {
					t.Error("appending to train overwrote test")
				}
			}
		})
	}
}

func TestSplitFractionRejectsBadFractionsAndNoJobs(t *testing.T) {
	for _, f := range []float64{0, 1, -0.5, 1.5, math.NaN()} {
		if _, _, _, err := SplitFraction(jobsAt(0, 1), f); err == nil {
			t.Errorf("fraction %g accepted", f)
		}
	}
	if _, _, _, err := SplitFraction(nil, 0.5); err == nil {
		t.Error("no jobs accepted")
	}
}
