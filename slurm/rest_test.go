package slurm_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/slurm"
)

// fakeRESTD is a slurmrestd that answers one data parser version with
// the documents of testdata (written in the shapes of v0.0.40's
// schema, which v0.0.41 to v0.0.43 keep for what is read), and records
// the changes it is sent.
type fakeRESTD struct {
	version string
	mu      sync.Mutex
	posts   []string // "PATH BODY"
	queries []string // the accounting's
	failJob string   // an update of this job fails as v0.0.42 says it
}

func (f *fakeRESTD) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-SLURM-USER-TOKEN") != "tok" || r.Header.Get("X-SLURM-USER-NAME") != "ops" {
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, "Authentication failure")
		return
	}
	prefix := "/slurm/" + f.version + "/"
	files := map[string]string{prefix + "jobs": "testdata/squeue_v0.0.40.json", prefix + "nodes": "testdata/scontrol_nodes_v0.0.40.json",
		"/slurmdb/" + f.version + "/jobs": "../datasets/testdata/sacct_v0.0.40.json"}
	switch {
	case r.Method == http.MethodGet && r.URL.Path == prefix+"ping":
		io.WriteString(w, `{"pings": [{"hostname": "ctl", "pinged": "UP"}], "meta": {}, "errors": [], "warnings": []}`)
	case r.Method == http.MethodGet && files[r.URL.Path] != "":
		if strings.HasPrefix(r.URL.Path, "/slurmdb/") {
			f.mu.Lock()
			f.queries = append(f.queries, r.URL.RawQuery)
			f.mu.Unlock()
		}
		b, err := os.ReadFile(files[r.URL.Path])
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Write(b)
	case r.Method == http.MethodPost && (strings.HasPrefix(r.URL.Path, prefix+"job/") || strings.HasPrefix(r.URL.Path, prefix+"node/")):
		b, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.posts = append(f.posts, r.URL.Path+" "+string(b))
		f.mu.Unlock()
		id := strings.TrimPrefix(r.URL.Path, prefix+"job/")
		code, msg := 0, ""
		if id == f.failJob {
			code, msg = 2017, "Invalid job id specified"
		}
		json.NewEncoder(w).Encode(map[string]any{"results": []any{map[string]any{"job_id": id, "step_id": "", "error": msg,
			"error_code": code, "why": ""}}, "meta": map[string]any{}, "errors": []any{}, "warnings": []any{}})
	default:
		http.NotFound(w, r)
	}
}

// TestRESTSpeaksNewerVersions: against a server of v0.0.41, REST finds
// the version, reads jobs, nodes and accounting in its shapes, and
// writes limits, Nice, AdminComment, holds and node power as its schema
// says, with the token and user on every request.
func TestRESTSpeaksNewerVersions(t *testing.T) {
	fake := &fakeRESTD{version: "v0.0.41", failJob: "13"}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	tokenFile := filepath.Join(t.TempDir(), "jwt")
	os.WriteFile(tokenFile, []byte("tok\n"), 0o600)
	c := &slurm.REST{URL: srv.URL, User: "ops", Token: slurm.TokenFile(tokenFile)}
	ctx := context.Background()

	jobs, err := c.Jobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 2 || !jobs[0].Pending() || jobs[0].TimeLimit != 24*time.Hour || jobs[0].GPUs != 4 || jobs[0].Nice != 50 ||
		!jobs[1].Running() || jobs[1].TimeLimit != 0 {
		t.Fatalf("jobs: %+v", jobs)
	}
	nodes, err := c.Nodes(ctx)
	if err != nil || len(nodes) != 2 || !nodes[1].Parked() {
		t.Fatalf("nodes: %+v %v", nodes, err)
	}
	since := time.Unix(1796640000, 0)
	acct, err := c.Accounting(ctx, since)
	if err != nil || !strings.Contains(string(acct), `"jobs"`) {
		t.Fatalf("accounting: %.200s %v", acct, err)
	}
	if len(fake.queries) != 1 || fake.queries[0] != "start_time="+strconv.FormatInt(since.Unix()-60, 10) {
		t.Errorf("accounting asked for %q, want a UNIX time a minute before", fake.queries)
	}
	lacks, err := c.Lacks(ctx)
	if err != nil || strings.Join(lacks, ",") != "priority settings" {
		t.Errorf("v0.0.41 lacks %q %v", lacks, err)
	}

	limit, nice, note := 30*time.Minute, -7, "note"
	if err := c.Update(ctx, []string{"6", "9"}, slurm.Update{TimeLimit: &limit, Nice: &nice, AdminComment: &note}); err != nil {
		t.Fatal(err)
	}
	if err := c.Hold(ctx, "6"); err != nil {
		t.Fatal(err)
	}
	if err := c.Release(ctx, "6"); err != nil {
		t.Fatal(err)
	}
	if err := c.PowerDown(ctx, "gpu2", "idle 10m"); err != nil {
		t.Fatal(err)
	}
	if err := c.PowerUp(ctx, "gpu2"); err != nil {
		t.Fatal(err)
	}
	update := `{"admin_comment":"note","nice":-7,"time_limit":{"infinite":false,"number":30,"set":true}}`
	want := []string{
		"/slurm/v0.0.41/job/6 " + update,
		"/slurm/v0.0.41/job/9 " + update,
		`/slurm/v0.0.41/job/6 {"hold":true}`,
		`/slurm/v0.0.41/job/6 {"hold":false}`,
		`/slurm/v0.0.41/node/gpu2 {"reason":"idle 10m","state":["POWER_DOWN","POWER_DRAIN"]}`,
		`/slurm/v0.0.41/node/gpu2 {"state":["POWER_UP"]}`,
	}
	if strings.Join(fake.posts, "\n") != strings.Join(want, "\n") {
		t.Errorf("sent:\n%s\nwant:\n%s", strings.Join(fake.posts, "\n"), strings.Join(want, "\n"))
	}

	// A job's failure in the results is an error naming it; the other
	// jobs are still changed.
	fake.posts = nil
	err = c.Update(ctx, []string{"13", "6"}, slurm.Update{Nice: &nice})
	if err == nil || !strings.Contains(err.Error(), "job 13") || !strings.Contains(err.Error(), "Invalid job id") || len(fake.posts) != 2 {
		t.Errorf("a failed update: %v, %d sent", err, len(fake.posts))
	}
	// A refused token is an error with the status.
	bad := &slurm.REST{URL: srv.URL, User: "ops", Token: func() (string, error) { return "other", nil }, Version: "v0.0.41"}
	if _, err := bad.Jobs(ctx); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("a refused token: %v", err)
	}
	// A version the server does not answer, and one REST does not speak.
	if _, err := (&slurm.REST{URL: srv.URL, User: "ops", Token: slurm.TokenFile(tokenFile), Version: "v0.0.42"}).Jobs(ctx); err == nil ||
		!strings.Contains(err.Error(), "404") {
		t.Errorf("v0.0.42 of a v0.0.41 server: %v", err)
	}
	if _, err := (&slurm.REST{URL: srv.URL, Version: "v0.0.39"}).Jobs(ctx); err == nil || !strings.Contains(err.Error(), "v0.0.39") {
		t.Errorf("v0.0.39: %v", err)
	}
	fake.version = "v0.0.37"
	if _, err := (&slurm.REST{URL: srv.URL, User: "ops", Token: slurm.TokenFile(tokenFile)}).Jobs(ctx); err == nil ||
		!strings.Contains(err.Error(), "answers none of v0.0.43, v0.0.42, v0.0.41, v0.0.40, v0.0.38") {
		t.Errorf("a server of v0.0.37 only: %v", err)
	}
	os.WriteFile(tokenFile, nil, 0o600)
	if _, err := c.Jobs(ctx); err == nil || !strings.Contains(err.Error(), "is empty") {
		t.Errorf("an empty token file: %v", err)
	}
}

