package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/api"
	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/service"
)

// routeClass is who a route is for.
type routeClass string

const (
	open      routeClass = "open"
	read      routeClass = "read"   // viewer, submitter, admin
	write     routeClass = "submit" // submitter, admin
	adminOnly routeClass = "admin"
	agentOnly routeClass = "agent"
)

func (c routeClass) allows(r api.Role) bool {
	switch c {
	case read:
		return r == api.RoleViewer || r == api.RoleSubmitter || r == api.RoleAdmin
	case write:
		return r == api.RoleSubmitter || r == api.RoleAdmin
	case adminOnly:
		return r == api.RoleAdmin
	case agentOnly:
		return r == api.RoleAgent
	}
	return true
}

type caller struct {
	name   string
	token  string
	role   api.Role
	tenant string
}

var callers = []caller{
	{"no token", "", "", ""},
	{"unknown token", "not-a-token-anyone-was-given", "", ""},
	{"viewer of a", tokViewerA, api.RoleViewer, "a"},
	{"submitter of a", tokSubmitterA, api.RoleSubmitter, "a"},
	{"viewer of b", tokViewerB, api.RoleViewer, "b"},
	{"submitter of b", tokSubmitterB, api.RoleSubmitter, "b"},
	{"admin", tokAdmin, api.RoleAdmin, "ops"},
	{"agent", tokAgent, api.RoleAgent, ""},
}

// TestAuthorization runs every route class with every role and tenant: no
// valid token is 401 with WWW-Authenticate, a role the route does not take
// 403, a job of another tenant 404 as a missing one (admins excepted),
// everything else the route's success status.
func TestAuthorization(t *testing.T) {
	calls := []struct {
		name, method, path, body string
		class                    routeClass
		ok                       int
		jobOfA                   bool // the path names tenant a's job
	}{
		{"probe", "GET", "/healthz", "", open, 200, false},
		{"readiness", "GET", "/readyz", "", open, 200, false},
		{"metrics (open by default)", "GET", "/metrics", "", open, 200, false},
		{"OpenAPI document", "GET", "/v1/openapi.json", "", open, 200, false},
		{"list jobs", "GET", "/v1/jobs", "", read, 200, false},
		{"get a job", "GET", "/v1/jobs/ja", "", read, 200, true},
		{"a job's history", "GET", "/v1/jobs/ja/events", "", read, 200, true},
		{"submit", "POST", "/v1/jobs", `{"gpus":1}`, write, 201, false},
		{"cancel with DELETE", "DELETE", "/v1/jobs/ja", "", write, 200, true},
		{"cancel with POST", "POST", "/v1/jobs/ja/cancel", "", write, 200, true},
		{"fleet", "GET", "/v1/fleet", "", read, 200, false},
		{"predict", "POST", "/v1/predict", `{"jobs":[{"gpus":2}]}`, read, 200, false},
		{"recommendations", "GET", "/v1/recommendations", "", read, 200, false},
		{"what-if", "POST", "/v1/whatif", `{"add_jobs":[{"gpus":1}]}`, read, 200, false},
		{"stats", "GET", "/v1/stats", "", read, 200, false},
		{"models", "GET", "/v1/models", "", read, 200, false},
		{"retrain", "POST", "/v1/models/retrain", "", adminOnly, 202, false},
		{"rollback", "POST", "/v1/models/duration/rollback", "", adminOnly, 200, false},
		{"get mode", "GET", "/v1/mode", "", read, 200, false},
		{"tenants and their quotas", "GET", "/v1/tenants", "", adminOnly, 200, false},
		{"set mode", "PUT", "/v1/mode", `{"mode":"autopilot"}`, adminOnly, 200, false},
		{"who the token is", "GET", "/v1/whoami", "", read, 200, false},
		{"agent protocol", "POST", "/v1/agents/register", `{}`, agentOnly, 200, false},
	}
	for _, call := range calls {
		for _, who := range callers {
			t.Run(call.name+"/"+who.name, func(t *testing.T) {
				e := newEnv(t, withAgents())
				e.submit(tokSubmitterA, "ja")
				want := call.ok
				switch {
				case call.class == open:
				case who.role == "":
					want = http.StatusUnauthorized
				case !call.class.allows(who.role):
					want = http.StatusForbidden
				case call.jobOfA && who.role != api.RoleAdmin && who.tenant != "a":
					want = http.StatusNotFound // as if it did not exist: IDs are not enumerable
				}
				rec := e.do(call.method, call.path, who.token, call.body)
				if rec.Code != want {
					t.Fatalf("%s %s as %s = %d, want %d: %s", call.method, call.path, who.name, rec.Code, want, rec.Body)
				}
				switch want {
				case http.StatusUnauthorized:
					if !strings.HasPrefix(rec.Header().Get("WWW-Authenticate"), "Bearer") {
						t.Fatalf("401 without a Bearer WWW-Authenticate header: %q", rec.Header().Get("WWW-Authenticate"))
					}
					if errorOf(t, rec).Code != "unauthorized" {
						t.Fatalf("401 body: %s", rec.Body)
					}
				case http.StatusForbidden:
					if errorOf(t, rec).Code != "forbidden" {
						t.Fatalf("403 body: %s", rec.Body)
					}
				case http.StatusNotFound:
					missing := e.do(call.method, strings.Replace(call.path, "/ja", "/jz", 1), who.token, call.body)
					if got, want := rec.Body.String(), strings.Replace(missing.Body.String(), "jz", "ja", 1); missing.Code != 404 || got != want {
						t.Fatalf("another tenant's job answered %s; a missing one %d %s", got, missing.Code, missing.Body)
					}
				}
			})
		}
	}
}

