package models_test

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/cluster/clustertest"
	"github.com/prescient-sched/prescient/models"
)

var t0 = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// finished is a succeeded job of tenant with gpus that ran for run,
// submitted at submit (Philly style: no start or end time).
func finished(id, tenant string, gpus int, submit time.Time, run time.Duration) cluster.Job {
	j := clustertest.Job(id).Tenant(tenant).GPUs(gpus).Obj()
	j.SubmitTime = submit
	j.State, j.Attempts, j.Outcome.RunTime = cluster.StateSucceeded, 1, run
	return j
}

func column(t *testing.T, name string) int {
	t.Helper()
	i := slices.Index(models.FeatureConfig{Target: models.TargetDuration}.FeatureNames(), name)
	if i < 0 {
		t.Fatalf("no feature %q", name)
	}
	return i
}

func TestFeatures(t *testing.T) {
	fc := models.DefaultFeatureConfig(models.TargetDuration)
	fc.Relative = false // the levels themselves; see the relative subtest
	q50 := column(t, "tenant_gpus_q50")
	count := column(t, "tenant_gpus_count_log")
	cmp := column(t, models.FeatureComparableQ50)

	t.Run("a job sees only the jobs that ended before it was submitted", func(t *testing.T) {
		early := finished("early", "a", 1, t0, time.Hour)                      // ends t0+1h
		late := finished("late", "a", 1, t0.Add(time.Minute), 10*time.Hour)    // ends t0+10h
		query := finished("query", "a", 1, t0.Add(2*time.Hour), 5*time.Minute) // submitted t0+2h
		rows := fc.Rows([]cluster.Job{late, early, query}, []cluster.Job{query})
		if got, want := rows[0][q50], models.Log(3600); got != want {
			t.Fatalf("tenant_gpus_q50 = %v, want log(3600) = %v: the job still running (late) or the query itself leaked in", got, want)
		}
	})
	t.Run("a job ending exactly at the submit time is not yet known", func(t *testing.T) {
		a := finished("a", "a", 1, t0, time.Hour)
		q := finished("q", "a", 1, t0.Add(time.Hour), time.Minute)
		rows := fc.Rows([]cluster.Job{a, q}, []cluster.Job{q})
		if rows[0][count] != 0 {
			t.Fatalf("count = %v, want 0", rows[0][count])
		}
	})
	t.Run("rows computed in one sweep equal the live history's rows", func(t *testing.T) {
		var jobs []cluster.Job
		for i := range 200 {
			jobs = append(jobs, finished(string(rune('A'+i%26))+string(rune('a'+i/26)), []string{"a", "b", "c"}[i%3], 1<<(i%4),
				t0.Add(time.Duration(i)*7*time.Minute), time.Duration(1+(i*37)%300)*time.Minute))
		}
		rows := fc.Rows(jobs, jobs)
		last := jobs[len(jobs)-1]
		// The live history hears of jobs as they end.
		byEnd := slices.Clone(jobs)
		slices.SortStableFunc(byEnd, func(a, b cluster.Job) int { return models.EndTime(&a).Compare(models.EndTime(&b)) })
		h := models.NewHistory(fc)
		for i := range byEnd {
			if models.EndTime(&byEnd[i]).Before(last.SubmitTime) {
				h.Observe(&byEnd[i])
			}
		}
		live := h.Features(nil, &last)
		if !slices.Equal(rows[len(rows)-1], live) {
			t.Fatalf("sweep row differs from the live history's row:\n%v\n%v", rows[len(rows)-1], live)
		}
	})
	t.Run("comparable jobs fall back to the tenant when the GPU count is new", func(t *testing.T) {
		var hist []cluster.Job
		for i := range 5 {
			hist = append(hist, finished("h"+string(rune('0'+i)), "a", 1, t0.Add(time.Duration(i)*time.Minute), 100*time.Second))
		}
		q := finished("q", "a", 8, t0.Add(time.Hour), time.Minute)
		rows := fc.Rows(hist, []cluster.Job{q})
		if got, want := rows[0][cmp], models.Log(100); got != want {
			t.Fatalf("comparable_q50 = %v, want the tenant's log(100) = %v", got, want)
		}
	})
	t.Run("every row has the advertised width", func(t *testing.T) {
		rows := fc.Rows(nil, []cluster.Job{finished("x", "a", 1, t0, time.Second)})
		if len(rows[0]) != fc.NumFeatures() || len(fc.FeatureNames()) != fc.NumFeatures() {
			t.Fatalf("row of %d, %d names, NumFeatures %d", len(rows[0]), len(fc.FeatureNames()), fc.NumFeatures())
		}
	})
	t.Run("relative rows are the levels less comparable_q50, the comparable quantiles kept", func(t *testing.T) {
		var jobs []cluster.Job
		for i := range 60 {
			jobs = append(jobs, finished(fmt.Sprint("j", i), []string{"a", "b"}[i%2], 1<<(i%3),
				t0.Add(time.Duration(i)*11*time.Minute), time.Duration(1+(i*53)%200)*time.Minute))
		}
		rel := fc
		rel.Relative = true
		absRows, relRows := fc.Rows(jobs, jobs), rel.Rows(jobs, jobs)
		absNames, relNames := fc.FeatureNames(), rel.FeatureNames()
		for i := range jobs {
			for c, name := range relNames {
				want := absRows[i][c]
				if name != absNames[c] {
					if name != absNames[c]+"_rel" {
						t.Fatalf("column %d: %q beside %q", c, name, absNames[c])
					}
					want -= absRows[i][cmp]
				}
				if got := relRows[i][c]; math.Abs(got-want) > 1e-12 {
					t.Fatalf("job %d, %s = %v, want %v", i, name, got, want)
				}
			}
		}
		if slices.Equal(absNames, relNames) || !slices.Contains(relNames, models.FeatureComparableQ50) {
			t.Fatalf("relative names %v", relNames)
		}
	})
}
