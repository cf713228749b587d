package api_test

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/api"
	"github.com/prescient-sched/prescient/backend/simbackend"
	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/cluster/clustertest"
	"github.com/prescient-sched/prescient/control"
	"github.com/prescient-sched/prescient/service"
	"github.com/prescient-sched/prescient/store"
)

// realPlane serves the real control plane (the SQLite store, the simulated
// backend, advisor mode) on a fleet of 16 A100s.
func realPlane(t *testing.T) *env {
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

// What can never run, or is not what it seems, is refused at submit with a
// 400 that names the field; never a 500.
func TestSubmitRefusesWhatCanNeverRun(t *testing.T) {
	e := realPlane(t)
	for _, tc := range []struct{ body, want string }{
		{`null`, "want a JSON object"},
		{`{"gpus":0}`, "gpus"},
		{`{}`, "gpus"},
		{`{"gpus":1,"deadline":"9999-12-31T23:59:59Z"}`, "deadline"},
		{`{"gpus":1,"deadline":"0001-01-01T00:00:01Z"}`, "deadline"},
		{`{"gpus":1,"env":{"LD_PRELOAD":"x"}}`, "env"},
		{`{"gpus":1,"GPUS":2}`, `did you mean \"gpus\"`},
		{`{"gpus":1,"gpus":2}`, "given twice"},
		{`{"gpus":1,"name":"a\ud800b"}`, "surrogate"},
		{`{"gpus":1,"gpu_models":["H100"]}`, "gpu_models"},
		{`{"gpus":17}`, "gpus"},
	} {
		rec := e.do("POST", "/v1/jobs", tokSubmitterA, tc.body)
		if rec.Code != 400 || !strings.Contains(rec.Body.String(), tc.want) {
			t.Errorf("%s: %d %s; want 400 naming %q", tc.body, rec.Code, strings.TrimSpace(rec.Body.String()), tc.want)
		}
	}
	if rec := e.do("POST", "/v1/jobs", tokSubmitterA, `{"gpus":1,"gpu_models":["A100-SXM4-80GB","H100"]}`); rec.Code != 201 {
		t.Errorf("a job one of whose GPU models the fleet has: %d %s", rec.Code, rec.Body)
	}
}
