package api_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/service"
)

func TestIdleForecastRouteShowsATenantOnlyItsOwnIdleJobs(t *testing.T) {
	e := newEnv(t)
	e.submit(tokSubmitterA, "ja")
	e.submit(tokSubmitterB, "jb")
	for i, id := range []cluster.JobID{"ja", "jb"} {
		if err := e.fake.Start(id, "n1", i); err != nil {
			t.Fatal(err)
		}
	}
	e.fake.SetGPUIdleFor(cluster.GPURef{Node: "n1", Index: 0}, time.Hour)
	e.fake.SetGPUIdleFor(cluster.GPURef{Node: "n1", Index: 1}, time.Hour)
	e.now = e.now.Add(10 * time.Minute)

	var f service.IdleForecast
	rec := e.do(http.MethodGet, "/v1/forecasts/idle?horizon_s=3600&step_s=600&min_window_s=1200", tokAdmin, "")
	if rec.Code != http.StatusOK {
		t.Fatalf("admin: %d %s", rec.Code, rec.Body)
	}
	decode(t, rec, &f)
	if len(f.LeadsS) != 6 || f.LeadsS[5] != 3600 || len(f.GPUs) != 8 || len(f.Nodes) != 1 || len(f.Pools) != 1 {
		t.Fatalf("admin: leads %v, %d GPUs, %d nodes, %d pools", f.LeadsS, len(f.GPUs), len(f.Nodes), len(f.Pools))
	}
	// Six free GPUs are idle throughout; the two held by 30-minute jobs
	// (P90 an hour) become likely idle later.
	if g := f.GPUs[7]; g.Node != "n1" || g.Index != 7 || g.Probability[0] != 1 || len(g.Windows) != 1 {
		t.Fatalf("free GPU: %+v", g)
	}
	if g := f.GPUs[0]; g.Probability[0] > 0.5 || g.Probability[5] < g.Probability[0] {
		t.Fatalf("held GPU: %+v", g)
	}
	if len(f.IdleJobs) != 2 {
		t.Fatalf("admin sees idle jobs %+v, want both", f.IdleJobs)
	}
	decode(t, e.do(http.MethodGet, "/v1/forecasts/idle", tokViewerA, ""), &f)
	if len(f.IdleJobs) != 1 || f.IdleJobs[0].Job != "ja" || len(f.LeadsS) != 24 {
		t.Fatalf("viewer of a sees idle jobs %+v over %d steps", f.IdleJobs, len(f.LeadsS))
	}
}

func TestIdleForecastRouteNamesTheBadParameter(t *testing.T) {
	e := newEnv(t)
	for query, want := range map[string]string{
		"step_s=10":                        "step_s",
		"horizon_s=90000":                  "horizon_s",
		"horizon_s=86400&step_s=60":        "step_s",
		"min_probability=1.5":              "min_probability",
		"min_window_s=x":                   "min_window_s",
		"horizon":                          "horizon",
		"pool=" + strings.Repeat("p", 300): "pool",
	} {
		rec := e.do(http.MethodGet, "/v1/forecasts/idle?"+query, tokViewerA, "")
		if rec.Code != http.StatusBadRequest {
			t.Errorf("%s: %d %s", query, rec.Code, rec.Body)
			continue
		}
		if d := errorOf(t, rec); !strings.Contains(d.Message, want) {
			t.Errorf("%s: message %q does not name %s", query, d.Message, want)
		}
	}
	if rec := e.do(http.MethodGet, "/v1/forecasts/idle?node=n9", tokViewerA, ""); rec.Code != http.StatusNotFound {
		t.Errorf("unknown node: %d %s", rec.Code, rec.Body)
	}
	if rec := e.do(http.MethodGet, "/v1/forecasts/idle", "", ""); rec.Code != http.StatusUnauthorized {
		t.Errorf("no token: %d", rec.Code)
	}
}
