package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/datasets"
	"github.com/prescient-sched/prescient/internal/slurmtest"
	"github.com/prescient-sched/prescient/slurm"
)

// writeSacctHistory writes a site's accounting as sacct --parsable2 does:
// n jobs of three users over ten days, each user's run times about their
// own and their limits many times longer, as users ask.
func writeSacctHistory(t *testing.T, n int) string {
	t.Helper()
	var b strings.Builder
	b.WriteString(strings.Join(datasets.SlurmFields, "|") + "\n")
	rng := rand.New(rand.NewPCG(1, 2))
	start := time.Now().UTC().Add(-30 * 24 * time.Hour).Truncate(time.Second)
	users := []struct {
		name  string
		run   time.Duration
		limit string
		gpus  int
	}{{"alice", 20 * time.Minute, "04:00:00", 1}, {"bob", 2 * time.Hour, "1-00:00:00", 4}, {"carol", 5 * time.Minute, "02:00:00", 2}}
	for i := range n {
		u := users[i%len(users)]
		submit := start.Add(time.Duration(i) * 10 * 24 * time.Hour / time.Duration(n))
		begin := submit.Add(time.Duration(rng.IntN(600)) * time.Second)
		run := time.Duration(float64(u.run) * (0.7 + 0.6*rng.Float64())).Truncate(time.Second)
		end := begin.Add(run)
		f := func(t time.Time) string { return t.Format("2006-01-02T15:04:05") }
		tres := fmt.Sprintf("billing=1,cpu=1,gres/gpu=%d,node=1", u.gpus)
		fmt.Fprintf(&b, "%d|%s|research|gpu|normal|train-%s|%s|%s|%s|%s|%s|%s|%s|COMPLETED|0:0\n", 1000+i, u.name, u.name,
			f(submit), f(begin), f(end), slurmClock(run), u.limit, tres, tres)
	}
	path := filepath.Join(t.TempDir(), "sacct.txt")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// trainOnSacctHistory trains run times on a generated history of 900
// jobs, as a site would on its sacct export, and returns the registry.
func trainOnSacctHistory(t *testing.T) string {
	t.Helper()
	reg := filepath.Join(t.TempDir(), "models")
	if _, err := run(t, "train", "--target", "duration", "--trace", "slurm:"+writeSacctHistory(t, 900), "--models", reg,
		"--learners=gbt,rolling_median,global_median", "--gate-windows", "1"); err != nil {
		t.Fatal(err)
	}
	return reg
}

// TestSlurmAdvisorOnRealSlurm trains run times on a site's accounting,
// then advises a real Slurm 22.05: every pending job gets its predicted
// start and run time in its AdminComment (after what was there), the
// advice is served over HTTP, and the user CLI prints it as squeue would.
func TestSlurmAdvisorOnRealSlurm(t *testing.T) {
	reg := trainOnSacctHistory(t)

	c := slurmtest.Start(t)
	hog := c.Sbatch(t, "-J", "hog", "-t", "60", "--gres=gpu:4", "--wrap", "sleep 600")
	waitUntil(t, time.Minute, "the hog to run", func() bool {
		return strings.TrimSpace(c.Run(t, "squeue", "-h", "-j", hog, "-o", "%T")) == "RUNNING"
	})
	pend := c.Sbatch(t, "-J", "next", "-t", "240", "--gres=gpu:1", "--wrap", "true")
	c.Run(t, "scontrol", "update", "JobId="+pend, "AdminComment=site note")

	state := t.TempDir()
	if _, err := run(t, "slurm", "--once", "--slurm-conf", c.Conf, "--models", reg, "--state", state); err != nil {
		t.Fatal(err)
	}
	show := c.Run(t, "scontrol", "show", "job", pend)
	if !strings.Contains(show, "AdminComment=site note [prescient: run~") || !strings.Contains(show, " start~") {
		t.Fatalf("AdminComment not appended:\n%s", show)
	}
	if !strings.Contains(show, "TimeLimit=04:00:00") {
		t.Fatalf("the advisor changed the limit:\n%s", show)
	}
	// A misspelt partition stops it before it changes anything.
	if _, err := run(t, "slurm", "--once", "--slurm-conf", c.Conf, "--models", reg, "--state", state, "--autopilot",
		"--partitions", "gpus"); !errors.Is(err, slurm.ErrUnknownPartition) || !strings.Contains(err.Error(), `"gpus"`) {
		t.Errorf("--partitions gpus: %v", err)
	}
	// A second cycle, through slurmrestd (and the commands for the
	// AdminComment, which its v0.0.38 cannot set), leaves the comment as
	// it is (one note, not two).
	addr, token := c.REST(t)
	tokenFile := filepath.Join(t.TempDir(), "jwt")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, "slurm", "--once", "--slurmrestd", addr, "--slurmrestd-token-file", tokenFile, "--slurmrestd-user", "root",
		"--slurm-conf", c.Conf, "--models", reg, "--state", state); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(tokenFile+".old", []byte(token[:len(token)-4]+"AAAA"), 0o600)
	if _, err := run(t, "slurm", "--once", "--slurmrestd", addr, "--slurmrestd-token-file", tokenFile+".old", "--slurmrestd-user", "root",
		"--slurm-conf", c.Conf, "--models", reg, "--state", state); err == nil || !strings.Contains(err.Error(), "slurmrestd GET") {
		t.Errorf("a token slurmrestd refuses: %v", err)
	}
	if show := c.Run(t, "scontrol", "show", "job", pend); strings.Count(show, "[prescient:") != 1 {
		t.Fatalf("two notes:\n%s", show)
	}
	events, err := os.ReadFile(filepath.Join(state, "events.jsonl"))
	if err != nil || !strings.Contains(string(events), `"kind":"comment"`) {
		t.Fatalf("events: %s %v", events, err)
	}

	// The advice over HTTP, and the user CLI's squeue-shaped view of it.
	est, err := newSlurmEstimator(reg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	r := &slurm.Runner{Client: &slurm.CLI{Conf: c.Conf}, Estimator: est, Dir: state, Log: slog.New(slog.DiscardHandler)}
	if err := r.Cycle(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// While it holds the state, another refuses to start and the watchdog
	// leaves it alone.
	if _, err := run(t, "slurm", "--once", "--slurm-conf", c.Conf, "--models", reg, "--state", state); !errors.Is(err, slurm.ErrLocked) {
		t.Errorf("a second prescient slurm: %v, want ErrLocked", err)
	}
	if out, err := run(t, "slurm", "restore", "--slurm-conf", c.Conf, "--state", state, "--stale-after", "0s"); err != nil ||
		!strings.HasPrefix(out, "nothing to do") {
		t.Errorf("restore: %q %v", out, err)
	}
	srv := httptest.NewServer(slurm.Handler(r, nil, nil))
	defer srv.Close()
	out, err := run(t, "slurm", "queue", "--server", srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("queue:\n%s", out)
	}
	f := strings.Fields(lines[1])
	// JOBID PARTITION NAME USER ST GPUS TIME_LIMIT ADVISED_LIMIT EXPECTED_RUN START END REASON...
	if f[0] != pend || f[2] != "next" || f[4] != "PD" || f[6] != "4:00:00" || f[8] == "-" || f[9] == "-" || f[10] == "-" {
		t.Fatalf("queue:\n%s", out)
	}
	if start, err := time.Parse("2006-01-02T15:04:05", f[9]); err != nil || start.Before(time.Now().Add(-time.Minute)) {
		t.Errorf("predicted start %q: %v", f[9], err)
	}
}

func TestSlurmFlagsSayWhatIsWrong(t *testing.T) {
	t.Setenv("SLURM_JWT", "")
	badCarbon := filepath.Join(t.TempDir(), "carbon.csv")
	if err := os.WriteFile(badCarbon, []byte("time,gco2_per_kwh\n2026-12-07 10:00:00,400\n2026-12-07 11:00:00,lots\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"slurm", "--once"}, "--models is required"},
		{[]string{"slurm", "--models", "x", "--every", "10ms"}, "--every 10ms"},
		{[]string{"slurm", "--models", "x", "--autopilot", "--partitions", "gpu", "--floor", "1s"}, "floor of at least a minute"},
		{[]string{"slurm", "--models", t.TempDir()}, "--models"},
		{[]string{"slurm", "--models", "x", "--autopilot", "--hold-qos", "flex"}, "--hold-qos and --carbon go together"},
		{[]string{"slurm", "--models", "x", "--carbon", "nowhere.csv"}, "--hold-qos and --carbon go together"},
		{[]string{"slurm", "--models", "x", "--hold-qos", "flex", "--carbon", "nowhere.csv"}, "--carbon: "},
		{[]string{"slurm", "--models", "x", "--hold-qos", "flex", "--carbon", badCarbon, "--carbon-wait", "1h"}, badCarbon + ":3"},
		{[]string{"slurm", "--models", "x", "--hold-qos", "flex", "--carbon", badCarbon, "--carbon-wait", "0s"}, "--carbon-wait"},
		{[]string{"slurm", "--models", "x", "--slurmrestd-user", "ops"}, "need --slurmrestd"},
		{[]string{"slurm", "--models", "x", "--slurmrestd", "127.0.0.1:6820"}, "want http://host:port"},
		{[]string{"slurm", "--models", "x", "--slurmrestd", "http://127.0.0.1:6820"}, "--slurmrestd needs a token"},
		{[]string{"slurm", "guard", "--slurmrestd", "http://127.0.0.1:6820"}, "--slurmrestd needs a token"},
	} {
		if _, err := run(t, c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
}

// The advice's readers are serve's tokens: an admin reads all, a viewer
// or submitter its tenant's (its Slurm account's) jobs, an agent nothing,
// as the file says once read again; without tokens only a loopback
// address may serve it.
func TestSlurmAccessTakesServesTokens(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.yaml")
	if err := os.WriteFile(path, []byte(`tokens:
  - {token: "admin-token-0123456789", tenant: ops, role: admin}
  - {token: "viewer-token-0123456789", tenant: nlp, role: viewer}
  - {token: "agent-token-0123456789", role: agent}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	access, file, err := slurmAccess("0.0.0.0:8081", path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	for token, want := range map[string]struct {
		r  slurm.Reader
		ok bool
	}{
		"admin-token-0123456789":  {slurm.Reader{Account: "ops", Admin: true}, true},
		"viewer-token-0123456789": {slurm.Reader{Account: "nlp"}, true},
		"agent-token-0123456789":  {},
		"guess":                   {},
	} {
		if r, ok := access(token); r != want.r || ok != want.ok {
			t.Errorf("%s: %+v %v, want %+v %v", token, r, ok, want.r, want.ok)
		}
	}
	// The viewer's token struck off, another added: read again, the file rules.
	if err := os.WriteFile(path, []byte(`tokens:
  - {token: "admin-token-0123456789", tenant: ops, role: admin}
  - {token: "other-token-0123456789", tenant: cv, role: viewer}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	if changed, err := file.Reload(); err != nil || !changed {
		t.Fatalf("reading the tokens again: changed %v, %v", changed, err)
	}
	if _, ok := access("viewer-token-0123456789"); ok {
		t.Error("a token struck from the file still reads the advice")
	}
	if r, ok := access("other-token-0123456789"); !ok || r.Account != "cv" {
		t.Errorf("the added token: %+v %v", r, ok)
	}
	for _, addr := range []string{"127.0.0.1:8081", "[::1]:8081", "localhost:8081", ""} {
		if a, _, err := slurmAccess(addr, "", nil); err != nil || a != nil {
			t.Errorf("--listen %q without --tokens: %v", addr, err)
		}
	}
	for _, addr := range []string{"0.0.0.0:8081", ":8081", "10.0.0.7:8081"} {
		if _, _, err := slurmAccess(addr, "", nil); err == nil || !strings.Contains(err.Error(), "--tokens") {
			t.Errorf("--listen %q without --tokens: %v, want an error naming --tokens", addr, err)
		}
	}
	if _, _, err := slurmAccess("0.0.0.0:8081", filepath.Join(t.TempDir(), "none.yaml"), slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "--tokens") {
		t.Errorf("a missing tokens file: %v", err)
	}
}

func TestSlurmQueueTable(t *testing.T) {
	start := time.Date(2026, 12, 7, 13, 0, 0, 0, time.UTC)
	end := start.Add(90 * time.Minute)
	var b strings.Builder
	err := slurmQueueTable(&b, []slurm.Advice{
		{Job: "12", Name: "bert", User: "alice", Partition: "gpu", GPUs: 4, UserLimit: 24 * time.Hour, Limit: 2 * time.Hour,
			RunP50: 90 * time.Minute, Start: start, End: end, Reason: "expected run 1h30m0s"},
		{Job: "13", Name: "sweep", User: "bob", Partition: "gpu", GPUs: 1, ArrayTasks: "1-20%4", StartAfter: start, Reason: "no forecast"},
	})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	want := [][]string{
		{"JOBID", "PARTITION", "NAME", "USER", "ST", "GPUS", "TIME_LIMIT", "ADVISED_LIMIT", "EXPECTED_RUN", "START", "END", "REASON"},
		{"12", "gpu", "bert", "alice", "PD", "4", "1-00:00:00", "2:00:00", "1:30:00", "2026-12-07T13:00:00", "2026-12-07T14:30:00", "expected", "run", "1h30m0s"},
		{"13_[1-20%4]", "gpu", "sweep", "bob", "PD", "1", "UNLIMITED", "-", "-", ">2026-12-07T13:00:00", "-", "no", "forecast"},
	}
	for i, w := range want {
		if got := strings.Fields(lines[i]); strings.Join(got, " ") != strings.Join(w, " ") {
			t.Errorf("line %d: %q, want %q", i, got, w)
		}
	}
}

// The live estimator learns from accounting as the advisor reads it: jobs
// after the model's training data calibrate the limits, and once enough
// have, a user who repeats jobs gets a limit well under the one asked.
func TestSlurmEstimatorLearnsLimits(t *testing.T) {
	hist := writeSacctHistory(t, 900)
	res, err := datasets.ReadTrace("slurm:"+hist, datasets.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	until := res.Jobs[450].SubmitTime
	reg := filepath.Join(t.TempDir(), "models")
	if _, err := run(t, "train", "--target", "duration", "--trace", "slurm:"+hist, "--until", until.Format(time.RFC3339),
		"--models", reg, "--learners=gbt,rolling_median,global_median", "--gate-windows", "1"); err != nil {
		t.Fatal(err)
	}
	est, err := newSlurmEstimator(reg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	alice := slurm.Job{ID: "5000", User: "alice", Account: "research", Partition: "gpu", Name: "train-alice",
		State: "PENDING", Submit: time.Now(), TimeLimit: 4 * time.Hour, GPUs: 1, CPUs: 1}
	before, err := est.Estimate(context.Background(), []slurm.Job{alice})
	if err != nil {
		t.Fatal(err)
	}
	if l := before["5000"].Limit; l != 4*time.Hour {
		t.Errorf("before any outcome: limit %s, want the user's 4h", l)
	}
	b, err := os.ReadFile(hist)
	if err != nil {
		t.Fatal(err)
	}
	if err := est.Learn(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	if err := est.Learn(context.Background(), b); err != nil { // read again: nothing heard twice
		t.Fatal(err)
	}
	if len(est.heard) != 900 {
		t.Errorf("heard %d jobs, want 900", len(est.heard))
	}
	after, err := est.Estimate(context.Background(), []slurm.Job{alice})
	if err != nil {
		t.Fatal(err)
	}
	e := after["5000"]
	t.Logf("alice (runs 14-26 min, asks 4h): run %s, limit %s", e.RunP50, e.Limit)
	if e.Limit < 20*time.Minute || e.Limit > time.Hour || e.RunP50 < 10*time.Minute || e.RunP50 > 30*time.Minute {
		t.Errorf("after 450 outcomes: run %s, limit %s; want about 20 min and a limit between 20 min and 1 h", e.RunP50, e.Limit)
	}
}

// The operator's flow with real processes: prescient slurm on autopilot
// against a real Slurm lowers a pending job's limit once its calibration
// has heard enough of the site's jobs, serves the page and the advice,
// gives the limit back on SIGTERM, and after a kill -9 the watchdog
// (slurm restore) gives it back.
func TestSlurmProcessRestoresOnStopAndAfterAKill(t *testing.T) {
	bin := e2eBin(t)
	reg := trainOnSacctHistory(t)
	c := slurmtest.Start(t)
	// The site's recent history: 260 one-second jobs, enough for the
	// limit calibration (200 completed jobs at least).
	c.Sbatch(t, "-J", "warm", "-t", "60", "--array=1-260", "--wrap", "sleep 1")
	waitUntil(t, 4*time.Minute, "the warm-up jobs to end", func() bool {
		return strings.TrimSpace(c.Run(t, "squeue", "-h", "-n", "warm", "-o", "%i")) == ""
	})
	hog := c.Sbatch(t, "-J", "hog", "-t", "60", "--gres=gpu:4", "--wrap", "sleep 900")
	waitUntil(t, time.Minute, "the hog to run", func() bool {
		return strings.TrimSpace(c.Run(t, "squeue", "-h", "-j", hog, "-o", "%T")) == "RUNNING"
	})
	pend := c.Sbatch(t, "-J", "pend", "-t", "60", "--gres=gpu:1", "--wrap", "true")
	limit := func() string { return strings.TrimSpace(c.Run(t, "squeue", "-h", "-j", pend, "-o", "%l")) }
	nice := func() string { return strings.TrimSpace(c.Run(t, "squeue", "-h", "-j", pend, "-o", "%y")) }

	state := t.TempDir()
	addr := freeAddr(t)
	start := func() (*exec.Cmd, chan error) {
		cmd := exec.Command(bin, "slurm", "--slurm-conf", c.Conf, "--models", reg, "--state", state, "--autopilot",
			"--partitions", slurmtest.Partition, "--order-partitions", slurmtest.Partition, "--floor", "1m", "--every", "1s",
			"--warmup", "1h", "--listen", addr)
		logf, err := os.Create(filepath.Join(t.TempDir(), "slurm.log"))
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait(); logf.Close() }()
		t.Cleanup(func() {
			cmd.Process.Kill()
			if t.Failed() {
				b, _ := os.ReadFile(logf.Name())
				t.Logf("prescient slurm's log:\n%s", b)
			}
		})
		waitUntil(t, time.Minute, "the limit to be lowered", func() bool { return limit() != "1:00:00" })
		return cmd, done
	}

	cmd, done := start()
	t.Logf("lowered from 1:00:00 to %s; nice %s", limit(), nice())
	if nice() == "0" {
		t.Fatal("ordering set no Nice")
	}
	get := func(path string) string {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return string(body)
	}
	// The metrics follow the cycle that lowered the limit.
	waitUntil(t, 10*time.Second, "the metrics to count the lowered job", func() bool {
		return strings.Contains(get("/metrics"), "prescient_slurm_lowered_jobs 1")
	})
	for path, want := range map[string]string{"/": "Slurm advice", "/v1/slurm/advice": `"job":"` + pend + `"`} {
		if body := get(path); !strings.Contains(body, want) {
			t.Errorf("GET %s lacks %q:\n%s", path, want, body)
		}
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("prescient slurm after SIGTERM: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("prescient slurm did not stop within a minute of SIGTERM")
	}
	if got, n := limit(), nice(); got != "1:00:00" || n != "0" {
		t.Fatalf("after SIGTERM: limit %s, nice %s; want the user's 1:00:00 and 0", got, n)
	}

	cmd, done = start()
	cmd.Process.Kill()
	<-done
	if got := limit(); got == "1:00:00" {
		t.Fatal("the kill restored the limit: the test shows nothing")
	}
	// The guard, from Slurm alone, leaves a pending job lowered: nothing
	// kills it before it runs.
	if out, err := run(t, "slurm", "guard", "--slurm-conf", c.Conf); err != nil || !strings.HasPrefix(out, "gave 0 jobs") || limit() == "1:00:00" {
		t.Fatalf("guard on a pending job: %q %v, limit %s", out, err, limit())
	}
	out, err := run(t, "slurm", "restore", "--slurm-conf", c.Conf, "--state", state, "--stale-after", "0s")
	if err != nil || !strings.HasPrefix(out, "restored") {
		t.Fatalf("restore: %q %v", out, err)
	}
	if got, n := limit(), nice(); got != "1:00:00" || n != "0" {
		t.Fatalf("after the watchdog: limit %s, nice %s; want 1:00:00 and 0", got, n)
	}
}

func waitUntil(t *testing.T, timeout time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
