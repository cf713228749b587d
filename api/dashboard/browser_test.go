package dashboard_test

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/prescient-sched/prescient/api"
	"github.com/prescient-sched/prescient/api/dashboard"
	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/cluster/clustertest"
	"github.com/prescient-sched/prescient/control/controltest"
	"github.com/prescient-sched/prescient/internal/browsertest"
	"github.com/prescient-sched/prescient/service"
)

// The tokens of the tests; the API keeps only their hashes.
const (
	submitterToken = "submitter-token-of-tenant-ml"
	viewerToken    = "viewer-token-of-tenant-ml-00"
	adminToken     = "admin-token-of-tenant-ops-00"
)

// stack is the API server (engineer C's gin router over the in-memory fake
// control plane) with the dashboard mounted at /, as `prescient serve` runs
// them.
type stack struct {
	url  string
	fake *controltest.Fake
}

func newStack(t testing.TB, opts ...controltest.Option) stack {
	t.Helper()
	opts = append([]controltest.Option{controltest.WithNodes(
		clustertest.Node("dgx-1").GPUs(8, "A100-SXM4-80GB").Obj(),
		clustertest.Node("dgx-2").GPUs(8, "A100-SXM4-80GB").Obj(),
	)}, opts...)
	fake := controltest.New(opts...)
	srv := api.New(api.Config{
		Service: fake,
		Tokens: api.Tokens{List: []api.Token{
			api.NewToken(submitterToken, "ml", api.RoleSubmitter),
			api.NewToken(viewerToken, "ml", api.RoleViewer),
			api.NewToken(adminToken, "ops", api.RoleAdmin),
		}},
		Dashboard: dashboard.Handler(),
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	return stack{url: hs.URL, fake: fake}
}

// addUtilization records an hour of fleet telemetry ending now, rising from
// 10 % to 90 %.
func addUtilization(f *controltest.Fake, now time.Time) {
	for i := range 13 {
		f.AddSample(now.Add(-time.Hour+time.Duration(i)*5*time.Minute), 10+float64(i)*80/12, 1500+float64(i)*250)
	}
}

func TestDashboardScenario(t *testing.T) {
	s := newStack(t)
	addUtilization(s.fake, time.Now())
	job := browsertest.JobInput{
		Name: "bert-finetune", Tier: "batch", GPUs: 2,
		Labels:         map[string]string{"workload": "nlp", "experiment": "e42"},
		Command:        []string{"prescient", "workload", "--steps", "100"},
		Deadline:       time.Now().Add(48 * time.Hour).Truncate(time.Minute),
		Checkpointable: true,
	}
	seen := browsertest.DashboardScenario(t, s.url, submitterToken, job)

	// The page shows what the API answered: the fake's rule forecasts
	// 30 minutes per GPU at P50 and twice that at P90.
	if seen.State != "queued" || !strings.Contains(seen.Forecast, "P50 60.0 min") || !strings.Contains(seen.Forecast, "P90 2.0 h") {
		t.Errorf("the page shows state %q, forecast %q; want queued, P50 60.0 min and P90 2.0 h", seen.State, seen.Forecast)
	}
	// The chart draws one point per step of the stats series (an hour in 96 steps, both ends included).
	if seen.UtilPoints != 97 {
		t.Errorf("the utilization chart has %d points, want the series' 97", seen.UtilPoints)
	}
	// What the form sent is what the control plane got.
	st, err := s.fake.Job(context.Background(), cluster.JobID(seen.ID))
	if err != nil {
		t.Fatalf("the page shows job %s, the control plane does not know it: %v", seen.ID, err)
	}
	if st.Name != job.Name || st.Tenant != "ml" || st.Tier != "batch" || st.GPUs != 2 || st.GPUMilli != 1000 ||
		st.Labels["workload"] != "nlp" || st.Labels["experiment"] != "e42" || st.Deadline == nil || !st.Deadline.Equal(job.Deadline) {
		t.Errorf("the control plane got %+v; want the job typed into the form (%+v) for tenant ml", st, job)
	}
}

func TestWrongTokenShowsThe401(t *testing.T) {
	s := newStack(t)
	b := browsertest.Start(t)
	browsertest.Open(b, s.url)
	msg := browsertest.LoginRefused(b, "not-a-token-the-api-knows")
	t.Logf("the login form says: %s", msg)
	if !strings.Contains(msg, "401") || !strings.Contains(msg, "did not accept this token") {
		t.Fatalf("a wrong token shows %q; want the 401 and that the token was not accepted", msg)
	}
	// The refused token is not kept for the session.
	if kept := browsertest.Eval[bool](b, "read the session", `sessionStorage.getItem('prescient.token') !== null`); kept {
		t.Errorf("the refused token stays in sessionStorage")
	}
}

func TestViewerSeesThe403WhenSubmitting(t *testing.T) {
	s := newStack(t)
	b := browsertest.Start(t)
	browsertest.Open(b, s.url)
	browsertest.Login(b, viewerToken)
	msg := browsertest.SubmitRefused(b, browsertest.JobInput{Name: "not-allowed", GPUs: 1})
	t.Logf("the submit form says: %s", msg)
	if !strings.Contains(msg, "403 forbidden") {
		t.Fatalf("a viewer's submission shows %q; want 403 forbidden with the API's reason", msg)
	}
	if jobs, _ := s.fake.Jobs(context.Background(), service.JobQuery{}); len(jobs) != 0 {
		t.Errorf("the control plane holds %d jobs after a refused submission, want none", len(jobs))
	}
}

func TestBadInputIsShownWithTheField(t *testing.T) {
	s := newStack(t)
	b := browsertest.Start(t)
	browsertest.Open(b, s.url)
	browsertest.Login(b, submitterToken)
	// 4097 GPUs passes the form and is refused by the API, which names the field.
	msg := browsertest.SubmitRefused(b, browsertest.JobInput{Name: "too-big", GPUs: 4097})
	if !strings.Contains(msg, "400") || !strings.Contains(msg, "gpus") {
		t.Errorf("4097 GPUs shows %q; want the API's 400 naming gpus", msg)
	}
	// A share over 1000 milli-GPUs is refused by the page itself, naming the field.
	msg = browsertest.SubmitRefused(b, browsertest.JobInput{Name: "odd-share", GPUs: 1, GPUMilli: 1500})
	if !strings.Contains(msg, "share of each GPU") {
		t.Errorf("a share of 1500 shows %q; want a message naming the share", msg)
	}
}

// TestSessionSurvivesAReloadAndEndsAtLogout logs in, reloads the page and
// is still logged in with the same identity, with the token in this tab's
// sessionStorage only (no localStorage, no cookie, so a new browser or tab
// asks again), and ends the session at logout.
func TestSessionSurvivesAReloadAndEndsAtLogout(t *testing.T) {
	s := newStack(t)
	addUtilization(s.fake, time.Now())
	b := browsertest.Start(t)
	browsertest.Open(b, s.url)
	shoot(b, "", "login")
	browsertest.Login(b, submitterToken)
	whoami := `document.getElementById('whoami').textContent === 'submitter · tenant ml'`
	browsertest.Poll[bool](b, "wait for who the token is", whoami, browsertest.ScenarioTimeout)
	b.Do("reload the page", chromedp.Reload())
	browsertest.Poll[bool](b, "wait for the dashboard without a new login",
		`!document.getElementById('app').hidden && document.getElementById('login').hidden && `+whoami, browsertest.ScenarioTimeout)
	browsertest.WaitForUtilization(b)
	if kept := browsertest.Eval[string](b, "read where the token is kept",
		`JSON.stringify([sessionStorage.getItem('prescient.token') !== null, localStorage.length, document.cookie])`); kept != `[true,0,""]` {
		t.Errorf("[token in sessionStorage, localStorage entries, cookies] = %s; want the token in the session only", kept)
	}
	shoot(b, "", "overview")
	b.Do("log out", chromedp.Click(chromedp.ID("logout")))
	browsertest.Poll[bool](b, "wait for the login form",
		`!document.getElementById('login').hidden && sessionStorage.getItem('prescient.token') === null`, browsertest.ScenarioTimeout)
}

// TestDashboardShowsTheFleetAndItsHistory fills the fake control plane
// with a running job, a failed one, a recommendation and telemetry, and
// checks that every section of the page shows them.
func TestDashboardShowsTheFleetAndItsHistory(t *testing.T) {
	now := time.Now().UTC()
	clock := &testClock{t: now.Add(-50 * time.Minute)}
	s := newStack(t, controltest.WithClock(clock.now),
		controltest.WithPrices(controltest.Prices{PerGPUHour: 2.5, PerKWh: 0.2, Currency: "USD", GPUPowerW: 400}))
	ctx, f := context.Background(), s.fake
	addUtilization(f, now)
	spec := func(name string, tier cluster.Tier, gpus int, labels map[string]string) service.SubmitRequest {
		return service.SubmitRequest{Spec: cluster.JobSpec{Name: name, Tenant: "ml", Tier: tier, GPUs: gpus, GPUMilli: cluster.MilliGPU, Labels: labels}}
	}
	// 50 minutes ago three jobs were submitted; they started 5 minutes
	// later; 40 minutes after that one finished and one failed.
	running, err := f.Submit(ctx, spec("<b>resnet</b>", cluster.TierProduction, 2, map[string]string{"workload": "vision"}))
	must(t, err)
	failed, err := f.Submit(ctx, spec("gpt-pretrain", cluster.TierStandard, 4, nil))
	must(t, err)
	done, err := f.Submit(ctx, spec("eval-sweep", cluster.TierBatch, 1, nil))
	must(t, err)
	clock.advance(5 * time.Minute)
	must(t, f.Start(running.ID, "dgx-1", 0, 1))
	must(t, f.Start(failed.ID, "dgx-2", 4, 5, 6, 7))
	must(t, f.Start(done.ID, "dgx-2", 0))
	clock.advance(40 * time.Minute)
	must(t, f.Finish(failed.ID, 137, "CUDA out of memory"))
	must(t, f.Finish(done.ID, 0, ""))
	clock.set(now)
	f.SetGPUTelemetry(cluster.GPURef{Node: "dgx-1", Index: 0}, controltest.GPUTelemetry{UtilizationPct: 87, MemoryUsedBytes: 30 << 30, PowerW: 350})
	f.AddRecommendation(service.Recommendation{Job: running.ID, Kind: "preempt", Reason: "a production job waits for these GPUs"})
	f.SetGPUIdleFor(cluster.GPURef{Node: "dgx-1", Index: 0}, time.Hour)
	f.SetGPUIdleFor(cluster.GPURef{Node: "dgx-1", Index: 1}, time.Hour)
	f.SetLoan("dgx-2", service.NodeLoan{Pool: "inference", State: "lent", Since: now})
	eight := 8
	f.SetQuotaUsage([]service.QuotaUsage{{Tenant: "ml", Cohort: "lab", NominalGPUs: 4, BorrowingLimitGPUs: &eight, HeldGPUs: 7, BorrowedGPUs: 3}})

	b := browsertest.Start(t)
	browsertest.Open(b, s.url)
	browsertest.Login(b, adminToken)
	checks := []struct{ what, expr string }{
		{"the running job on its GPUs", `[...document.querySelectorAll('#fleet [data-gpu="dgx-1/gpu1"] .gpu-job')].some(e => e.textContent === '` + string(running.ID) + `')`},
		{"the GPU's telemetry", `document.querySelector('#fleet [data-gpu="dgx-1/gpu0"]').textContent.includes('util 87%')`},
		{"the job's placement", `document.querySelector('#jobs tr[data-job-id="` + string(running.ID) + `"] .placement').textContent.includes('dgx-1')`},
		{"the job name as text, not markup", `!document.querySelector('#jobs b') && document.querySelector('#jobs').textContent.includes('<b>resnet</b>')`},
		{"the failure with its reason", `document.getElementById('failed').textContent === '1' && document.getElementById('failures').textContent.includes('CUDA out of memory')`},
		{"the failed job's exit code", `document.querySelector('#jobs tr[data-job-id="` + string(failed.ID) + `"]').dataset.state === 'failed' && document.querySelector('#jobs tr[data-job-id="` + string(failed.ID) + `"] .state').textContent.includes('exit 137')`},
		{"the recommendation", `document.getElementById('recommendations').textContent.includes('a production job waits for these GPUs')`},
		{"the tenant's quota use", `document.querySelector('#quotas tr[data-quota="ml/"]').textContent === 'mllabany7 / 438—'`},
		{"the cost of the workload", `!!document.querySelector('#cost tr[data-workload]') && document.getElementById('cost').textContent.includes('USD')`},
		{"the queue wait by tier", `document.querySelector('#wait-tier .bar-row[data-key="production"]').textContent.includes('5.0 min')`},
		{"the queue wait by tenant", `!!document.querySelector('#wait-tenant .bar-row[data-key="ml"]')`},
		{"the finished job's forecast against its actual", `Number(document.getElementById('forecast-chart').dataset.points) === 1 && document.querySelector('#forecast-chart title').textContent === '` + string(done.ID) + `: took 40.0 min, forecast P50 30.0 min, P90 60.0 min'`},
		{"the completion", `document.getElementById('completed').textContent === '1'`},
		{"the utilization peak", `[...document.querySelectorAll('#util-chart circle.point title')].some(e => e.textContent.startsWith('utilization %: 90%'))`},
		{"the power chart", `document.querySelectorAll('#power-chart circle.point').length > 0`},
		{"the idle forecast of each node", `!!document.querySelector('#idle tr[data-pool="dgx-1"]') && !!document.querySelector('#idle tr[data-pool="dgx-2"]')`},
		{"the job holding idle GPUs", `document.querySelector('#idle tr[data-idle-job="` + string(running.ID) + `"]').textContent.includes('60.0 min')`},
		{"the inference node's loan", `document.querySelector('#fleet [data-node="dgx-2"] .badge.loan').textContent === 'lent to training' && !document.querySelector('#fleet [data-node="dgx-1"] .badge.loan')`},
		{"the mode", `document.getElementById('mode').textContent === 'advisor'`},
		{"no error", `document.getElementById('error').hidden`},
	}
	for _, c := range checks {
		browsertest.Poll[bool](b, "wait for "+c.what, c.expr, browsertest.ScenarioTimeout)
	}
}

// TestDashboardShowsParkedNodes checks that a parked and a waking node
// show their state, dimmed.
func TestDashboardShowsParkedNodes(t *testing.T) {
	s := newStack(t)
	s.fake.SetParking("dgx-1", "parked")
	s.fake.SetParking("dgx-2", "waking")
	b := browsertest.Start(t)
	browsertest.Open(b, s.url)
	browsertest.Login(b, adminToken)
	for _, c := range []struct{ what, expr string }{
		{"the parked node", `document.querySelector('#fleet .node.state-parked[data-node="dgx-1"] .badge').textContent === 'parked'`},
		{"the waking node", `document.querySelector('#fleet .node.state-waking[data-node="dgx-2"] .badge').textContent === 'waking'`},
		{"dimmed", `getComputedStyle(document.querySelector('#fleet [data-node="dgx-1"]')).opacity === '0.6'`},
	} {
		browsertest.Poll[bool](b, "wait for "+c.what, c.expr, browsertest.ScenarioTimeout)
	}
}

func TestARevokedTokenEndsTheSession(t *testing.T) {
	s := newStack(t)
	b := browsertest.Start(t)
	browsertest.Open(b, s.url)
	browsertest.Login(b, submitterToken)
	// The token stops working while the page is open (as when it is
	// removed from the config): the next refresh gets a 401.
	browsertest.Eval[bool](b, "swap the token", `(sessionStorage.setItem('prescient.token', 'a-token-the-api-no-longer-knows'), true)`)
	browsertest.Eval[bool](b, "refresh", `(window.PrescientDashboard.refresh(), true)`)
	msg := browsertest.Poll[string](b, "wait for the login form with the reason",
		`(() => { const e = document.getElementById('login-error'); return document.getElementById('app').hidden && !e.hidden ? e.textContent : ''; })()`,
		browsertest.ScenarioTimeout)
	if !strings.Contains(msg, "session ended") || !strings.Contains(msg, "401") {
		t.Errorf("after a 401 the login form says %q; want that the session ended, with the 401", msg)
	}
}

func TestAnAPIErrorIsShownWhereItHappened(t *testing.T) {
	s := newStack(t)
	s.fake.FailWith("Stats", context.DeadlineExceeded) // not the caller's fault: the API answers 500
	b := browsertest.Start(t)
	browsertest.Open(b, s.url)
	browsertest.Login(b, submitterToken)
	msg := browsertest.Poll[string](b, "wait for the stats error",
		`(() => { const e = document.querySelector('.section-error[data-for="stats"]'); return e.hidden ? '' : e.textContent; })()`,
		browsertest.ScenarioTimeout)
	if !strings.Contains(msg, "500") || !strings.Contains(msg, "/v1/stats") {
		t.Errorf("the stats section shows %q; want the 500 of GET /v1/stats", msg)
	}
	if banner := browsertest.Eval[string](b, "read the banner", `document.getElementById('error').textContent`); !strings.Contains(banner, "/v1/stats") {
		t.Errorf("the error banner shows %q; want the failed stats call", banner)
	}
	// The rest of the page still works.
	browsertest.Poll[bool](b, "wait for the fleet", `!!document.querySelector('#fleet [data-node="dgx-1"]')`, browsertest.ScenarioTimeout)
}

// testClock is the fake control plane's clock, set by the test.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) advance(d time.Duration) { c.set(c.now().Add(d)) }

func (c *testClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
