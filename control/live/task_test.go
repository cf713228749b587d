package live

import (
	"testing"
	"time"
)

func TestATaskRunsOnceAtATimeAndAtMostEverySoOften(t *testing.T) {
	var task Task
	t0 := time.Date(2026, 6, 1, 8, 0, 0, 0, time.UTC)
	if !task.Due(t0, time.Minute) {
		t.Fatal("the first run is not due")
	}
	if task.Due(t0.Add(2*time.Minute), time.Minute) {
		t.Fatal("a second run started while one runs")
	}
	release := make(chan struct{})
	task.Go(func() { <-release })
	close(release)
	task.Wait()
	if task.Due(t0.Add(30*time.Second), time.Minute) {
		t.Error("a run started within the minute after the last")
	}
	if !task.Due(t0.Add(time.Minute), time.Minute) {
		t.Error("no run a minute after the last")
	}
	task.Skip()
	if task.Due(t0.Add(90*time.Second), time.Minute) {
		t.Error("a skipped run counts as started: the next waits its minute")
	}
}
