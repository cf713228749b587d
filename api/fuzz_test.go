package api_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
)

// fuzzBody posts arbitrary bytes to a route and checks that the server
// answers one of the statuses a client can cause, never a 5xx, always with
// a JSON body, and a 400 with an error code and a message.
func fuzzBody(f *testing.F, path string, allowed []int, seeds ...string) {
	fuzzRequest(f, http.MethodPost, path, allowed, seeds...)
}

func fuzzRequest(f *testing.F, method, path string, allowed []int, seeds ...string) {
	for _, s := range seeds {
		f.Add(s)
	}
	e := newEnv(f)
	f.Fuzz(func(t *testing.T, body string) {
		e.t = t
		rec := e.do(method, path, tokAdmin, body)
		if !slices.Contains(allowed, rec.Code) {
			t.Fatalf("%s %s %q = %d: %s", method, path, body, rec.Code, rec.Body)
		}
		if !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("%s %s %q: the answer is not JSON: %s", method, path, body, rec.Body)
		}
		if rec.Code == http.StatusBadRequest {
			errorOf(t, rec)
		}
	})
}

func FuzzSubmit(f *testing.F) {
	fuzzBody(f, "/v1/jobs", []int{200, 201, 400, 409},
		`{"gpus":1}`,
		`{"id":"a","name":"bert","tenant":"b","user":"u","tier":"production","gpus":2,"gpu_milli":1000,"gpu_models":["A100-SXM4-80GB"],"cpu_milli":4000,"memory_bytes":1073741824,"deadline":"2026-01-05T12:00:00Z","gang_size":2,"checkpointable":true,"checkpoint_cost_s":30,"time_limit_s":7200,"labels":{"run":"7"},"command":["python","train.py"],"env":{"EPOCHS":"3"}}`,
		`{"gpus":1,"gpu_milli":250}`,
		`{"gpus":-1,"tier":"vip"}`,
		`{"gpus":1e309}`,
		`{"deadline":"2026-13-45T99:00:00Z"}`,
		`{"labels":{"a/b":"c"},"env":{"PRESCIENT_X":"1"}}`,
		`[]`, `null`, `{`, ``, `{"gpus":1}{}`, `{"checkpoint_cost_s":1e300}`,
	)
}

func FuzzPredict(f *testing.F) {
	fuzzBody(f, "/v1/predict", []int{200, 400},
		`{"jobs":[{"gpus":1}]}`,
		`{"jobs":[{"gpus":8,"tier":"batch","gpu_models":["V100"]},{"gpus":1,"gpu_milli":500}]}`,
		`{"jobs":[]}`, `{"jobs":null}`, `{"jobs":[{"gpus":"1"}]}`, `{"jobs":[{}]}`, `{"job":[]}`,
	)
}

func FuzzWhatIf(f *testing.F) {
	fuzzBody(f, "/v1/whatif", []int{200, 400},
		`{}`,
		`{"add_jobs":[{"id":"x","gpus":8,"deadline":"2026-01-05T12:00:00Z"}],"remove_jobs":["nope"],"add_nodes":[{"name":"n2","gpus":8,"gpu_model":"H100-SXM5-80GB"}],"remove_nodes":["n1"],"policy":"sjf","horizon_s":3600}`,
		`{"add_nodes":[{"name":"n1","gpus":1,"gpu_model":"T4"}]}`,
		`{"add_nodes":[{"name":"z","gpus":2,"gpu_model":"Z9","gpu_memory_bytes":1}]}`,
		`{"policy":"lottery"}`, `{"horizon_s":-1}`, `{"horizon_s":1e400}`, `{"remove_jobs":[""]}`,
	)
}

func FuzzSetMode(f *testing.F) {
	fuzzRequest(f, http.MethodPut, "/v1/mode", []int{200, 400},
		`{"mode":"autopilot"}`, `{"mode":"advisor"}`, `{"mode":""}`, `{"mode":1}`, `{}`, `{"mode":"advisor","x":1}`)
}

func FuzzRollback(f *testing.F) {
	fuzzBody(f, "/v1/models/duration/rollback", []int{200, 400, 404, 409},
		``, `{}`, `{"to":1}`, `{"to":0}`, `{"to":-1}`, `{"to":99}`, `{"to":"1"}`, `{"to":1e20}`)
}

// FuzzJobsQuery fuzzes the query string of GET /v1/jobs.
// fuzzQuery sends arbitrary query strings to a GET route as a viewer of
// tenant a and checks that the server answers one of the statuses a
// client can cause, always with a JSON body, and a 400 with an error code
// and a message.
func fuzzQuery(f *testing.F, path string, allowed []int, seeds ...string) {
	for _, s := range seeds {
		f.Add(s)
	}
	e := newEnv(f)
	f.Fuzz(func(t *testing.T, query string) {
		e.t = t
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.URL.RawQuery = query
		req.Header.Set("Authorization", "Bearer "+tokViewerA)
		rec := httptest.NewRecorder()
		e.srv.Handler().ServeHTTP(rec, req)
		if !slices.Contains(allowed, rec.Code) {
			t.Fatalf("GET %s?%s = %d: %s", path, query, rec.Code, rec.Body)
		}
		if !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("GET %s?%s: the answer is not JSON: %s", path, query, rec.Body)
		}
		if rec.Code == http.StatusBadRequest {
			errorOf(t, rec)
		}
	})
}

func FuzzJobsQuery(f *testing.F) {
	fuzzQuery(f, "/v1/jobs", []int{200, 400, 403},
		"", "tenant=a", "state=queued,running&state=failed", "label=experiment=e1&label=run=7", "limit=10",
		"limit=-1", "limit=99999999999999999999", "state=lost", "label=", "tennant=a", "%zz", "a=%00",
	)
}

func FuzzIdleForecastQuery(f *testing.F) {
	fuzzQuery(f, "/v1/forecasts/idle", []int{200, 400, 404},
		"", "horizon_s=3600&step_s=300", "min_window_s=600&min_probability=0.8", "node=n1", "pool=n1", "node=n9",
		"step_s=1", "horizon_s=1e309", "step_s=60&horizon_s=86400", "min_probability=2", "min_probability=NaN",
		"horizon_s=-5", "hrizon_s=1", "%zz", "pool=%ff",
	)
}
