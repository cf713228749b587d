package api_test

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/api"
	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/control/controltest"
	"github.com/prescient-sched/prescient/service"
)

// TestBadRequestsAre400WithAClearMessage covers malformed, oversized and
// invalid bodies and parameters: each is a 400 whose code says what kind of
// problem it is and whose message names the field.
func TestBadRequestsAre400WithAClearMessage(t *testing.T) {
	big := `{"name":"` + strings.Repeat("x", api.DefaultMaxBodyBytes) + `"}`
	tests := []struct {
		name, method, path, body string
		code                     string
		inMessage                []string
	}{
		{"empty body", "POST", "/v1/jobs", "", "malformed_json", []string{"empty"}},
		{"malformed JSON", "POST", "/v1/jobs", `{"gpus": 1,`, "malformed_json", []string{"malformed JSON"}},
		{"syntax error", "POST", "/v1/jobs", `{"gpus" 1}`, "malformed_json", []string{"at byte 9"}},
		{"an array, not an object", "POST", "/v1/jobs", `[1,2]`, "malformed_json", []string{"want a JSON object"}},
		{"data after the object", "POST", "/v1/jobs", `{"gpus":1} {"gpus":2}`, "malformed_json", []string{"after the object"}},
		{"unknown field", "POST", "/v1/jobs", `{"gpus":1,"gpu_count":2}`, "unknown_field", []string{`"gpu_count"`}},
		{"wrong type", "POST", "/v1/jobs", `{"gpus":"two"}`, "invalid_request", []string{"gpus", "integer"}},
		{"fractional count", "POST", "/v1/jobs", `{"gpus":1.5}`, "invalid_request", []string{"gpus"}},
		{"body over 1 MiB", "POST", "/v1/jobs", big, "body_too_large", []string{"1048576 bytes"}},
		{"negative GPUs", "POST", "/v1/jobs", `{"gpus":-1}`, "invalid_request", []string{"gpus: -1 is negative"}},
		{"unknown tier", "POST", "/v1/jobs", `{"gpus":1,"tier":"vip"}`, "invalid_request", []string{"tier", `"vip"`}},
		{"deadline not RFC 3339", "POST", "/v1/jobs", `{"gpus":1,"deadline":"tomorrow"}`, "invalid_request", []string{"deadline", "RFC 3339"}},
		{"several errors at once", "POST", "/v1/jobs", `{"gpus":-1,"checkpoint_cost_s":-5,"time_limit_s":-1,"id":"a b"}`, "invalid_request", []string{"gpus", "checkpoint_cost_s", "time_limit_s", "id"}},
		{"share on several GPUs", "POST", "/v1/jobs", `{"gpus":2,"gpu_milli":500}`, "invalid_request", []string{"gpu_milli"}},
		{"job may not set CUDA_VISIBLE_DEVICES", "POST", "/v1/jobs", `{"gpus":1,"env":{"CUDA_VISIBLE_DEVICES":"0,1,2,3"}}`, "invalid_request", []string{"env.CUDA_VISIBLE_DEVICES"}},
		{"bad label key", "POST", "/v1/jobs", `{"gpus":1,"labels":{"":"x"}}`, "invalid_request", []string{"labels"}},
		{"dataset without a name", "POST", "/v1/jobs", `{"gpus":1,"data":{"bytes":-3,"nodes":[""]}}`, "invalid_request", []string{"data.name", "data.bytes", "data.nodes[0]"}},
		{"predict without jobs", "POST", "/v1/predict", `{"jobs":[]}`, "invalid_request", []string{"jobs: 0 jobs"}},
		{"predict names the job's index", "POST", "/v1/predict", `{"jobs":[{"gpus":1},{"gpus":-2}]}`, "invalid_request", []string{"jobs[1].gpus"}},
		{"what-if names the node", "POST", "/v1/whatif", `{"add_nodes":[{"name":"n2","gpus":4}]}`, "invalid_request", []string{"add_nodes[0].gpu_model"}},
		{"what-if unknown model needs memory", "POST", "/v1/whatif", `{"add_nodes":[{"name":"n2","gpus":4,"gpu_model":"Z9"}]}`, "invalid_request", []string{"gpu_memory_bytes"}},
		{"what-if negative horizon", "POST", "/v1/whatif", `{"horizon_s":-1}`, "invalid_request", []string{"horizon_s"}},
		{"what-if tenants checked as a file's", "POST", "/v1/whatif", `{"tenants":[{"name":"a"},{"name":"b","quota":[{"gpus":4,"lending_limit":9}]}]}`, "invalid_request", []string{"tenants[1]", "lending_limit"}},
		{"what-if tenants not a list", "POST", "/v1/whatif", `{"tenants":{"name":"a"}}`, "invalid_request", []string{"tenants"}},
		{"what-if job spec", "POST", "/v1/whatif", `{"add_jobs":[{"gpus":1},{"gpus":1,"tier":"x"}]}`, "invalid_request", []string{"add_jobs[1].tier"}},
		{"the Service's own check", "POST", "/v1/whatif", `{"policy":"lottery"}`, "invalid_request", []string{"policy"}},
		{"unknown state", "GET", "/v1/jobs?state=lost", "", "invalid_request", []string{"state", `"lost"`}},
		{"bad label filter", "GET", "/v1/jobs?label=nokey", "", "invalid_request", []string{"label", "key=value"}},
		{"limit out of range", "GET", "/v1/jobs?limit=0", "", "invalid_request", []string{"limit"}},
		{"unknown parameter", "GET", "/v1/jobs?tennant=a", "", "unknown_parameter", []string{`"tennant"`}},
		{"since not RFC 3339", "GET", "/v1/recommendations?since=yesterday", "", "invalid_request", []string{"since"}},
		{"stats step too fine", "GET", "/v1/stats?window_s=86400&step_s=1", "", "invalid_request", []string{"step_s"}},
		{"stats window not a number", "GET", "/v1/stats?window_s=day", "", "invalid_request", []string{"window_s"}},
		{"unknown mode", "PUT", "/v1/mode", `{"mode":"chaos"}`, "invalid_request", []string{"mode", `"chaos"`}},
		{"negative rollback version", "POST", "/v1/models/duration/rollback", `{"to":-1}`, "invalid_request", []string{"to"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			rec := e.do(tt.method, tt.path, tokAdmin, tt.body)
			if rec.Code != http.StatusBadRequest {
				t.Fatalf("%s %s = %d, want 400: %s", tt.method, tt.path, rec.Code, rec.Body)
			}
			got := errorOf(t, rec)
			if got.Code != tt.code {
				t.Fatalf("code %q, want %q (%s)", got.Code, tt.code, got.Message)
			}
			for _, s := range tt.inMessage {
				if !strings.Contains(got.Message, s) {
					t.Fatalf("message %q does not say %q", got.Message, s)
				}
			}
		})
	}
}

