package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/api"
	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/cluster/clustertest"
	"github.com/prescient-sched/prescient/service"
	"github.com/prescient-sched/prescient/store"
)

const (
	cliAdminToken = "cli-admin-token-0123456789"
	cliMLToken    = "cli-ml-token-0123456789"
)

// cliServe runs serve in this process on the simulated backend (two nodes
// of 8 A100s, autopilot, more flags after) with an admin token and a
// submitter of tenant ml, on db (a new one when ""), and returns its URL.
func cliServe(t testing.TB, db string, more ...string) string {
	t.Helper()
	dir := t.TempDir()
	if db == "" {
		db = filepath.Join(dir, "p.db")
	}
	tokens := filepath.Join(dir, "tokens.yaml")
	if err := os.WriteFile(tokens, []byte(fmt.Sprintf("tokens:\n"+
		"  - {name: admin, token: %q, tenant: ops, role: admin}\n"+
		"  - {name: ml, token: %q, tenant: ml, role: submitter}\n", cliAdminToken, cliMLToken)), 0o600); err != nil {
		t.Fatal(err)
	}
	return startServe(t, append([]string{"--db", db, "--tokens", tokens, "--backend", "sim",
		"--fleet", "uniform:2x8:A100-SXM4-80GB", "--mode", "autopilot", "--tick", "200ms"}, more...)...)
}

// startServe runs serve in this process on a free loopback port with args
// (quiet), until the test ends, and returns its URL once it is ready.
func startServe(t testing.TB, args ...string) string {
	t.Helper()
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		root := newRootCmd()
		root.SetArgs(append([]string{"serve", "--listen", addr, "--log-level", "error"}, args...))
		done <- root.ExecuteContext(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			t.Error("serve did not stop within 15 s")
		}
	})
	url := "http://" + addr
	waitFor(t, url+"/readyz")
	return url
}

// cli runs one user command against server with token, and -o json when
// into is not nil (decoded into it).
func cli(t *testing.T, server, token string, into any, args ...string) (string, error) {
	t.Helper()
	flags := []string{"--server", server, "--token", token}
	if into != nil {
		flags = append(flags, "-o", "json")
	}
	at := slices.Index(args, "--") // the flags go before a job's command
	if at < 0 {
		at = len(args)
	}
	args = slices.Concat(args[:at], flags, args[at:])
	out, err := run(t, args...)
	if err == nil && into != nil {
		if jerr := json.Unmarshal([]byte(out), into); jerr != nil {
			t.Fatalf("%v: -o json is not the JSON expected: %v\n%s", args, jerr, out)
		}
	}
	return out, err
}