// withAgents mounts an agent handler that answers 200 with the principal
// it was given.
func withAgents() envOption {
	return func(c *api.Config) {
		c.Agents = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p, ok := api.PrincipalFrom(r.Context())
			if !ok || p.Role != api.RoleAgent || !strings.HasPrefix(r.URL.Path, "/v1/agents/") {
				http.Error(w, fmt.Sprintf("principal %+v %v, path %s", p, ok, r.URL.Path), http.StatusTeapot)
				return
			}
			w.WriteHeader(http.StatusOK)
		})
	}
}

func TestTenantsSeeOnlyTheirOwnJobs(t *testing.T) {
	e := newEnv(t)
	e.submit(tokSubmitterA, "ja1")
	e.submit(tokSubmitterA, "ja2")
	e.submit(tokSubmitterB, "jb1")
	if err := e.fake.Start("jb1", "n1", 0); err != nil {
		t.Fatal(err)
	}
	if err := e.fake.Start("ja1", "n1", 1); err != nil {
		t.Fatal(err)
	}
	ids := func(token, query string) string {
		rec := e.do("GET", "/v1/jobs"+query, token, "")
		if rec.Code != 200 {
			t.Fatalf("GET /v1/jobs%s: %d %s", query, rec.Code, rec.Body)
		}
		var l api.JobList
		decode(t, rec, &l)
		var s []string
		for _, j := range l.Jobs {
			s = append(s, string(j.ID))
		}
		return strings.Join(s, ",")
	}
	tests := []struct {
		name, token, query, want string
	}{
		{"a viewer lists its tenant's jobs", tokViewerA, "", "ja2,ja1"},
		{"b's submitter lists b's", tokSubmitterB, "", "jb1"},
		{"naming its own tenant is allowed", tokViewerA, "?tenant=a", "ja2,ja1"},
		{"an admin lists every tenant's", tokAdmin, "", "jb1,ja2,ja1"},
		{"an admin filters by tenant", tokAdmin, "?tenant=b", "jb1"},
		{"by state", tokAdmin, "?state=running", "jb1,ja1"},
		{"by label and limit", tokAdmin, "?label=experiment=e1&limit=2", "jb1,ja2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ids(tt.token, tt.query); got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
	t.Run("another tenant in the query is 403", func(t *testing.T) {
		if rec := e.do("GET", "/v1/jobs?tenant=b", tokViewerA, ""); rec.Code != 403 {
			t.Fatalf("= %d %s", rec.Code, rec.Body)
		}
	})
	t.Run("submitting for another tenant is 403, for an admin 201", func(t *testing.T) {
		if rec := e.do("POST", "/v1/jobs", tokSubmitterA, `{"tenant":"b","gpus":1}`); rec.Code != 403 {
			t.Fatalf("submitter of a for b = %d %s", rec.Code, rec.Body)
		}
		rec := e.do("POST", "/v1/jobs", tokAdmin, `{"tenant":"b","gpus":1}`)
		var st service.JobStatus
		decode(t, rec, &st)
		if rec.Code != 201 || st.Tenant != "b" {
			t.Fatalf("admin for b = %d %s", rec.Code, rec.Body)
		}
	})
	t.Run("the fleet shows a viewer only its tenant's job IDs", func(t *testing.T) {
		var fs service.FleetState
		decode(t, e.do("GET", "/v1/fleet", tokViewerA, ""), &fs)
		var seen []string
		for _, g := range fs.Nodes[0].GPUs {
			for _, j := range g.Jobs {
				seen = append(seen, string(j))
			}
		}
		if strings.Join(seen, ",") != "ja1" || fs.GPUsBusy != 2 || fs.Nodes[0].GPUs[0].AllocatedMilli != 1000 {
			t.Fatalf("viewer of a sees jobs %v, %g GPUs busy, GPU 0 allocated %d", seen, fs.GPUsBusy, fs.Nodes[0].GPUs[0].AllocatedMilli)
		}
	})
	t.Run("a job ID of another tenant cannot be taken over", func(t *testing.T) {
		rec := e.do("POST", "/v1/jobs", tokSubmitterA, `{"id":"jb1","gpus":1}`)
		if rec.Code != 409 || strings.Contains(rec.Body.String(), `"tenant"`) {
			t.Fatalf("= %d %s; want 409 that shows nothing of b's job", rec.Code, rec.Body)
		}
	})
	t.Run("what-if removes only one's own jobs and shows one's own", func(t *testing.T) {
		rec := e.do("POST", "/v1/whatif", tokViewerA, `{"remove_jobs":["jb1"]}`)
		missing := e.do("POST", "/v1/whatif", tokViewerA, `{"remove_jobs":["jz1"]}`)
		if rec.Code != 400 || rec.Body.String() != strings.Replace(missing.Body.String(), "jz1", "jb1", 1) {
			t.Fatalf("removing b's job as a = %d %s; a missing one %d %s", rec.Code, rec.Body, missing.Code, missing.Body)
		}
		var res service.WhatIfResult
		decode(t, e.do("POST", "/v1/whatif", tokViewerA, `{"remove_jobs":["ja2"],"add_jobs":[{"gpus":1}]}`), &res)
		var seen []string
		for _, j := range res.Jobs {
			seen = append(seen, string(j.Job))
		}
		if strings.Join(seen, ",") != "ja1,whatif-1" {
			t.Fatalf("viewer of a sees %v in the what-if answer", seen)
		}
	})
}

func TestMetricsCanRequireAToken(t *testing.T) {
	e := newEnv(t, func(c *api.Config) { c.MetricsNeedToken = true })
	if rec := e.do("GET", "/metrics", "", ""); rec.Code != 401 {
		t.Fatalf("GET /metrics without a token = %d", rec.Code)
	}
	for _, tok := range []string{tokViewerA, tokAgent, tokAdmin} {
		if rec := e.do("GET", "/metrics", tok, ""); rec.Code != 200 {
			t.Fatalf("GET /metrics with a valid token = %d", rec.Code)
		}
	}
}

func TestNoTokensRefusesEveryV1Request(t *testing.T) {
	e := newEnv(t, func(c *api.Config) { c.Tokens = api.Tokens{} })
	if rec := e.do("GET", "/v1/jobs", tokAdmin, ""); rec.Code != 401 {
		t.Fatalf("with no tokens configured GET /v1/jobs = %d", rec.Code)
	}
	if rec := e.do("GET", "/healthz", "", ""); rec.Code != 200 {
		t.Fatalf("healthz = %d", rec.Code)
	}
}

func TestDashboardIsServedOpenAtTheRoot(t *testing.T) {
	e := newEnv(t, func(c *api.Config) {
		c.Dashboard = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprintf(w, "<html>dashboard %s</html>", r.URL.Path)
		})
	})
	for _, p := range []string{"/", "/app.js"} {
		rec := e.do("GET", p, "", "")
		if rec.Code != 200 || !strings.Contains(rec.Body.String(), "dashboard "+p) {
			t.Fatalf("GET %s = %d %s", p, rec.Code, rec.Body)
		}
	}
	// The API's unknown paths stay JSON 404s, not the page.
	if rec := e.do("GET", "/v1/nope", tokAdmin, ""); rec.Code != 404 || errorOf(t, rec).Code != "not_found" {
		t.Fatalf("GET /v1/nope = %d %s", rec.Code, rec.Body)
	}
}