// TestRESTWithoutCommands: what slurmrestd cannot do is an error that
// says so, not a silent no-op.
func TestRESTWithoutCommands(t *testing.T) {
	srv := httptest.NewServer(&fakeRESTD{version: "v0.0.38"})
	defer srv.Close()
	c := &slurm.REST{URL: srv.URL, User: "ops", Token: func() (string, error) { return "tok", nil }}
	ctx := context.Background()
	note := "x"
	for what, err := range map[string]error{
		"AdminComment": c.Update(ctx, []string{"6"}, slurm.Update{AdminComment: &note}),
		"power down":   c.PowerDown(ctx, "gpu1", "idle"),
		"power up":     c.PowerUp(ctx, "gpu1"),
	} {
		if !errors.Is(err, errors.ErrUnsupported) || !strings.Contains(err.Error(), "v0.0.38") {
			t.Errorf("%s through v0.0.38: %v", what, err)
		}
	}
	if _, err := c.Priority(ctx); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("priority settings: %v", err)
	}
	// What a configuration pulls of what v0.0.38 lacks: holds mark the
	// comment too.
	holder, err := executor.NewCarbonHold([]cluster.Tier{cluster.TierOpportunistic}, time.Hour, 0.2)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		cfg  slurm.Config
		want string
	}{
		{slurm.Config{}, ""},
		{slurm.Config{Comment: true}, "AdminComment"},
		{slurm.Config{Autopilot: true, HoldQOS: []string{"flex"}, Holder: holder}, "AdminComment"},
		{slurm.Config{Autopilot: true, ParkIdleAfter: time.Hour, Order: []string{"gpu"}}, "node power,priority settings"},
	} {
		if got, err := c.LacksFor(ctx, tc.cfg); err != nil || strings.Join(got, ",") != tc.want {
			t.Errorf("LacksFor(%+v) = %q %v, want %q", tc.cfg, got, err, tc.want)
		}
	}
}

// FuzzRESTResponse: any response reads without a panic, and one with
// an error status is always an error.
func FuzzRESTResponse(f *testing.F) {
	for _, p := range []string{"testdata/squeue_22.05.json", "testdata/squeue_22.05_controller_down.json", "testdata/sacct_22.05_nothing_found.json"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, uint16(200))
	}
	f.Add([]byte(`{"results":[{"job_id":"1","error_code":2017,"error":"Invalid job id"}],"errors":[]}`), uint16(200))
	f.Add([]byte(`Authentication failure`), uint16(401))
	f.Fuzz(func(t *testing.T, body []byte, status uint16) {
		code := 200 + int(status)%400 // 1xx are informational: the client waits for the final status
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(code)
			w.Write(body)
		}))
		defer srv.Close()
		c := &slurm.REST{URL: srv.URL, Version: "v0.0.41"}
		err := c.Hold(context.Background(), "1")
		if code != http.StatusOK && err == nil {
			t.Fatalf("status %d read as success", code)
		}
	})
}
