package slurm_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/prescient-sched/prescient/internal/browsertest"
	"github.com/prescient-sched/prescient/slurm"
)

// fakeClient is a Slurm cluster in memory: its jobs change as Update says.
type fakeClient struct {
	jobs  []slurm.Job
	nodes []slurm.Node
}

func (f *fakeClient) Jobs(context.Context) ([]slurm.Job, error) {
	return append([]slurm.Job(nil), f.jobs...), nil
}
func (f *fakeClient) Nodes(context.Context) ([]slurm.Node, error) { return f.nodes, nil }
func (f *fakeClient) Accounting(context.Context, time.Time) ([]byte, error) {
	return []byte(`{"jobs": []}`), nil
}
func (f *fakeClient) PowerDown(context.Context, string, string) error { return nil }
func (f *fakeClient) PowerUp(context.Context, string) error           { return nil }
func (f *fakeClient) Hold(context.Context, string) error              { return nil }
func (f *fakeClient) Release(context.Context, string) error           { return nil }
func (f *fakeClient) Priority(context.Context) (slurm.Priority, error) {
	return slurm.Priority{Type: "priority/multifactor", WeightAge: 1000, MaxAge: 7 * 24 * time.Hour}, nil
}
func (f *fakeClient) Update(_ context.Context, ids []string, u slurm.Update) error {
	for i := range f.jobs {
		if slices.Contains(ids, f.jobs[i].ID) {
			if u.TimeLimit != nil {
				f.jobs[i].TimeLimit = *u.TimeLimit
			}
			if u.AdminComment != nil {
				f.jobs[i].AdminComment = *u.AdminComment
			}
			if u.Nice != nil {
				f.jobs[i].Nice = *u.Nice
			}
		}
	}
	return nil
}

// servedRunner is a runner over a fake cluster of one 4-GPU node, one
// running job and two pending, one cycle done, served by Handler.
func servedRunner(t *testing.T, cfg slurm.Config) string {
	return servedRunnerWith(t, cfg, nil)
}

