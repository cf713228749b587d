package api_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/prescient-sched/prescient/api"
	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/control/controltest"
)

func TestMetricsCountRequestsByRouteAndCode(t *testing.T) {
	e := newEnv(t, withAgents())
	e.do("GET", "/v1/agents/n1/commands", tokAgent, "")  // a long poll: counted, not timed
	e.do("POST", "/v1/agents/n1/events", tokAgent, `{}`) // timed
	e.submit(tokSubmitterA, "ja")
	e.do("GET", "/v1/jobs/ja", tokViewerA, "")
	e.do("GET", "/v1/jobs/nope", tokViewerA, "")
	e.do("GET", "/v1/jobs", "", "")
	if err := e.fake.Start("ja", "n1", 3); err != nil {
		t.Fatal(err)
	}
	e.fake.SetGPUTelemetry(cluster.GPURef{Node: "n1", Index: 3}, controltest.GPUTelemetry{UtilizationPct: 87, MemoryUsedBytes: 3 << 30, PowerW: 301.5})
	rec := e.do("GET", "/metrics", "", "")
	if rec.Code != 200 {
		t.Fatalf("GET /metrics = %d", rec.Code)
	}
	body := rec.Body.String()
	for _, want := range []string{
		`prescient_api_requests_total{code="201",method="POST",route="/v1/jobs"} 1`,
		`prescient_api_requests_total{code="200",method="GET",route="/v1/jobs/:id"} 1`,
		`prescient_api_requests_total{code="404",method="GET",route="/v1/jobs/:id"} 1`,
		`prescient_api_requests_total{code="401",method="GET",route="/v1/jobs"} 1`,
		`prescient_api_request_duration_seconds_count{code="201",method="POST",route="/v1/jobs"} 1`,
		`prescient_fleet_gpus 8`,
		`prescient_fleet_gpus_busy 1`,
		`prescient_jobs{state="running"} 1`,
		`prescient_mode{mode="advisor"} 1`,
		`prescient_mode{mode="autopilot"} 0`,
		`prescient_fleet_nodes{state="ready"} 1`,
		`DCGM_FI_DEV_GPU_UTIL{Hostname="n1",gpu="3",modelName="A100-SXM4-80GB"} 87`,
		`DCGM_FI_DEV_FB_USED{Hostname="n1",gpu="3",modelName="A100-SXM4-80GB"} 3072`,
		`DCGM_FI_DEV_POWER_USAGE{Hostname="n1",gpu="3",modelName="A100-SXM4-80GB"} 301.5`,
		`go_goroutines`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if !strings.Contains(body, `prescient_api_requests_total{code="200",method="GET",route="/v1/agents/*path"} 1`) ||
		strings.Contains(body, `prescient_api_request_duration_seconds_count{code="200",method="GET",route="/v1/agents/*path"}`) ||
		!strings.Contains(body, `prescient_api_request_duration_seconds_count{code="200",method="POST",route="/v1/agents/*path"} 1`) {
		t.Error("the agents' long polls are to be counted and not timed, their events timed")
	}
	if strings.Contains(body, `route="/v1/jobs/ja"`) {
		t.Error("a raw path became a label value")
	}
}

func TestMetricsSurviveABrokenControlPlane(t *testing.T) {
	e := newEnv(t)
	e.fake.FailWith("Fleet", errors.New("store is down"))
	rec := e.do("GET", "/metrics", "", "")
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), "prescient_mode") || strings.Contains(rec.Body.String(), "prescient_fleet_gpus ") {
		t.Fatalf("GET /metrics with the fleet unavailable = %d\n%s", rec.Code, rec.Body)
	}
}

func TestTwoServersShareARegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	a := newEnv(t, func(c *api.Config) { c.Registry = reg })
	b := newEnv(t, func(c *api.Config) { c.Registry = reg })
	a.do("GET", "/healthz", "", "")
	b.do("GET", "/healthz", "", "")
	if body := b.do("GET", "/metrics", "", "").Body.String(); !strings.Contains(body, `prescient_api_requests_total{code="200",method="GET",route="/healthz"} 2`) {
		t.Fatalf("the second server's requests are not counted with the first's:\n%s", body)
	}
}
