package executor

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
)

func TestRemainingRaisesOutlivedEstimates(t *testing.T) {
	const h = time.Hour
	for _, tc := range []struct {
		name             string
		est, done, limit time.Duration
		want             time.Duration
	}{
		{"within the estimate", 2 * h, h, 4 * h, h},
		{"no limit: a second", 2 * h, 3 * h, 0, time.Second},
		{"just past: a minute more", 2 * h, 2 * h, 4 * h, time.Minute},
		{"past by 10 min: to 15 min past", 2 * h, 2*h + 10*time.Minute, 4 * h, 5 * time.Minute},
		{"past by 3 h: never past the limit", 2 * h, 2*h + 3*h/2, 4 * h, h / 2},
		{"at its limit: a second", 2 * h, 4 * h, 4 * h, time.Second},
		{"past every step", time.Minute, 200 * h, 300 * h, 100 * h},
	} {
		if got := Remaining(tc.est, tc.done, tc.limit); got != tc.want {
			t.Errorf("%s: Remaining(%s, %s, %s) = %s, want %s", tc.name, tc.est, tc.done, tc.limit, got, tc.want)
		}
	}
}

func TestUserEstimates(t *testing.T) {
	limited := &cluster.Job{ID: "a", Spec: cluster.JobSpec{TimeLimit: 90 * time.Minute}}
	free := &cluster.Job{ID: "b"}
	fc, err := UserEstimates{}.Forecast(context.Background(), []*cluster.Job{limited})
	if err != nil || fc[0].DurationP50 != 90*time.Minute || fc[0].DurationP90 != 90*time.Minute {
		t.Fatalf("user estimates: %+v, %v", fc, err)
	}
	if _, err := (UserEstimates{}).Forecast(context.Background(), []*cluster.Job{free}); err == nil || !strings.Contains(err.Error(), "job b has no time limit") {
		t.Fatalf("a job without a limit: %v", err)
	}
	fc, err = UserEstimates{Default: 48 * time.Hour}.Forecast(context.Background(), []*cluster.Job{limited, free})
	if err != nil || fc[0].DurationP50 != 90*time.Minute || fc[1].DurationP90 != 48*time.Hour {
		t.Fatalf("with a default: %+v, %v", fc, err)
	}
}
