package store

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
)

func TestForecastsRoundTripAndReplace(t *testing.T) {
	ctx := context.Background()
	c := &clock{now: t0.Add(time.Hour)}
	s, _ := openTest(t, WithClock(c.Now))
	var ids []cluster.JobID
	seedJobs(t, s, 1200, func(i int) cluster.Job {
		id := fmt.Sprintf("j%04d", i)
		ids = append(ids, cluster.JobID(id))
		return testJob(id).Obj()
	})
	var fs []JobForecast
	for i, id := range ids {
		fs = append(fs, JobForecast{Job: id, DurationP50: time.Duration(i+1) * time.Minute, DurationP90: time.Duration(i+2) * time.Minute, Source: "test"})
	}
	fs[3].MemoryP90Bytes = 40 << 30
	if err := s.PutForecasts(ctx, fs); err != nil {
		t.Fatal(err)
	}
	fs[3].DurationP50, fs[3].Source = time.Hour, "model duration:2"
	if err := s.PutForecasts(ctx, fs[3:4]); err != nil {
		t.Fatal(err)
	}
	got, err := s.Forecasts(ctx, append(ids, "unknown"))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(ids) {
		t.Fatalf("%d forecasts, want %d", len(got), len(ids))
	}
	f := got["j0003"]
	if f.DurationP50 != time.Hour || f.Source != "model duration:2" || f.MemoryP90Bytes != 40<<30 || !f.Time.Equal(c.Now()) {
		t.Errorf("j0003: %+v, want the replacement stamped now", f)
	}
	if f := got["j1199"]; f.DurationP50 != 1200*time.Minute || f.DurationP90 != 1201*time.Minute {
		t.Errorf("j1199: %+v", f)
	}
	err = s.PutForecasts(ctx, []JobForecast{{Job: "j0000", DurationP50: 2 * time.Minute}, {Job: "missing", DurationP50: time.Minute}})
	if !errors.Is(err, ErrNotFound) {
		t.Errorf("a forecast of a missing job: %v, want ErrNotFound", err)
	}
	if got, _ := s.Forecasts(ctx, []cluster.JobID{"j0000"}); got["j0000"].DurationP50 != time.Minute {
		t.Errorf("j0000 changed by a refused batch: %+v", got["j0000"])
	}
}