// servedRunnerWith is servedRunner with access deciding who reads; bert
// is of account nlp, sweep of vision.
func servedRunnerWith(t *testing.T, cfg slurm.Config, access slurm.Access) string {
	now := time.Now().UTC()
	run := slurm.Job{ID: "10", User: "carol", Partition: "gpu", State: "RUNNING", GPUs: 4, TimeLimit: 2 * time.Hour,
		Start: now.Add(-30 * time.Minute)}
	bert := slurm.Job{ID: "11", Name: "bert", User: "alice", Account: "nlp", Partition: "gpu", State: "PENDING", Reason: "Resources",
		GPUs: 4, TimeLimit: 24 * time.Hour, Priority: 20, Submit: now}
	sweep := slurm.Job{ID: "12", Name: "sweep", User: "bob", Account: "vision", Partition: "gpu", State: "PENDING", Reason: "Priority",
		GPUs: 1, TimeLimit: 30 * time.Minute, Priority: 10, Submit: now}
	c := &fakeClient{jobs: []slurm.Job{run, bert, sweep},
		nodes: []slurm.Node{{Name: "n1", GPUs: 4, CPUs: 16, States: []string{"ALLOCATED"}, Partitions: []string{"gpu"}}}}
	est := &fixedEstimator{}
	reg := prometheus.NewRegistry()
	metrics, err := slurm.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	r := &slurm.Runner{Client: c, Estimator: est, Dir: t.TempDir(), Config: cfg, Metrics: metrics}
	if err := r.Cycle(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	srv := httptest.NewServer(slurm.Handler(r, reg, access))
	t.Cleanup(srv.Close)
	return srv.URL
}

// tokenAccess knows an admin token and one of account nlp.
func tokenAccess(token string) (slurm.Reader, bool) {
	switch token {
	case "admin-token":
		return slurm.Reader{Admin: true}, true
	case "nlp-token":
		return slurm.Reader{Account: "nlp"}, true
	}
	return slurm.Reader{}, false
}

// With tokens, the JSON needs one: an account's token reads the advice of
// its account's jobs and not the changes; an admin's reads everything.
func TestHandlerAsksForATokenAndKeepsAccountsApart(t *testing.T) {
	url := servedRunnerWith(t, slurm.Config{Comment: true, Autopilot: true, Partitions: []string{"gpu"}, Floor: time.Minute}, tokenAccess)
	get := func(path, token string) (int, []string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, url+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var doc struct {
			Advice []slurm.Advice `json:"advice"`
		}
		var jobs []string
		if path == "/v1/slurm/advice" && resp.StatusCode == http.StatusOK {
			if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
				t.Fatal(err)
			}
			for _, a := range doc.Advice {
				jobs = append(jobs, a.Job+"/"+a.Account)
			}
		}
		if resp.StatusCode == http.StatusUnauthorized && resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("%s: 401 without WWW-Authenticate", path)
		}
		return resp.StatusCode, jobs
	}
	for _, c := range []struct {
		path, token string
		status      int
		jobs        string
	}{
		{"/v1/slurm/advice", "", http.StatusUnauthorized, ""},
		{"/v1/slurm/advice", "guess", http.StatusUnauthorized, ""},
		{"/v1/slurm/advice", "nlp-token", http.StatusOK, "11/nlp"},
		{"/v1/slurm/events", "nlp-token", http.StatusForbidden, ""},
		{"/v1/slurm/state", "nlp-token", http.StatusForbidden, ""},
		{"/v1/slurm/advice", "admin-token", http.StatusOK, "11/nlp 12/vision"}, // the account's read left the advice whole
		{"/v1/slurm/events", "admin-token", http.StatusOK, ""},
		{"/v1/slurm/state", "admin-token", http.StatusOK, ""},
		{"/healthz", "", http.StatusOK, ""},
		{"/", "", http.StatusOK, ""},
	} {
		status, jobs := get(c.path, c.token)
		if status != c.status || strings.Join(jobs, " ") != c.jobs {
			t.Errorf("GET %s with %q: %d %v, want %d %q", c.path, c.token, status, jobs, c.status, c.jobs)
		}
	}
}

func TestAMisspeltPartitionIsAnError(t *testing.T) {
	c := &fakeClient{nodes: []slurm.Node{{Name: "n1", GPUs: 4, States: []string{"IDLE"}, Partitions: []string{"gpu", "debug"}}}}
	for _, cfg := range []slurm.Config{
		{Autopilot: true, Partitions: []string{"gpus"}, Floor: time.Minute},
		{Autopilot: true, ParkIdleAfter: time.Minute, ParkPartitions: []string{"debgu"}},
	} {
		r := &slurm.Runner{Client: c, Estimator: &fixedEstimator{}, Dir: t.TempDir(), Config: cfg}
		err := r.Cycle(context.Background())
		if !errors.Is(err, slurm.ErrUnknownPartition) || !strings.Contains(err.Error(), "the cluster's: debug, gpu") {
			t.Errorf("%+v: %v", cfg, err)
		}
		r.Close()
	}
}