func TestServiceErrorsMapToStatuses(t *testing.T) {
	e := newEnv(t)
	e.submit(tokSubmitterA, "ja")
	if rec := e.do("GET", "/v1/jobs/nope", tokAdmin, ""); rec.Code != 404 || errorOf(t, rec).Code != "not_found" {
		t.Fatalf("unknown job = %d %s", rec.Code, rec.Body)
	}
	if rec := e.do("DELETE", "/v1/jobs/ja", tokSubmitterA, ""); rec.Code != 200 {
		t.Fatalf("cancel = %d %s", rec.Code, rec.Body)
	}
	if rec := e.do("DELETE", "/v1/jobs/ja", tokSubmitterA, ""); rec.Code != 409 || errorOf(t, rec).Code != "conflict" {
		t.Fatalf("cancel twice = %d %s", rec.Code, rec.Body)
	}
	if rec := e.do("POST", "/v1/models/memory/rollback", tokAdmin, ""); rec.Code != 404 {
		t.Fatalf("rollback of an unknown target = %d %s", rec.Code, rec.Body)
	}
	secret := errors.New("sqlite: database disk image is malformed at /var/lib/prescient/prescient.db")
	e.fake.FailWith("Fleet", secret)
	rec := e.do("GET", "/v1/fleet", tokAdmin, "")
	if rec.Code != 500 || errorOf(t, rec).Code != "internal" || strings.Contains(rec.Body.String(), "sqlite") {
		t.Fatalf("a broken control plane = %d %s; want 500 that does not show the cause", rec.Code, rec.Body)
	}
	e.fake.FailWith("Submit", fmt.Errorf("wrapped: %w", service.ErrInvalid))
	if rec := e.do("POST", "/v1/jobs", tokAdmin, `{"gpus":1}`); rec.Code != 400 {
		t.Fatalf("ErrInvalid from the Service = %d", rec.Code)
	}
}

