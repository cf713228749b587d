package control

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/store"
)

// A job whose starts the backend refuses fails after MaxFailedStarts of
// them, with the refusal as its reason; a node not ready yet does not
// count, and neither do the refusals of another job.
func TestAJobTheBackendCannotStartFailsAfterItsFailedStarts(t *testing.T) {
	e := newEnv(t, fleetOf(1, 8), func(c *Config) { c.MaxFailedStarts = 3 })
	e.backend.onStart = func(a executor.Assignment) error {
		if a.Job.ID == "later" {
			return fmt.Errorf("node n1: %w", executor.ErrNodeNotReady)
		}
		return errors.New("command: empty")
	}
	e.submit("bad", spec(1, time.Hour))
	e.submit("later", spec(1, time.Hour))
	for range 6 {
		e.plane.cycle(e.ctx)
		e.clock.Advance(time.Minute)
	}
	bad := e.job("bad")
	if bad.State != cluster.StateFailed || bad.Attempts != 3 {
		t.Fatalf("bad: %s after %d attempts; want failed after 3", bad.State, bad.Attempts)
	}
	evs, err := e.store.Events(e.ctx, "bad")
	if err != nil {
		t.Fatal(err)
	}
	last := evs[len(evs)-1]
	if last.Type != store.EventFailed || !strings.Contains(last.Message, "the backend refused the start: command: empty (failed start 3, the last allowed)") {
		t.Errorf("bad's last event %s %q; want failed with the refusal", last.Type, last.Message)
	}
	if n := slices.IndexFunc(evs, func(ev store.Event) bool { return ev.Type == store.EventStartFailed }); n < 0 {
		t.Errorf("bad's events %v hold no start_failed", e.eventTypes("bad"))
	}
	// Where a user looks: the job's last error and its history.
	st, err := e.plane.Job(e.ctx, "bad")
	if err != nil || !strings.Contains(st.LastError, "command: empty (failed start 3, the last allowed)") || st.Attempts != 3 {
		t.Errorf("GET bad: last error %q, %d attempts (%v); want the refusal and 3", st.LastError, st.Attempts, err)
	}
	hist, err := e.plane.JobEvents(e.ctx, "bad")
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, h := range hist {
		types = append(types, h.Type)
	}
	want := "submitted started start_failed started start_failed started failed"
	if strings.Join(types, " ") != want || hist[2].Message == "" || hist[2].From != cluster.StateRunning || hist[2].To != cluster.StateQueued {
		t.Errorf("bad's history %v (%+v); want %s with the reasons", types, hist[2], want)
	}
	if later := e.job("later"); later.State != cluster.StateQueued || later.Attempts != 6 {
		t.Errorf("later: %s after %d attempts; want queued after 6 (a node not ready is no failed start)", later.State, later.Attempts)
	}
}

func TestTheAPIShowsForecastSecondsToTheMillisecond(t *testing.T) {
	model := 899.9999999999 // a model's float seconds
	if got := apiSeconds(time.Duration(model * float64(time.Second))); got != 900 {
		t.Errorf("apiSeconds(899.9999999999 s) = %v, want 900", got)
	}
	if got := apiSeconds(1500 * time.Millisecond); got != 1.5 {
		t.Errorf("apiSeconds(1.5 s) = %v", got)
	}
}