func TestTheUserCommandsAgainstARunningServe(t *testing.T) {
	url := cliServe(t, "")

	// jobs submit: flags and a command, and a request file.
	var st service.JobStatus
	if _, err := cli(t, url, cliMLToken, &st, "jobs", "submit", "--id", "bert", "--name", "bert", "--gpus", "4",
		"--tier", "batch", "--label", "duration_s=3600", "--env", "EPOCHS=3", "--deadline", "6h", "--", "python", "train.py"); err != nil {
		t.Fatal(err)
	}
	if st.ID != "bert" || st.Tenant != "ml" || st.GPUs != 4 || st.Tier != "batch" || st.Deadline == nil {
		t.Fatalf("submitted %+v", st)
	}
	req := filepath.Join(t.TempDir(), "job.json")
	os.WriteFile(req, []byte(`{"id":"big","gpus":16,"labels":{"duration_s":"600"},"command":["sleep","600"]}`), 0o600)
	out, err := cli(t, url, cliMLToken, nil, "jobs", "submit", "--file", req)
	if err != nil || !strings.Contains(out, "big") || !strings.Contains(out, "forecast") {
		t.Fatalf("submit --file: %v\n%s", err, out)
	}
	if _, err := cli(t, url, cliMLToken, nil, "jobs", "submit", "--file", req, "--gpus", "2"); err == nil || !strings.Contains(err.Error(), "--file") {
		t.Errorf("submit --file with --gpus: %v; want an error naming --file", err)
	}
	if _, err := cli(t, url, cliMLToken, nil, "jobs", "submit", "--gpus", "0", "--", "true"); err == nil || !strings.Contains(err.Error(), "400 invalid_request") || !strings.Contains(err.Error(), "gpus") {
		t.Errorf("submit of 0 GPUs: %v; want the API's 400 naming gpus", err)
	}

	// queue: one of them runs (the plan starts it within a tick), the
	// other waits for its GPUs, with a predicted start after.
	var running, waiting service.JobStatus
	deadline := time.Now().Add(10 * time.Second)
	for {
		var q struct{ Jobs []service.JobStatus }
		if _, err := cli(t, url, cliMLToken, &q, "queue"); err != nil {
			t.Fatal(err)
		}
		if len(q.Jobs) == 2 && q.Jobs[0].State == cluster.StateRunning && q.Jobs[1].State == cluster.StateQueued && q.Jobs[1].PredictedStart != nil {
			running, waiting = q.Jobs[0], q.Jobs[1]
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue %+v; want one job running, then the other with a predicted start", q.Jobs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	out, err = cli(t, url, cliMLToken, nil, "queue")
	if err != nil || !strings.Contains(out, "START_TIME") || !strings.Contains(out, string(waiting.ID)) {
		t.Fatalf("queue table: %v\n%s", err, out)
	}

	// jobs list and show, as the tenant and as an admin.
	var list struct{ Jobs []service.JobStatus }
	if _, err := cli(t, url, cliAdminToken, &list, "jobs", "list", "--state", "running"); err != nil || len(list.Jobs) != 1 || list.Jobs[0].ID != running.ID {
		t.Fatalf("jobs list --state running: %v %+v", err, list.Jobs)
	}
	out, err = cli(t, url, cliMLToken, nil, "jobs", "list")
	if err != nil || !strings.HasPrefix(out, "JOBID") || strings.Count(out, "\n") != 3 {
		t.Fatalf("jobs list: %v\n%s", err, out)
	}
	out, err = cli(t, url, cliMLToken, nil, "jobs", "show", string(running.ID))
	if err != nil || !strings.Contains(out, "running") || !strings.Contains(out, "placement") || strings.Contains(out, "0000000") ||
		!strings.Contains(out, "gpu-hours") || !strings.Contains(out, "ATTEMPT") || !strings.Contains(out, "node-") {
		t.Fatalf("jobs show: %v\n%s", err, out)
	}
	if _, err := cli(t, url, cliMLToken, nil, "jobs", "show", "nope"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("jobs show of a missing job: %v; want a 404", err)
	}

	// jobs logs: the simulated backend keeps none, and says so per node.
	out, err = cli(t, url, cliMLToken, nil, "jobs", "logs", string(running.ID))
	if err != nil || !strings.Contains(out, "log unavailable") {
		t.Fatalf("jobs logs: %v\n%s", err, out)
	}
	if _, err := cli(t, url, cliMLToken, nil, "jobs", "logs", string(waiting.ID)); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("jobs logs of a job that never started: %v; want a 404", err)
	}

	// whatif: one more job of the whole fleet.
	var wi service.WhatIfResult
	if _, err := cli(t, url, cliMLToken, &wi, "whatif", "--add-job", `{"gpus":16,"labels":{"duration_s":"60"}}`); err != nil || len(wi.Jobs) == 0 {
		t.Fatalf("whatif: %v %+v", err, wi)
	}
	out, err = cli(t, url, cliMLToken, nil, "whatif", "--remove-job", string(waiting.ID))
	if err != nil || !strings.Contains(out, "mean wait") || !strings.Contains(out, "JOBID") {
		t.Fatalf("whatif table: %v\n%s", err, out)
	}

	// jobs cancel and events.
	if _, err := cli(t, url, cliMLToken, nil, "jobs", "cancel", string(waiting.ID)); err != nil {
		t.Fatal(err)
	}
	var evs api.JobEventList
	if _, err := cli(t, url, cliMLToken, &evs, "jobs", "events", string(waiting.ID)); err != nil || len(evs.Events) != 2 ||
		evs.Events[0].Type != "submitted" || evs.Events[1].Type != "cancelled" {
		t.Fatalf("jobs events: %v %+v", err, evs)
	}
	out, err = cli(t, url, cliMLToken, nil, "jobs", "events", string(waiting.ID))
	if err != nil || !strings.Contains(out, "queued -> cancelled") {
		t.Fatalf("jobs events table: %v\n%s", err, out)
	}

	// The server and token from the environment; a bad token is the API's 401.
	t.Setenv("PRESCIENT_SERVER", url)
	t.Setenv("PRESCIENT_TOKEN", cliMLToken)
	if out, err := run(t, "jobs", "show", "bert", "-o", "json"); err != nil || !strings.Contains(out, `"id": "bert"`) {
		t.Errorf("jobs show with PRESCIENT_SERVER and PRESCIENT_TOKEN: %v\n%s", err, out)
	}
	if _, err := run(t, "jobs", "list", "--token", "not-a-token-at-all"); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("a bad token: %v; want the API's 401", err)
	}
}

