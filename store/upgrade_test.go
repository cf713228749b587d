package store_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/store"
)

// upgradeStore opens a copy of the store the version before the
// architecture change (commit 8b61c04) wrote, with a row in every table:
// four jobs (queued with its run, running, being preempted, finished),
// forecasts, two parked nodes and a boot, two loans, a recommendation, a
// webhook delivery and a telemetry sample.
func upgradeStore(t *testing.T) *store.Store {
	t.Helper()
	b, err := os.ReadFile("testdata/upgrade-8b61c04/prescient.db")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "prescient.db")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(t.Context(), path)
	if err != nil {
		t.Fatalf("open the earlier version's store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func TestAStoreTheVersionBeforeWroteStillReads(t *testing.T) {
	st := upgradeStore(t)
	ctx := t.Context()
	jobs, err := st.ListJobs(ctx, store.JobFilter{})
	if err != nil || len(jobs) != 4 {
		t.Fatalf("jobs %d (%v), want 4", len(jobs), err)
	}
	states := map[cluster.JobID]cluster.JobState{}
	for _, j := range jobs {
		states[j.ID] = j.State
	}
	want := map[cluster.JobID]cluster.JobState{"queued-1": cluster.StateQueued, "running-1": cluster.StateRunning,
		"stopping-1": cluster.StateCheckpointing, "done-1": cluster.StateSucceeded}
	for id, s := range want {
		if states[id] != s {
			t.Errorf("%s %s, want %s", id, states[id], s)
		}
	}
	if run, err := st.GetRun(ctx, "queued-1"); err != nil || len(run.Command) != 2 || run.Env["STEPS"] != "10" {
		t.Errorf("run %+v (%v)", run, err)
	}
	pls, err := st.Placements(ctx)
	if err != nil || len(pls) != 2 {
		t.Fatalf("placements %+v (%v), want running-1's and stopping-1's", pls, err)
	}
	for _, pl := range pls {
		if pl.Job == "stopping-1" && (!pl.Stopping() || pl.PowerLimitFraction != 0.8) {
			t.Errorf("stopping-1's placement %+v: want stopping, capped at 0.8", pl)
		}
	}
	if fc, err := st.Forecasts(ctx, []cluster.JobID{"queued-1"}); err != nil || fc["queued-1"].DurationP90 != 2*time.Hour {
		t.Errorf("forecasts %+v (%v)", fc, err)
	}
	parked, err := st.ParkedNodes(ctx)
	if err != nil || len(parked) != 2 {
		t.Fatalf("parked %+v (%v)", parked, err)
	}
	if boots, err := st.Boots(ctx); err != nil || len(boots) != 1 || boots[0].Boot != 4*time.Minute {
		t.Errorf("boots %+v (%v)", boots, err)
	}
	if loans, err := st.Loans(ctx); err != nil || len(loans) != 2 {
		t.Errorf("loans %+v (%v)", loans, err)
	}
	if recs, err := st.ListRecommendations(ctx, time.Time{}, 0); err != nil || len(recs) != 1 || recs[0].Status != store.RecommendationOpen {
		t.Errorf("recommendations %+v (%v)", recs, err)
	}
	if ds, err := st.WebhookDeliveries(ctx); err != nil || len(ds) != 1 {
		t.Errorf("webhook deliveries %+v (%v)", ds, err)
	}
	t0 := time.Date(2026, 6, 1, 8, 0, 0, 0, time.UTC)
	series, err := st.QueryTelemetry(ctx, store.TelemetryQuery{Field: "util_gpu_pct", Start: t0.Add(-time.Hour), End: t0, Step: time.Minute})
	if err != nil || len(series) != 1 {
		t.Errorf("telemetry %+v (%v)", series, err)
	}
}
