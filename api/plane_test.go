package api_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/api"
	"github.com/prescient-sched/prescient/backend/simbackend"
	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/cluster/clustertest"
	"github.com/prescient-sched/prescient/control"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/service"
	"github.com/prescient-sched/prescient/store"
)

// hourForecaster forecasts every job at P50 one hour, P90 two.
type hourForecaster struct{}

func (hourForecaster) Forecast(_ context.Context, jobs []*cluster.Job) ([]executor.Forecast, error) {
	out := make([]executor.Forecast, len(jobs))
	for i, j := range jobs {
		out[i] = executor.Forecast{Job: j.ID, DurationP50: time.Hour, DurationP90: 2 * time.Hour, Source: "test"}
	}
	return out, nil
}

// realPlane serves the real control plane (the SQLite store, the simulated
// backend, advisor mode) on a fleet of 16 A100s.
func realPlane(t testing.TB) *env {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "prescient.db"), store.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	backend, err := simbackend.New(simbackend.Config{Duration: func(*cluster.Job) time.Duration { return time.Hour }})
	if err != nil {
		t.Fatal(err)
	}
	fleet := clustertest.Fleet(clustertest.Node("n1").GPUs(8, "A100-SXM4-80GB").Obj(), clustertest.Node("n2").GPUs(8, "A100-SXM4-80GB").Obj())
	plane, err := control.New(control.Config{
		Store: st, Nodes: service.StaticFleet{Fleet: fleet}, Backend: backend, Forecaster: hourForecaster{},
		Mode: service.ModeAdvisor, Logger: log, Tick: 50 * time.Millisecond, Debounce: time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- plane.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; st.Close() })
	return &env{t: t, now: time.Now(), srv: api.New(api.Config{Service: plane, Tokens: testTokens(), Logger: log})}
}

// TestTheRealPlaneAnswersAsDocumented serves the real control plane (the
// SQLite store, the simulated backend, advisor mode) and checks the API's
// answers against the OpenAPI document, as the fake's are.
func TestTheRealPlaneAnswersAsDocumented(t *testing.T) {
	e := realPlane(t)
	e.submit(tokSubmitterA, "a-1")
	e.submit(tokSubmitterA, "a-2")
	e.submit(tokSubmitterB, "b-1")
	deadline := time.Now().Add(3 * time.Hour).UTC().Format(time.RFC3339)
	checkConformance(t, e, []apiRequest{
		{"POST", "/v1/jobs", tokSubmitterA, `{"id":"a-3","tier":"production","gpus":4,"deadline":"` + deadline + `","labels":{"run":"7"}}`, 201},
		{"POST", "/v1/jobs", tokSubmitterA, `{"id":"a-3","gpus":1}`, 409},
		{"GET", "/v1/jobs", tokAdmin, "", 200},
		{"GET", "/v1/jobs?state=queued,running", tokViewerA, "", 200},
		{"GET", "/v1/jobs/a-1", tokViewerA, "", 200},
		{"GET", "/v1/jobs/nope", tokViewerA, "", 404},
		{"GET", "/v1/jobs/b-1", tokViewerA, "", 404}, // another tenant's: as if missing
		{"GET", "/v1/jobs/a-1/events", tokViewerA, "", 200},
		{"GET", "/v1/jobs/b-1/events", tokViewerA, "", 404},
		{"GET", "/v1/jobs/nope/events", tokAdmin, "", 404},
		{"GET", "/v1/fleet", tokViewerA, "", 200},
		{"POST", "/v1/predict", tokViewerA, `{"jobs":[{"gpus":1},{"gpus":8}]}`, 200},
		{"GET", "/v1/recommendations", tokAdmin, "", 200},
		{"POST", "/v1/whatif", tokAdmin, `{"add_jobs":[{"gpus":8}],"add_nodes":[{"name":"n3","gpus":8,"gpu_model":"A100-SXM4-80GB"}],"horizon_s":86400}`, 200},
		{"POST", "/v1/whatif", tokViewerA, `{"remove_jobs":["a-2"]}`, 200},
		{"POST", "/v1/whatif", tokAdmin, `{"add_jobs":[{"gpus":16},{"gpus":16},{"gpus":16}],"horizon_s":1800}`, 200},
		{"GET", "/v1/stats", tokAdmin, "", 200},
		{"GET", "/v1/stats?window_s=3600&step_s=60", tokViewerB, "", 200},
		{"GET", "/v1/models", tokAdmin, "", 200},
		{"GET", "/v1/mode", tokViewerA, "", 200},
		{"PUT", "/v1/mode", tokAdmin, `{"mode":"advisor"}`, 200},
		{"DELETE", "/v1/jobs/a-2", tokSubmitterA, "", 200},
		{"DELETE", "/v1/jobs/a-2", tokSubmitterA, "", 409},
	})
}

// TestTheRealPlaneSaysWhatStartsBeyondTheHorizon adds three 16-GPU jobs of
// an hour to an empty 16-GPU fleet and asks only 30 minutes ahead: the
// answer's horizon is 30 minutes from now, set by the request, the first
// job starts, and the other two are beyond the horizon with no start.
func TestTheRealPlaneSaysWhatStartsBeyondTheHorizon(t *testing.T) {
	e := realPlane(t)
	rec := e.do("POST", "/v1/whatif", tokAdmin, `{"add_jobs":[{"id":"h1","gpus":16},{"id":"h2","gpus":16},{"id":"h3","gpus":16}],"horizon_s":1800}`)
	if rec.Code != 200 {
		t.Fatalf("POST /v1/whatif = %d: %s", rec.Code, rec.Body)
	}
	var res service.WhatIfResult
	if err := json.Unmarshal(rec.Body.Bytes(), &res); err != nil {
		t.Fatal(err)
	}
	if res.Horizon == nil || res.HorizonReason != "horizon" || res.Horizon.Sub(time.Now()) > 30*time.Minute || res.Horizon.Sub(time.Now()) < 29*time.Minute {
		t.Fatalf("horizon %v (%q), want 30 minutes from now (horizon)", res.Horizon, res.HorizonReason)
	}
	started, beyond := 0, 0
	for _, j := range res.Jobs {
		switch {
		case j.Start != nil && !j.BeyondHorizon && j.End == nil: // an hour's run ends after the horizon
			started++
		case j.Start == nil && j.BeyondHorizon:
			beyond++
		default:
			t.Errorf("%s: start %v, end %v, beyond %v", j.Job, j.Start, j.End, j.BeyondHorizon)
		}
	}
	if started != 1 || beyond != 2 || res.Scenario.BeyondHorizon != 2 {
		t.Errorf("%d started and %d beyond (summary %d); want 1 and 2", started, beyond, res.Scenario.BeyondHorizon)
	}
}
