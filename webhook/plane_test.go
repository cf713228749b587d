package webhook_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/backend/simbackend"
	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/cluster/clustertest"
	"github.com/prescient-sched/prescient/control"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/service"
	"github.com/prescient-sched/prescient/store"
	"github.com/prescient-sched/prescient/webhook"
)

type hourForecaster struct{}

func (hourForecaster) Forecast(_ context.Context, jobs []*cluster.Job) ([]executor.Forecast, error) {
	out := make([]executor.Forecast, len(jobs))
	for i, j := range jobs {
		out[i] = executor.Forecast{Job: j.ID, DurationP50: time.Hour, DurationP90: 2 * time.Hour, Source: "test"}
	}
	return out, nil
}

// TestTheControlPlanesEventsArriveSigned wires the notifier into the real
// control plane: a job submitted and cancelled there reaches the receiver
// as two signed events with its labels.
func TestTheControlPlanesEventsArriveSigned(t *testing.T) {
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "prescient.db"), store.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	backend, err := simbackend.New(simbackend.Config{Duration: func(*cluster.Job) time.Duration { return time.Hour }})
	if err != nil {
		t.Fatal(err)
	}
	r := newReceiver(t)
	n := newNotifier(t, []webhook.Hook{hook("tracker", r.srv.URL)}, webhook.Options{})
	plane, err := control.New(control.Config{
		Store: st, Nodes: service.StaticFleet{Fleet: clustertest.Fleet(clustertest.Node("n1").GPUs(8, "A100-SXM4-80GB").Obj())},
		Backend: backend, Forecaster: hourForecaster{}, Mode: service.ModeAdvisor, Logger: log, Notifier: n,
	})
	if err != nil {
		t.Fatal(err)
	}
	spec := cluster.JobSpec{Tenant: "ml", Tier: cluster.TierStandard, GPUs: 1, GPUMilli: cluster.MilliGPU, Labels: map[string]string{"experiment": "e1"}}
	if _, err := plane.Submit(ctx, service.SubmitRequest{ID: "bert-7", Spec: spec}); err != nil {
		t.Fatal(err)
	}
	if _, err := plane.Cancel(ctx, "bert-7"); err != nil {
		t.Fatal(err)
	}
	closeAll(t, n)
	var types []string
	for _, d := range r.deliveries() {
		var p webhook.Payload
		if err := json.Unmarshal(d.body, &p); err != nil || !d.sigOK || p.Job != "bert-7" || p.Labels["experiment"] != "e1" || p.Tenant != "ml" {
			t.Fatalf("delivery %s (signature ok: %v, %v)", d.body, d.sigOK, err)
		}
		types = append(types, p.Type)
	}
	if len(types) != 2 || types[0] != "submitted" || types[1] != "cancelled" {
		t.Fatalf("events %v, want [submitted cancelled]", types)
	}
}
