package slurm_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/internal/slurmtest"
	"github.com/prescient-sched/prescient/slurm"
)

// TestRESTAgainstRealSlurmrestd drives Slurm 22.05's slurmrestd (v0.0.38,
// JSON Web Tokens, running as nobody): the jobs and nodes read as the
// commands read them, the accounting of jobs that ended, limits, Nice and
// holds changed through it, and what v0.0.38 cannot do (AdminComment,
// node power) refused without the commands and done by them with.
func TestRESTAgainstRealSlurmrestd(t *testing.T) {
	c, cli, hog := fullCluster(t)
	ctx := context.Background()
	addr, token := c.REST(t)
	tokenFile := filepath.Join(t.TempDir(), "jwt")
	if err := os.WriteFile(tokenFile, []byte("SLURM_JWT="+token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rest := &slurm.REST{URL: addr, User: "root", Token: slurm.TokenFile(tokenFile)}
	pend := c.Sbatch(t, "-J", "pend", "-t", "120", "--gres=gpu:2", "--wrap", "true")
	done := c.Sbatch(t, "-J", "done", "-t", "5", "--wrap", "true")

	// 1. Read: the same jobs and nodes as the commands read.
	viaCLI, err := cli.Jobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	viaREST, err := rest.Jobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]slurm.Job{}
	for _, j := range viaREST {
		byID[j.ID] = j
	}
	for _, want := range viaCLI {
		got := byID[want.ID]
		if want.State == "COMPLETED" || want.State == "COMPLETING" {
			continue // done may finish between the two reads
		}
		if got.ID != want.ID || got.State != want.State || got.TimeLimit != want.TimeLimit || got.GPUs != want.GPUs ||
			got.Partition != want.Partition || got.Account != want.Account || !got.Submit.Equal(want.Submit) {
			t.Errorf("job %s through slurmrestd %+v, through squeue %+v", want.ID, got, want)
		}
	}
	if j := byID[pend]; !j.Pending() || j.TimeLimit != 2*time.Hour || j.GPUs != 2 {
		t.Fatalf("pending job through slurmrestd: %+v", j)
	}
	nodes, err := rest.Nodes(ctx)
	if err != nil || len(nodes) != 1 || nodes[0].GPUs != slurmtest.GPUs || nodes[0].GPUsUsed != 4 {
		t.Fatalf("nodes through slurmrestd: %+v, %v", nodes, err)
	}
	lacks, err := rest.Lacks(ctx)
	if err != nil || strings.Join(lacks, ",") != "AdminComment,node power,priority settings" {
		t.Fatalf("v0.0.38 lacks %q, %v", lacks, err)
	}

	// 2. Accounting: the job that ended is in it; one that ran before the
	// time asked for is not.
	if err := waitFor(func() bool {
		acct, err := rest.Accounting(ctx, time.Now().Add(-time.Hour))
		return err == nil && strings.Contains(string(acct), `"job_id": `+done+",")
	}); err != nil {
		acct, err := rest.Accounting(ctx, time.Now().Add(-time.Hour))
		t.Fatalf("accounting through slurmrestd has no job %s: %s %v", done, acct, err)
	}

	// 3. Change: limit and Nice in one update, hold and release.
	limit, nice := 30*time.Minute, -7
	if err := rest.Update(ctx, []string{pend}, slurm.Update{TimeLimit: &limit, Nice: &nice}); err != nil {
		t.Fatal(err)
	}
	if j := jobByID(t, cli, pend); j.TimeLimit != limit || j.Nice != nice {
		t.Fatalf("after the update: limit %s, nice %d", j.TimeLimit, j.Nice)
	}
	if err := rest.Hold(ctx, pend); err != nil {
		t.Fatal(err)
	}
	if j := jobByID(t, cli, pend); !j.Held() {
		t.Fatalf("not held: %+v", j)
	}
	if err := rest.Release(ctx, pend); err != nil {
		t.Fatal(err)
	}
	if j := jobByID(t, cli, pend); j.Held() || !j.Pending() {
		t.Fatalf("not released: %+v", j)
	}

	// 4. What v0.0.38 cannot do: refused alone, done by the commands.
	note := "site note"
	if err := rest.Update(ctx, []string{pend}, slurm.Update{AdminComment: &note}); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("AdminComment through v0.0.38 alone: %v", err)
	}
	if err := rest.PowerDown(ctx, slurmtest.Node, "test"); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("power through v0.0.38 alone: %v", err)
	}
	if _, err := rest.Priority(ctx); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("priority settings through slurmrestd alone: %v", err)
	}
	rest.Commands = cli
	if err := rest.Update(ctx, []string{pend}, slurm.Update{AdminComment: &note, TimeLimit: &limit}); err != nil {
		t.Fatal(err)
	}
	if j := jobByID(t, cli, pend); j.AdminComment != note {
		t.Fatalf("AdminComment through the commands: %q", j.AdminComment)
	}
	if p, err := rest.Priority(ctx); err != nil || p.Ages() != nil {
		t.Fatalf("priority settings through the commands: %+v %v", p, err)
	}

	// 5. A runner on slurmrestd: the advice appended (by the commands),
	// a pending job lowered and restored.
	est := &fixedEstimator{}
	auto := slurm.Config{Comment: true, Autopilot: true, Partitions: []string{slurmtest.Partition}, Floor: time.Minute}
	r := &slurm.Runner{Client: rest, Estimator: est, Dir: t.TempDir(), Config: auto}
	t.Cleanup(func() { r.Close() })
	if err := r.Cycle(ctx); err != nil {
		t.Fatal(err)
	}
	if j := jobByID(t, cli, pend); j.TimeLimit != 5*time.Minute || !strings.HasPrefix(j.AdminComment, "site note [prescient: limit 5m") {
		t.Fatalf("autopilot through slurmrestd: limit %s, comment %q", j.TimeLimit, j.AdminComment)
	}
	if est.learned != 1 || est.mostJobs < 1 {
		t.Errorf("accounting heard %d times, at most %d jobs", est.learned, est.mostJobs)
	}
	if err := r.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if j := jobByID(t, cli, pend); j.TimeLimit != limit {
		t.Fatalf("after stop: limit %s, want %s", j.TimeLimit, limit)
	}

	// 6. A token slurmrestd refuses is an error, not an empty queue.
	bad := &slurm.REST{URL: addr, User: "root", Version: "v0.0.38",
		Token: func() (string, error) { return token[:len(token)-4] + "AAAA", nil }}
	if jobs, err := bad.Jobs(ctx); err == nil {
		t.Fatalf("a bad token read %d jobs", len(jobs))
	}
	c.Run(t, "scancel", hog)
}
