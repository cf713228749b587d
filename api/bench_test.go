package api_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prescient-sched/prescient/api"
	"github.com/prescient-sched/prescient/service"
)

// benchEnv is a server whose fake holds n queued jobs of tenant a.
func benchEnv(b *testing.B, n int) *env {
	e := newEnv(b)
	for i := range n {
		if _, err := e.fake.Submit(b.Context(), service.SubmitRequest{Spec: specOf("a", 1+i%8)}); err != nil {
			b.Fatal(err)
		}
	}
	return e
}

func serve(b *testing.B, e *env, method, path, token, body string, want int) {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	rec := httptest.NewRecorder()
	e.srv.Handler().ServeHTTP(rec, req)
	if rec.Code != want {
		b.Fatalf("%s %s = %d: %s", method, path, rec.Code, rec.Body)
	}
}

// BenchmarkPredict is POST /v1/predict through auth, decoding, validation
// and encoding, over the fake (whose forecast is a formula), so it measures
// the API's own cost per request.
func BenchmarkPredict(b *testing.B) {
	for _, n := range []int{1, 100} {
		specs := make([]string, n)
		for i := range specs {
			specs[i] = fmt.Sprintf(`{"gpus":%d,"tier":"batch","labels":{"run":"%d"}}`, 1+i%8, i)
		}
		body := `{"jobs":[` + strings.Join(specs, ",") + `]}`
		b.Run(fmt.Sprintf("jobs=%d", n), func(b *testing.B) {
			e := benchEnv(b, 0)
			for b.Loop() {
				serve(b, e, "POST", "/v1/predict", tokViewerA, body, http.StatusOK)
			}
		})
	}
}

// BenchmarkListJobs is GET /v1/jobs?limit=1000 with 1,000 queued jobs.
func BenchmarkListJobs(b *testing.B) {
	e := benchEnv(b, 1000)
	for b.Loop() {
		serve(b, e, "GET", "/v1/jobs?limit=1000", tokViewerA, "", http.StatusOK)
	}
}

// BenchmarkSubmit is POST /v1/jobs of a full spec.
func BenchmarkSubmit(b *testing.B) {
	e := benchEnv(b, 0)
	body := `{"name":"bert","tier":"production","gpus":8,"deadline":"2026-01-06T09:00:00Z","labels":{"experiment":"e1","run":"7"},"command":["python","train.py","--epochs","3"],"env":{"EPOCHS":"3"}}`
	for b.Loop() {
		serve(b, e, "POST", "/v1/jobs", tokSubmitterA, body, http.StatusCreated)
	}
}

// BenchmarkTokenLookup checks a token against 1,000 configured ones (each
// lookup hashes once and compares with all of them).
func BenchmarkTokenLookup(b *testing.B) {
	var ts api.Tokens
	for i := range 1000 {
		ts.List = append(ts.List, api.NewToken(fmt.Sprintf("token-number-%06d", i), "a", api.RoleViewer))
	}
	for b.Loop() {
		if _, ok := ts.Lookup("token-number-000500"); !ok {
			b.Fatal("not found")
		}
	}
}
