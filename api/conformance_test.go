package api_test

import (
	"bytes"
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	legacyrouter "github.com/getkin/kin-openapi/routers/legacy"

	"github.com/prescient-sched/prescient/api"
	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/control/controltest"
	"github.com/prescient-sched/prescient/service"
)

// TestResponsesConformToTheOpenAPIDocument sends requests of every route,
// answered and refused, and checks each request and response against the
// document with kin-openapi's validator: status codes the operation
// documents, bodies that match their schemas.
func TestResponsesConformToTheOpenAPIDocument(t *testing.T) {
	e := newEnv(t, withAgents())
	populate(t, e)
	deadline := e.now.Add(3 * time.Hour).Format(time.RFC3339)
	requests := []apiRequest{
		{"GET", "/healthz", "", "", 0},
		{"GET", "/readyz", "", "", 0},
		{"GET", "/v1/openapi.json", "", "", 0},
		{"POST", "/v1/jobs", tokSubmitterA, `{"id":"new-1","name":"bert","tier":"production","gpus":2,"deadline":"` + deadline + `","labels":{"run":"r7"},"command":["python","train.py"],"env":{"EPOCHS":"3"}}`, 0},
		{"POST", "/v1/jobs", tokSubmitterA, `{"id":"new-1","name":"bert","tier":"production","gpus":2,"deadline":"` + deadline + `","labels":{"run":"r7"},"command":["python","train.py"],"env":{"EPOCHS":"3"}}`, 0},
		{"POST", "/v1/jobs", tokSubmitterA, `{"id":"new-1","gpus":1}`, 0},
		{"POST", "/v1/jobs", tokSubmitterA, `{"gpus":-1}`, 0},
		{"POST", "/v1/jobs", "", `{"gpus":1}`, 0},
		{"POST", "/v1/jobs", tokViewerA, `{"gpus":1}`, 0},
		{"GET", "/v1/jobs", tokAdmin, "", 0},
		{"GET", "/v1/jobs?state=running,succeeded&label=experiment=e1&limit=5", tokViewerA, "", 0},
		{"GET", "/v1/jobs?state=lost", tokViewerA, "", 0},
		{"GET", "/v1/jobs/run-a", tokViewerA, "", 0},
		{"GET", "/v1/jobs/nope", tokViewerA, "", 0},
		{"DELETE", "/v1/jobs/queued-a", tokSubmitterA, "", 0},
		{"POST", "/v1/jobs/queued-a/cancel", tokSubmitterA, "", 0},
		{"GET", "/v1/fleet", tokViewerA, "", 0},
		{"GET", "/v1/fleet", tokAdmin, "", 0},
		{"POST", "/v1/predict", tokViewerB, `{"jobs":[{"gpus":1},{"gpus":4,"gpu_models":["A100-SXM4-80GB"]}]}`, 0},
		{"GET", "/v1/recommendations?since=2026-01-01T00:00:00Z&limit=10", tokAdmin, "", 0},
		{"POST", "/v1/whatif", tokAdmin, `{"add_jobs":[{"gpus":8,"deadline":"` + deadline + `"}],"add_nodes":[{"name":"n2","gpus":8,"gpu_model":"H100-SXM5-80GB"}],"policy":"sjf","horizon_s":86400}`, 0},
		{"POST", "/v1/whatif", tokAdmin, `{"remove_nodes":["n9"]}`, 0},
		{"POST", "/v1/whatif", tokAdmin, `{"add_jobs":[{"gpus":16},{"gpus":16},{"gpus":16}],"horizon_s":1800}`, 0},
		{"GET", "/v1/stats?window_s=7200&step_s=600", tokAdmin, "", 0},
		{"GET", "/v1/forecasts/idle", tokViewerA, "", 200},
		{"GET", "/v1/forecasts/idle?horizon_s=3600&step_s=600&min_window_s=600&min_probability=0.7&node=n1", tokAdmin, "", 200},
		{"GET", "/v1/forecasts/idle?step_s=5", tokAdmin, "", 400},
		{"GET", "/v1/forecasts/idle?pool=nope", tokAdmin, "", 404},
		{"GET", "/v1/models", tokViewerA, "", 0},
		{"POST", "/v1/models/retrain", tokAdmin, "", 0},
		{"POST", "/v1/models/duration/rollback", tokAdmin, `{"to":1}`, 0},
		{"POST", "/v1/models/memory/rollback", tokAdmin, "", 0},
		{"GET", "/v1/mode", tokViewerA, "", 0},
		{"PUT", "/v1/mode", tokAdmin, `{"mode":"autopilot"}`, 0},
		{"PUT", "/v1/mode", tokAdmin, `{"mode":"chaos"}`, 0},
		{"PUT", "/v1/mode", tokSubmitterA, `{"mode":"advisor"}`, 0},
		{"GET", "/v1/whoami", tokViewerA, "", 200},
		{"GET", "/v1/whoami", tokAdmin, "", 200},
		{"GET", "/v1/whoami", "", "", 401},
	}
	checkConformance(t, e, requests)
}

