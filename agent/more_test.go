package agent

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/agent/protocol"
	"github.com/prescient-sched/prescient/backend/agenthub"
	"github.com/prescient-sched/prescient/executor"
)

func TestCheckpointIntervalAndSignalOfTheJob(t *testing.T) {
	p := newPlane(t, agenthub.HubOptions{})
	dir := t.TempDir()
	runAgent(t, p.url(), "n1", dir)
	p.next(executor.NodeSynced, "")
	as := assignment("j1", 1, gpusOf("n1", 0), "--steps=100000", "--step-time=5ms", "--checkpoint-signal=SIGUSR2")
	as.CheckpointSignal = "SIGUSR2"
	as.CheckpointEvery = 150 * time.Millisecond
	p.hub.Start(context.Background(), as)
	p.next(executor.JobStarted, "j1")
	first := p.next(executor.JobCheckpointed, "j1")
	second := p.next(executor.JobCheckpointed, "j1")
	if second.Checkpoint.Step <= first.Checkpoint.Step {
		t.Errorf("checkpoints at steps %d then %d: want later steps", first.Checkpoint.Step, second.Checkpoint.Step)
	}
	if log := jobLog(t, dir, "j1", 1); !strings.Contains(log, "user defined signal 2 received") {
		t.Errorf("the job did not get SIGUSR2:\n%s", log)
	}
}

func TestJobOfPIDFindsTheJobsDescendants(t *testing.T) {
	p := newPlane(t, agenthub.HubOptions{})
	dir := t.TempDir()
	a, _ := runAgent(t, p.url(), "n1", dir)
	p.next(executor.NodeSynced, "")
	as := assignment("j-tree", 1, gpusOf("n1", 0))
	as.Command = []string{"/bin/sh", "-c", "sleep 30 & echo $! > child.pid; wait"}
	p.hub.Start(context.Background(), as)
	p.next(executor.JobStarted, "j-tree")
	pidFile := filepath.Join(dir, "jobs", "j-tree", "attempt-1", "child.pid")
	var child int
	waitFor(t, "the job's child", func() bool {
		b, err := os.ReadFile(pidFile)
		child, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && child > 0
	})
	if job, ok := a.JobOfPID(child); !ok || job != "j-tree" {
		t.Errorf("JobOfPID(child %d) = %q, %v; want j-tree", child, job, ok)
	}
	if job, ok := a.JobOfPID(os.Getpid()); ok {
		t.Errorf("JobOfPID(the test) = %q; want none", job)
	}
	p.hub.Stop(context.Background(), "j-tree", time.Second)
	p.next(executor.JobExited, "j-tree")
	if _, ok := a.JobOfPID(child); ok {
		t.Error("JobOfPID still names the job after it ended")
	}
}

func TestAnAttemptClaimedButNotStartedIsNeverStarted(t *testing.T) {
	// The agent died between writing its claim and starting the process:
	// the next agent reports the attempt lost (for the plane to start
	// another) and does not start it.
	dir := t.TempDir()
	if err := saveState(filepath.Join(dir, stateFileName), []record{{Job: "j1", Attempt: 3, WorldSize: 1, StartedAt: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	p := newPlane(t, agenthub.HubOptions{})
	a, _ := runAgent(t, p.url(), "n1", dir)
	e := p.next(executor.JobLost, "j1")
	if e.Attempt != 3 || !strings.Contains(e.Message, "never started") {
		t.Errorf("lost: %+v", e)
	}
	a.handle(protocol.Command{Seq: 1, Type: protocol.CommandStart, Job: "j1", Attempt: 3, Start: &protocol.StartSpec{Command: []string{"/bin/true"}, WorldSize: 1}})
	if jobs := a.Jobs(); len(jobs) != 1 || jobs[0].PID != 0 {
		t.Errorf("jobs: %+v; want the claim only, nothing started", jobs)
	}
}

func TestAgentWithAWrongTokenDoesNotRegister(t *testing.T) {
	p := newPlane(t, agenthub.HubOptions{})
	a, err := New(Config{Server: p.url(), Token: "wrong", WorkDir: t.TempDir(), Node: protocol.NodeInfo{Name: "n1"},
		BackoffMin: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	a.Run(ctx)
	if n := p.hub.Nodes(); len(n) != 0 {
		t.Errorf("registered with a wrong token: %+v", n)
	}
}
