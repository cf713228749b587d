package api_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/prescient-sched/prescient/api"
)

// FuzzSubmitToTheRealPlane posts arbitrary bodies to POST /v1/jobs of the
// real control plane and store (FuzzSubmit's fake checks less): never a
// 5xx, never a panic, a JSON answer, a 400 with its code and message.
func FuzzSubmitToTheRealPlane(f *testing.F) {
	for _, s := range []string{
		`{"gpus":1}`, `{"gpus":0}`, `null`, `{"gpus":1,"deadline":"9999-12-31T23:59:59Z"}`,
		`{"gpus":1,"env":{"LD_PRELOAD":"x"}}`, `{"gpus":1,"GPUS":2}`, `{"gpus":1,"name":"\ud800"}`,
		`{"gpus":1,"gpu_models":["H100"]}`, `{"gpus":4,"gang_size":3}`, `{"gpus":1,"gpu_milli":1}`,
		`{"id":"a","gpus":1,"labels":{"k":"v"},"deadline":"2027-01-01T00:00:00Z","checkpoint_cost_s":1e300}`,
		`{"gpus":1,"command":["true"],"env":{"A":"1"},"tier":"production","data":{"name":"d","bytes":-1}}`,
	} {
		f.Add(s)
	}
	e := realPlane(f)
	f.Fuzz(func(t *testing.T, body string) {
		e.t = t
		rec := e.do("POST", "/v1/jobs", tokSubmitterA, body)
		if rec.Code != 200 && rec.Code != 201 && rec.Code != 400 && rec.Code != 409 {
			t.Fatalf("POST /v1/jobs %q = %d: %s", body, rec.Code, rec.Body)
		}
		if !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("POST /v1/jobs %q: the answer is not JSON: %s", body, rec.Body)
		}
		if rec.Code == 400 {
			errorOf(t, rec)
		}
	})
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

// GET /v1/jobs pages with limit and after (the answer's next), in the
// order submitted; a cursor of another tenant's job answers as a missing one.
func TestJobListingPagesWithAfter(t *testing.T) {
	e := realPlane(t)
	for i := range 5 {
		e.do("POST", "/v1/jobs", tokSubmitterA, fmt.Sprintf(`{"id":"a%d","gpus":1}`, i))
	}
	e.do("POST", "/v1/jobs", tokSubmitterB, `{"id":"b0","gpus":1}`)
	var seen []string
	path := "/v1/jobs?limit=2"
	for range 4 {
		var page api.JobList
		rec := e.do("GET", path, tokViewerA, "")
		decode(t, rec, &page)
		for _, j := range page.Jobs {
			seen = append(seen, string(j.ID))
		}
		if page.Next == "" {
			break
		}
		path = "/v1/jobs?limit=2&after=" + string(page.Next)
	}
	if strings.Join(seen, ",") != "a0,a1,a2,a3,a4" {
		t.Errorf("pages of tenant a: %v; want a0 to a4, each once", seen)
	}
	other := e.do("GET", "/v1/jobs?after=b0", tokViewerA, "")
	missing := e.do("GET", "/v1/jobs?after=zz", tokViewerA, "")
	if other.Code != 400 || other.Body.String() != strings.Replace(missing.Body.String(), "zz", "b0", 1) {
		t.Errorf("after another tenant's job: %d %s; after a missing one: %d %s", other.Code, other.Body, missing.Code, missing.Body)
	}
}