func TestSubmitAnswers201ThenTheStoredJobOnRepeat(t *testing.T) {
	e := newEnv(t)
	body := `{"id":"train-1","gpus":2,"labels":{"experiment":"e1"}}`
	rec := e.do("POST", "/v1/jobs", tokSubmitterA, body)
	if rec.Code != 201 || rec.Header().Get("Location") != "/v1/jobs/train-1" {
		t.Fatalf("first submit = %d (Location %q) %s", rec.Code, rec.Header().Get("Location"), rec.Body)
	}
	if rec := e.do("POST", "/v1/jobs", tokSubmitterA, body); rec.Code != 200 {
		t.Fatalf("the same submission again = %d %s", rec.Code, rec.Body)
	}
	if rec := e.do("POST", "/v1/jobs", tokSubmitterA, `{"id":"train-1","gpus":4}`); rec.Code != 409 {
		t.Fatalf("the same ID with another spec = %d %s", rec.Code, rec.Body)
	}
	// A dataset is part of the spec: the same again is the same job.
	withData := `{"id":"train-2","gpus":1,"data":{"name":"imagenet","bytes":150000000000,"nodes":["n1"]}}`
	if rec := e.do("POST", "/v1/jobs", tokSubmitterA, withData); rec.Code != 201 {
		t.Fatalf("submit with data = %d %s", rec.Code, rec.Body)
	}
	if rec := e.do("POST", "/v1/jobs", tokSubmitterA, withData); rec.Code != 200 {
		t.Fatalf("the same submission with data again = %d %s", rec.Code, rec.Body)
	}
	if rec := e.do("POST", "/v1/jobs", tokSubmitterA, `{"id":"train-2","gpus":1,"data":{"name":"laion"}}`); rec.Code != 409 {
		t.Fatalf("the same ID with another dataset = %d %s", rec.Code, rec.Body)
	}
}

func TestWrongMethodIs405WithAllow(t *testing.T) {
	e := newEnv(t)
	rec := e.do("PATCH", "/v1/jobs", tokAdmin, "")
	if rec.Code != 405 || !strings.Contains(rec.Header().Get("Allow"), "POST") || errorOf(t, rec).Code != "method_not_allowed" {
		t.Fatalf("PATCH /v1/jobs = %d (Allow %q) %s", rec.Code, rec.Header().Get("Allow"), rec.Body)
	}
}

// TestGoldenResponses pins a few responses people read.
func TestGoldenResponses(t *testing.T) {
	e := newEnv(t)
	deadline := e.now.Add(2 * time.Hour).Format(time.RFC3339)
	tests := []struct {
		golden, method, path, token, body string
	}{
		{"submit_201.json", "POST", "/v1/jobs", tokSubmitterA, `{"id":"bert-7","name":"bert","tier":"production","gpus":2,"deadline":"` + deadline + `","labels":{"experiment":"e1","run":"7"}}`},
		{"predict_200.json", "POST", "/v1/predict", tokViewerA, `{"jobs":[{"gpus":1},{"gpus":8,"tier":"batch"}]}`},
		{"whatif_200.json", "POST", "/v1/whatif", tokAdmin, `{"add_jobs":[{"id":"big","gpus":8}],"horizon_s":86400}`},
		{"error_validation_400.json", "POST", "/v1/jobs", tokSubmitterA, `{"gpus":-1,"tier":"vip","deadline":"soon"}`},
		{"error_unauthorized_401.json", "GET", "/v1/jobs", "", ""},
		{"error_forbidden_403.json", "PUT", "/v1/mode", tokViewerA, `{"mode":"autopilot"}`},
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			rec := e.do(tt.method, tt.path, tt.token, tt.body)
			// wall_s is the only figure that changes from run to run.
			body := wallS.ReplaceAll(rec.Body.Bytes(), []byte(`"wall_s":0`))
			golden(t, tt.golden, body)
		})
	}
}

var wallS = regexp.MustCompile(`"wall_s":[0-9.e+-]+`)

// TestAnAnswerThatDoesNotEncodeIs500 gives the API a forecast it cannot
// write as JSON (NaN): the client gets a 500 error body, not a panic or a
// half-written answer.
func TestAnAnswerThatDoesNotEncodeIs500(t *testing.T) {
	e := newEnv(t)
	e.srv = api.New(api.Config{
		Service: controltest.New(controltest.WithForecaster(func(cluster.JobSpec) service.Forecast {
			return service.Forecast{DurationP50S: math.NaN(), Source: "broken"}
		})),
		Tokens: testTokens(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	rec := e.do("POST", "/v1/predict", tokViewerA, `{"jobs":[{"gpus":1}]}`)
	if rec.Code != 500 || errorOf(t, rec).Code != "internal" {
		t.Fatalf("= %d %s", rec.Code, rec.Body)
	}
}