func TestDurationsPrintToTheNearestSecond(t *testing.T) {
	for s, want := range map[float64]string{899.9999999: "15m0s", 49.61: "50s", 3600: "1h0m0s", 0: "-"} {
		if got := seconds(s); got != want {
			t.Errorf("seconds(%v) = %s, want %s", s, got, want)
		}
	}
}

func TestTheUserCommandsRefuseBadFlags(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"no token":        {[]string{"jobs", "list", "--server", "http://127.0.0.1:1"}, "--token: empty"},
		"a bad server":    {[]string{"queue", "--server", "127.0.0.1:8080", "--token", "t"}, "--server"},
		"a bad label":     {[]string{"jobs", "submit", "--server", "http://x", "--token", "t", "--label", "nokey", "--", "true"}, "--label"},
		"a bad deadline":  {[]string{"jobs", "submit", "--server", "http://x", "--token", "t", "--deadline", "friday", "--", "true"}, "--deadline"},
		"a past deadline": {[]string{"jobs", "submit", "--server", "http://x", "--token", "t", "--deadline", "-1h", "--", "true"}, "--deadline"},
		"a bad job":       {[]string{"whatif", "--server", "http://x", "--token", "t", "--add-job", `{"gpu":1}`}, "--add-job 1"},
		"a bad limit":     {[]string{"jobs", "list", "--server", "http://x", "--token", "t", "--limit", "-1"}, "--limit"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv("PRESCIENT_TOKEN", "")
			if _, err := run(t, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%v: %v; want an error naming %s", tc.args, err, tc.want)
			}
		})
	}
}

// BenchmarkJobsList10k is `prescient jobs list` of 10,000 jobs, as an
// admin, from a running serve: the goal is under a second.
func BenchmarkJobsList10k(b *testing.B) {
	db := filepath.Join(b.TempDir(), "p.db")
	st, err := store.Open(context.Background(), db)
	if err != nil {
		b.Fatal(err)
	}
	t0 := time.Now().Add(-30 * 24 * time.Hour)
	for i := range 10000 {
		j := clustertest.Job(fmt.Sprintf("j%05d", i)).Tenant([]string{"ml", "cv", "nlp"}[i%3]).GPUs(1 + i%8).
			Submitted(t0.Add(time.Duration(i) * time.Minute)).Obj()
		if err := st.SubmitJob(context.Background(), j); err != nil {
			b.Fatal(err)
		}
	}
	st.Close()
	url := cliServe(b, db, "--mode", "advisor", "--tick", "1h")
	b.ResetTimer()
	for b.Loop() {
		root := newRootCmd()
		var out strings.Builder
		root.SetOut(&out)
		root.SetArgs([]string{"jobs", "list", "--server", url, "--token", cliAdminToken})
		if err := root.Execute(); err != nil {
			b.Fatal(err)
		}
		if n := strings.Count(out.String(), "\n"); n != 10001 {
			b.Fatalf("%d lines, want 10,001", n)
		}
	}
}