// openAPIRouter finds the document's operation of a request.
func openAPIRouter(t *testing.T) routers.Router {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(api.OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	router, err := legacyrouter.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	return router
}

// apiRequest is one request of a conformance run; want, when not 0, is
// the status it must get.
type apiRequest struct {
	method, path, token, body string
	want                      int
}

// checkConformance sends each request and validates it and its answer
// against the document.
func checkConformance(t *testing.T, e *env, requests []apiRequest) {
	t.Helper()
	router := openAPIRouter(t)
	for _, r := range requests {
		t.Run(r.method+" "+r.path, func(t *testing.T) {
			rec := e.do(r.method, r.path, r.token, r.body)
			if r.want != 0 && rec.Code != r.want {
				t.Fatalf("= %d, want %d: %s", rec.Code, r.want, rec.Body)
			}
			req := httptest.NewRequest(r.method, r.path, strings.NewReader(r.body))
			if r.body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			route, params, err := router.FindRoute(req)
			if err != nil {
				t.Fatalf("the document has no route: %v", err)
			}
			in := &openapi3filter.RequestValidationInput{
				Request: req, PathParams: params, Route: route,
				Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
			}
			if rec.Code < 400 {
				if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
					t.Fatalf("the request the server took does not match the document: %v", err)
				}
			}
			out := &openapi3filter.ResponseValidationInput{
				RequestValidationInput: in, Status: rec.Code, Header: rec.Header(),
				Body: io.NopCloser(bytes.NewReader(rec.Body.Bytes())),
			}
			if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
				t.Fatalf("response %d does not match the document: %v\n%s", rec.Code, err, rec.Body)
			}
		})
	}
}

// populate gives the fake jobs in every state, telemetry, samples and a
// recommendation.
func populate(t *testing.T, e *env) {
	t.Helper()
	for _, id := range []string{"run-a", "done-a", "fail-a", "queued-a"} {
		e.submit(tokSubmitterA, id)
	}
	e.submit(tokSubmitterB, "run-b")
	e.fake.AddSample(e.now, 40, 900)
	e.now = e.now.Add(5 * time.Minute)
	for i, id := range []cluster.JobID{"run-a", "done-a", "fail-a", "run-b"} {
		if err := e.fake.Start(id, "n1", i); err != nil {
			t.Fatal(err)
		}
	}
	e.fake.SetGPUTelemetry(cluster.GPURef{Node: "n1", Index: 0}, controltest.GPUTelemetry{UtilizationPct: 97, MemoryUsedBytes: 30 << 30, PowerW: 380})
	e.now = e.now.Add(40 * time.Minute)
	if err := e.fake.Checkpoint("run-a", 1200); err != nil {
		t.Fatal(err)
	}
	if err := e.fake.Finish("done-a", 0, ""); err != nil {
		t.Fatal(err)
	}
	if err := e.fake.Finish("fail-a", 1, "CUDA out of memory"); err != nil {
		t.Fatal(err)
	}
	e.fake.AddRecommendation(service.Recommendation{Job: "queued-a", Kind: "start", Reason: "fits n1 GPUs 4-7", Details: map[string]any{"node": "n1"}})
	e.fake.AddRecommendation(service.Recommendation{Job: "run-b", Kind: "preempt", Reason: "lowest tier"})
	e.fake.AddRecommendation(service.Recommendation{Kind: "power_cap", Reason: "idle node n1 can park"})
}