func TestStatsAndRecommendationsShowATenantOnlyItsOwn(t *testing.T) {
	e := newEnv(t)
	e.submit(tokSubmitterA, "ja")
	e.submit(tokSubmitterB, "jb")
	e.now = e.now.Add(time.Minute)
	for i, id := range []cluster.JobID{"ja", "jb"} {
		if err := e.fake.Start(id, "n1", i); err != nil {
			t.Fatal(err)
		}
	}
	e.now = e.now.Add(time.Hour)
	for _, id := range []cluster.JobID{"ja", "jb"} {
		if err := e.fake.Finish(id, 0, ""); err != nil {
			t.Fatal(err)
		}
	}
	e.fake.AddRecommendation(service.Recommendation{Job: "ja", Kind: "start", Reason: "r"})
	e.fake.AddRecommendation(service.Recommendation{Job: "jb", Kind: "start", Reason: "r"})
	e.fake.AddRecommendation(service.Recommendation{Kind: "park", Reason: "r"})
	e.fake.SetQuotaUsage([]service.QuotaUsage{{Tenant: "a", NominalGPUs: 4, HeldGPUs: 6, BorrowedGPUs: 2}, {Tenant: "b", NominalGPUs: 4}})

	var st service.Stats
	decode(t, e.do("GET", "/v1/stats", tokViewerA, ""), &st)
	if len(st.WaitByTenant) != 1 || st.WaitByTenant[0].Key != "a" || len(st.Cost) != 1 || st.Cost[0].Workload != "a" ||
		len(st.Forecasts) != 1 || st.Forecasts[0].Job != "ja" || st.Completed != 2 || len(st.Quotas) != 1 || st.Quotas[0].Tenant != "a" {
		t.Fatalf("viewer of a: waits %+v, cost %+v, forecasts %+v, completed %d", st.WaitByTenant, st.Cost, st.Forecasts, st.Completed)
	}
	decode(t, e.do("GET", "/v1/stats", tokAdmin, ""), &st)
	if len(st.WaitByTenant) != 2 || len(st.Forecasts) != 2 || len(st.Quotas) != 2 {
		t.Fatalf("admin: waits %+v, forecasts %+v", st.WaitByTenant, st.Forecasts)
	}
	var recs api.RecommendationList
	decode(t, e.do("GET", "/v1/recommendations", tokViewerA, ""), &recs)
	var kinds []string
	for _, r := range recs.Recommendations {
		kinds = append(kinds, string(r.Job)+":"+r.Kind)
	}
	if strings.Join(kinds, ",") != ":park,ja:start" {
		t.Fatalf("viewer of a sees recommendations %v", kinds)
	}
}