func TestHandlerServesTheAdvice(t *testing.T) {
	url := servedRunner(t, slurm.Config{Comment: true, Autopilot: true, Partitions: []string{"gpu"}, Floor: time.Minute})
	resp, err := http.Get(url + "/v1/slurm/advice")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc struct {
		Advice []map[string]any `json:"advice"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Advice) != 2 || doc.Advice[0]["job"] != "11" || doc.Advice[0]["user_limit_s"] != 86400.0 ||
		doc.Advice[0]["recommended_limit_s"] != 300.0 || doc.Advice[0]["predicted_start"] == nil || doc.Advice[0]["lowers"] != true {
		t.Fatalf("advice: %+v", doc.Advice)
	}
	resp, err = http.Get(url + "/v1/slurm/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ev struct {
		Events []slurm.Event `json:"events"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&ev); err != nil || len(ev.Events) != 4 { // two comments, two lowers
		t.Fatalf("events: %+v %v", ev.Events, err)
	}
	resp, err = http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, want := range []string{
		`prescient_slurm_cycles_total{result="ok"} 1`,
		`prescient_slurm_changes_total{kind="lower",result="ok"} 2`,
		`prescient_slurm_changes_total{kind="comment",result="ok"} 2`,
		"prescient_slurm_pending_jobs 2",
		"prescient_slurm_advised_lower_jobs 2",
		"prescient_slurm_lowered_jobs 2",
		"prescient_slurm_parked_nodes 0",
		"prescient_slurm_cycle_seconds_count 1",
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// The page in a real browser: the pending jobs in Slurm's order with the
// user's limit (the one it was lowered from), the advised limit, the
// predicted start, and the changes made.
func TestAdvicePageInABrowser(t *testing.T) {
	url := servedRunnerWith(t, slurm.Config{Comment: true, Autopilot: true, Partitions: []string{"gpu"}, Floor: time.Minute}, tokenAccess)
	b := browsertest.Start(t)
	b.Do("open the advice page", chromedp.Navigate(url+"/"))
	// It asks for a token; one it refuses leaves it asking.
	login := func(token string) {
		browsertest.Poll[bool](b, "wait for the token form", `!document.getElementById('login').hidden`, 10*time.Second)
		b.Do("enter a token", chromedp.SendKeys("#token", token), chromedp.Click("#login button"))
	}
	login("guess")
	if msg := browsertest.Poll[string](b, "wait for the refusal",
		`(() => { const e = document.getElementById('error'); return !e.hidden && e.textContent.includes('did not accept') ? e.textContent : ''; })()`,
		10*time.Second); !strings.Contains(msg, "did not accept this token") {
		t.Errorf("refusal: %q", msg)
	}
	login("admin-token")
	rows := browsertest.Poll[string](b, "wait for the pending jobs",
		`(() => { const r = [...document.querySelectorAll('#advice tbody tr[data-job]')];
		  return r.length === 2 ? r.map(tr => [...tr.cells].slice(0, 10).map(c => c.textContent).join('|')).join('\n') : ''; })()`,
		20*time.Second)
	lines := strings.Split(rows, "\n")
	if !strings.HasPrefix(lines[0], "11|bert|alice|gpu|4|1-00:00:00|0:05:00|0:02:00|") ||
		!strings.HasPrefix(lines[1], "12|sweep|bob|gpu|1|0:30:00|0:05:00|0:02:00|") {
		t.Fatalf("rows:\n%s", rows)
	}
	if f := strings.Split(lines[0], "|"); f[8] == "–" || f[9] == "–" {
		t.Errorf("no predicted start or end: %s", lines[0])
	}
	changes := browsertest.Eval[int](b, "count the changes", `document.querySelectorAll('#events tbody tr').length`)
	lowered := browsertest.Eval[int](b, "count the advised limits shown as lowered", `document.querySelectorAll('#advice td.lowered').length`)
	if changes != 4 || lowered != 2 {
		t.Errorf("%d changes, %d lowered limits; want 4 and 2", changes, lowered)
	}
	b.ShootView("slurm-advice")

	// An account's token: its account's jobs, and no changes.
	browsertest.Eval[bool](b, "keep nlp's token", `(sessionStorage.setItem('prescient.slurm.token', 'nlp-token'), true)`)
	b.Do("reload as nlp", chromedp.Reload())
	rows = browsertest.Poll[string](b, "wait for nlp's pending jobs",
		`(() => { const r = [...document.querySelectorAll('#advice tbody tr[data-job]')];
		  return r.length === 1 && document.getElementById('events').hidden ? r[0].dataset.job : ''; })()`, 20*time.Second)
	if rows != "11" || !browsertest.Eval[bool](b, "the note on the changes", `!document.getElementById('events-hidden').hidden`) {
		t.Errorf("nlp's page: job %q, the changes' note shown: want 11 and true", rows)
	}
}
