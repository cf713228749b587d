package agent

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/agent/protocol"
	"github.com/prescient-sched/prescient/backend/agenthub"
	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/collector"
	"github.com/prescient-sched/prescient/executor"
)

func TestJobRunsOnItsGPUs(t *testing.T) {
	p := newPlane(t, agenthub.HubOptions{})
	dir := t.TempDir()
	a, _ := runAgent(t, p.url(), "n1", dir)
	if e := p.next(executor.NodeSynced, ""); e.Node != "n1" || len(e.Running) != 0 {
		t.Fatalf("first sync: %+v, want n1 running nothing", e)
	}
	if nodes := p.hub.Nodes(); len(nodes) != 1 || !nodes[0].Connected || len(nodes[0].Node.GPUs) != 4 || nodes[0].Node.Topology.Rack != "r1" {
		t.Fatalf("hub nodes: %+v, want n1 connected with 4 GPUs in rack r1", nodes)
	}

	if err := p.hub.Start(context.Background(), assignment("j1", 1, gpusOf("n1", 3, 2), "--steps=3", "--step-time=10ms")); err != nil {
		t.Fatal(err)
	}
	started := p.next(executor.JobStarted, "j1")
	if started.Node != "n1" || started.Attempt != 1 {
		t.Errorf("started: %+v", started)
	}
	exited := p.next(executor.JobExited, "j1")
	if exited.ExitCode != 0 || exited.Stopped {
		t.Errorf("exited: %+v, want code 0, not stopped", exited)
	}
	log := jobLog(t, dir, "j1", 1)
	for _, want := range []string{"CUDA_VISIBLE_DEVICES=2,3 ", "job=j1 ", "attempt=1 ", "rank=0 world_size=1", "done: 3 steps"} {
		if !strings.Contains(log, want) {
			t.Errorf("job log lacks %q:\n%s", want, log)
		}
	}
	if r := a.Running(); len(r) != 0 {
		t.Errorf("running after the exit: %v", r)
	}
}

func TestCheckpointRequestIsAcknowledged(t *testing.T) {
	p := newPlane(t, agenthub.HubOptions{})
	dir := t.TempDir()
	runAgent(t, p.url(), "n1", dir)
	p.next(executor.NodeSynced, "")
	if err := p.hub.Start(context.Background(), assignment("j1", 1, gpusOf("n1", 0), "--steps=100000", "--step-time=5ms")); err != nil {
		t.Fatal(err)
	}
	p.next(executor.JobStarted, "j1")
	waitSteps(t, dir, "j1", 1)
	if err := p.hub.Checkpoint(context.Background(), "j1"); err != nil {
		t.Fatal(err)
	}
	e := p.next(executor.JobCheckpointed, "j1")
	if e.Checkpoint == nil || e.Checkpoint.Step <= 0 || e.Checkpoint.Time.IsZero() {
		t.Fatalf("checkpointed: %+v, want a step > 0 with its time", e)
	}
	want := filepath.Join(dir, "jobs", "j1", "checkpoints")
	if filepath.Dir(e.Checkpoint.Path) != want {
		t.Errorf("checkpoint path %s, want one in %s", e.Checkpoint.Path, want)
	}
	if _, err := os.Stat(e.Checkpoint.Path); err != nil {
		t.Errorf("the acknowledged checkpoint is not there: %v", err)
	}
	if err := p.hub.Checkpoint(context.Background(), "nope"); err == nil {
		t.Error("checkpoint of an unknown job: want agenthub.ErrUnknownJob")
	}
}

func TestStopSendsSIGTERMAndReportsTheExit(t *testing.T) {
	p := newPlane(t, agenthub.HubOptions{})
	dir := t.TempDir()
	runAgent(t, p.url(), "n1", dir)
	p.next(executor.NodeSynced, "")
	p.hub.Start(context.Background(), assignment("j1", 1, gpusOf("n1", 0), "--steps=100000", "--step-time=5ms"))
	p.next(executor.JobStarted, "j1")
	waitSteps(t, dir, "j1", 1) // the workload handles SIGTERM from its first step on
	begin := time.Now()
	if err := p.hub.Stop(context.Background(), "j1", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	cp := p.next(executor.JobCheckpointed, "j1") // the workload checkpoints on SIGTERM
	e := p.next(executor.JobExited, "j1")
	if !e.Stopped || e.ExitCode != 143 {
		t.Errorf("exited: %+v, want stopped with the workload's code 143", e)
	}
	if took := time.Since(begin); took > 5*time.Second {
		t.Errorf("stop took %s: SIGTERM should have ended it well before the 10s grace", took)
	}
	if cp.Checkpoint == nil || cp.Checkpoint.Step <= 0 {
		t.Errorf("checkpoint on SIGTERM: %+v", cp)
	}
}

func TestJobIgnoringSIGTERMIsKilledAfterTheGrace(t *testing.T) {
	p := newPlane(t, agenthub.HubOptions{})
	dir := t.TempDir()
	runAgent(t, p.url(), "n1", dir)
	p.next(executor.NodeSynced, "")
	p.hub.Start(context.Background(), assignment("j1", 1, gpusOf("n1", 0), "--steps=100000", "--step-time=5ms", "--ignore-sigterm"))
	p.next(executor.JobStarted, "j1")
	waitSteps(t, dir, "j1", 1) // the workload handles SIGTERM from its first step on
	begin := time.Now()
	const grace = 400 * time.Millisecond
	if err := p.hub.Stop(context.Background(), "j1", grace); err != nil {
		t.Fatal(err)
	}
	e := p.next(executor.JobExited, "j1")
	if took := time.Since(begin); took < grace {
		t.Errorf("exited after %s, before the grace of %s", took, grace)
	}
	if e.ExitCode != -1 || !e.Stopped {
		t.Errorf("exited: %+v, want killed (-1) and stopped", e)
	}
}

func TestTheSameStartRunsOnce(t *testing.T) {
	p := newPlane(t, agenthub.HubOptions{})
	dir := t.TempDir()
	a, stop := runAgent(t, p.url(), "n1", dir)
	p.next(executor.NodeSynced, "")
	as := assignment("j1", 1, gpusOf("n1", 0), "--steps=100000", "--step-time=5ms")
	for range 3 {
		if err := p.hub.Start(context.Background(), as); err != nil {
			t.Fatal(err)
		}
	}
	p.next(executor.JobStarted, "j1")
	// The hub sends it once; an agent asked again (a command delivered twice)
	// starts nothing either.
	cmd := protocol.Command{Seq: 99, Type: protocol.CommandStart, Job: "j1", Attempt: 1, Start: &protocol.StartSpec{GPUs: []int{0}, Command: as.Command, Env: as.Env, WorldSize: 1}}
	a.handle(cmd)
	if jobs := a.Jobs(); len(jobs) != 1 {
		t.Fatalf("jobs after the start was repeated: %+v, want one", jobs)
	}
	pid := a.Jobs()[0].PID

	// A new agent on the same work directory takes the job over and does
	// not start it again; a new control plane asking again changes
	// nothing.
	stop()
	p.down()
	hub2 := agenthub.NewHub(agenthub.HubOptions{PollWait: 2 * time.Second})
	p.up(hub2)
	b, _ := runAgent(t, p.url(), "n1", dir)
	sync := p.next(executor.NodeSynced, "")
	if !slices.Equal(sync.Running, []executor.RunningAttempt{{Job: "j1", Attempt: 1}}) {
		t.Fatalf("sync from the new agent: %+v, want j1 attempt 1 running", sync.Running)
	}
	if err := hub2.Start(context.Background(), as); err != nil {
		t.Fatal(err)
	}
	b.handle(cmd)
	time.Sleep(200 * time.Millisecond)
	jobs := b.Jobs()
	if len(jobs) != 1 || jobs[0].PID != pid || jobs[0].Ended {
		t.Fatalf("jobs of the new agent: %+v, want the one process %d, still running", jobs, pid)
	}
	if job, ok := b.JobOfPID(pid); !ok || job != "j1" {
		t.Errorf("JobOfPID(%d) = %q, %v: want j1", pid, job, ok)
	}
	// The new control plane learnt where j1 runs from the sync: it can
	// stop it; the job's supervisor tells the new agent its exit status.
	if err := hub2.Stop(context.Background(), "j1", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	e := p.next(executor.JobExited, "j1")
	if !e.Stopped || e.ExitCode != 143 {
		t.Errorf("exit of the taken-over job: %+v, want stopped with the workload's code 143", e)
	}
}

func TestControlPlaneAway(t *testing.T) {
	p := newPlane(t, agenthub.HubOptions{SilentAfter: 300 * time.Millisecond})
	a, _ := runAgent(t, p.url(), "n1", t.TempDir())
	p.next(executor.NodeSynced, "")
	p.hub.Start(context.Background(), assignment("short", 1, gpusOf("n1", 0), "--steps=40", "--step-time=10ms"))
	p.hub.Start(context.Background(), assignment("long", 1, gpusOf("n1", 1), "--steps=100000", "--step-time=5ms"))
	p.next(executor.JobStarted, "short")
	p.next(executor.JobStarted, "long")

	// The control plane goes away: the jobs keep running, "short" ends,
	// and the hub reports the silent node.
	p.down()
	silent := p.next(executor.NodeSilent, "")
	if silent.Node != "n1" {
		t.Errorf("silent: %+v", silent)
	}
	if n := p.hub.Nodes(); n[0].Connected {
		t.Error("the hub shows the silent node connected")
	}
	waitFor(t, "short to end while the control plane is away", func() bool {
		return !slices.ContainsFunc(a.Running(), func(r protocol.RunningAttempt) bool { return r.Job == "short" })
	})
	if !slices.ContainsFunc(a.Running(), func(r protocol.RunningAttempt) bool { return r.Job == "long" }) {
		t.Fatal("long stopped while the control plane was away")
	}

	// It comes back: the exit that happened meanwhile arrives, then the
	// node's running list.
	p.up(p.hub)
	e := p.next(executor.JobExited, "short")
	if e.ExitCode != 0 {
		t.Errorf("short's exit: %+v", e)
	}
	sync := p.next(executor.NodeSynced, "")
	if !slices.Equal(sync.Running, []executor.RunningAttempt{{Job: "long", Attempt: 1}}) {
		t.Errorf("sync on reconnect: %+v, want long running", sync.Running)
	}
	// Commands flow again.
	if err := p.hub.Stop(context.Background(), "long", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if e := p.next(executor.JobExited, "long"); !e.Stopped {
		t.Errorf("long's exit: %+v", e)
	}
}

func TestWorkloadResumesFromItsCheckpointAfterAStop(t *testing.T) {
	p := newPlane(t, agenthub.HubOptions{})
	dir := t.TempDir()
	runAgent(t, p.url(), "n1", dir)
	p.next(executor.NodeSynced, "")
	args := []string{"--steps=60", "--step-time=10ms"}
	p.hub.Start(context.Background(), assignment("j1", 1, gpusOf("n1", 0), args...))
	p.next(executor.JobStarted, "j1")
	waitSteps(t, dir, "j1", 1)
	p.hub.Stop(context.Background(), "j1", 5*time.Second)
	cp := p.next(executor.JobCheckpointed, "j1")
	p.next(executor.JobExited, "j1")

	as := assignment("j1", 2, gpusOf("n1", 1), args...)
	as.Resume = cp.Checkpoint
	p.hub.Start(context.Background(), as)
	p.next(executor.JobStarted, "j1")
	if e := p.next(executor.JobExited, "j1"); e.ExitCode != 0 || e.Attempt != 2 {
		t.Fatalf("second attempt: %+v", e)
	}
	log := jobLog(t, dir, "j1", 2)
	want := "resume_step=" + strconvI(cp.Checkpoint.Step) + " "
	if !strings.Contains(log, want) || !strings.Contains(log, "CUDA_VISIBLE_DEVICES=1 ") {
		t.Errorf("second attempt's log lacks %q on GPU 1:\n%s", want, log)
	}
	if strings.Contains(log, "step 1/60") {
		t.Errorf("second attempt started from step 1:\n%s", log)
	}
}

func TestJobAcrossNodesRunsOneProcessPerNode(t *testing.T) {
	p := newPlane(t, agenthub.HubOptions{})
	d1, d2 := t.TempDir(), t.TempDir()
	runAgent(t, p.url(), "n1", d1)
	runAgent(t, p.url(), "n2", d2)
	p.next(executor.NodeSynced, "")
	p.next(executor.NodeSynced, "")
	gpus := append(gpusOf("n2", 0, 1), gpusOf("n1", 2, 3)...)
	if err := p.hub.Start(context.Background(), assignment("gang", 1, gpus, "--steps=5", "--step-time=10ms")); err != nil {
		t.Fatal(err)
	}
	p.next(executor.JobStarted, "gang")
	e := p.next(executor.JobExited, "gang")
	if e.ExitCode != 0 {
		t.Errorf("exited: %+v", e)
	}
	l2, l1 := jobLog(t, d2, "gang", 1), jobLog(t, d1, "gang", 1)
	if !strings.Contains(l2, "CUDA_VISIBLE_DEVICES=0,1 ") || !strings.Contains(l2, "rank=0 world_size=2") {
		t.Errorf("n2's log:\n%s", l2)
	}
	if !strings.Contains(l1, "CUDA_VISIBLE_DEVICES=2,3 ") || !strings.Contains(l1, "rank=1 world_size=2") {
		t.Errorf("n1's log:\n%s", l1)
	}
	select {
	case e := <-p.events:
		if e.Job == "gang" {
			t.Errorf("a second event for the gang: %+v", e)
		}
	case <-time.After(200 * time.Millisecond):
	}
}

func TestFailingRankStopsTheOthers(t *testing.T) {
	p := newPlane(t, agenthub.HubOptions{FailStopGrace: 2 * time.Second})
	runAgent(t, p.url(), "n1", t.TempDir())
	b, _ := runAgent(t, p.url(), "n2", t.TempDir())
	p.next(executor.NodeSynced, "")
	p.next(executor.NodeSynced, "")
	// Rank 1 (n2) fails at step 3; rank 0 would run for long.
	as := assignment("gang", 1, append(gpusOf("n1", 0), gpusOf("n2", 0)...), "--steps=100000", "--step-time=10ms")
	p.hub.Start(context.Background(), as)
	p.next(executor.JobStarted, "gang")
	p2 := b.find("gang", 1)
	if p2 == nil {
		t.Fatal("n2 runs no rank of the gang")
	}
	syscall.Kill(p2.rec.PID, syscall.SIGKILL)
	e := p.next(executor.JobExited, "gang")
	if e.ExitCode != -1 || e.Stopped || !strings.Contains(e.Message, "rank 1 of 2") {
		t.Errorf("exited: %+v, want rank 1's kill", e)
	}
	waitFor(t, "rank 0 to be stopped", func() bool { return len(p.hub.Nodes()[0].Running) == 0 })
}

func TestStartRefusesWhatNoAgentCanRun(t *testing.T) {
	p := newPlane(t, agenthub.HubOptions{})
	runAgent(t, p.url(), "n1", t.TempDir())
	p.next(executor.NodeSynced, "")
	for name, tc := range map[string]struct {
		a    executor.Assignment
		want error
	}{
		"unknown node": {assignment("j", 1, gpusOf("n9", 0)), agenthub.ErrUnknownNode},
		"no GPUs":      {assignment("j", 1, nil), agenthub.ErrInvalidAssignment},
		"no command":   {executor.Assignment{Job: cluster.Job{ID: "j"}, Attempt: 1, Allocations: []cluster.Allocation{{GPU: cluster.GPURef{Node: "n1"}}}}, agenthub.ErrInvalidAssignment},
		"reserved env": {func() executor.Assignment {
			a := assignment("j", 1, gpusOf("n1", 0))
			a.Env = map[string]string{"CUDA_VISIBLE_DEVICES": "7"}
			return a
		}(), agenthub.ErrInvalidAssignment},
		"bad signal": {func() executor.Assignment {
			a := assignment("j", 1, gpusOf("n1", 0))
			a.CheckpointSignal = "SIGKILL"
			return a
		}(), agenthub.ErrInvalidAssignment},
	} {
		if err := p.hub.Start(context.Background(), tc.a); !errorsIs(err, tc.want) {
			t.Errorf("%s: Start = %v, want %v", name, err, tc.want)
		}
	}
}

func TestAgentEnvironmentHidesItsSettings(t *testing.T) {
	t.Setenv("PRESCIENT_TOKEN", "do-not-leak")
	a, err := New(Config{Server: "http://127.0.0.1:1", Token: "x", WorkDir: t.TempDir(), Node: protocol.NodeInfo{Name: "n1"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range a.cfg.Env {
		if strings.HasPrefix(kv, "PRESCIENT_") {
			t.Errorf("jobs would inherit %s", kv)
		}
	}
}

func TestACommandThatCannotStartIsReportedAsExit127(t *testing.T) {
	p := newPlane(t, agenthub.HubOptions{})
	runAgent(t, p.url(), "n1", t.TempDir())
	p.next(executor.NodeSynced, "")
	as := assignment("j1", 1, gpusOf("n1", 0))
	as.Command = []string{"/nonexistent/program"}
	if err := p.hub.Start(context.Background(), as); err != nil {
		t.Fatal(err)
	}
	e := p.next(executor.JobExited, "j1")
	if e.ExitCode != 127 || !strings.Contains(e.Message, "/nonexistent/program") {
		t.Errorf("exited: %+v, want 127 with the reason", e)
	}
}

func TestOutboxKeepsTheNewestInOrder(t *testing.T) {
	o := newOutbox(3)
	for i := range 5 {
		o.add(protocol.Event{Job: "j", Attempt: i})
	}
	got := o.pending(10)
	if len(got) != 3 || got[0].Attempt != 2 || got[2].Attempt != 4 || got[0].Seq != 3 || o.dropped != 2 {
		t.Fatalf("outbox holds %+v (dropped %d), want the newest 3 in order, 2 dropped", got, o.dropped)
	}
	o.delivered(got[1].Seq)
	if rest := o.pending(10); len(rest) != 1 || rest[0].Attempt != 4 {
		t.Errorf("after delivering up to seq %d: %+v", got[1].Seq, rest)
	}
}

// An agent started with a relative --work-dir gives its jobs absolute
// paths: the job runs in its own directory, where the relative ones would
// point elsewhere (the demo's first run failed every job this way).
func TestRelativeWorkDirStillAcknowledgesCheckpoints(t *testing.T) {
	p := newPlane(t, agenthub.HubOptions{})
	base := t.TempDir()
	t.Chdir(base)
	runAgent(t, p.url(), "n1", "agentdir")
	p.next(executor.NodeSynced, "")
	if err := p.hub.Start(context.Background(), assignment("j1", 1, gpusOf("n1", 0), "--steps=100000", "--step-time=5ms")); err != nil {
		t.Fatal(err)
	}
	p.next(executor.JobStarted, "j1")
	waitSteps(t, filepath.Join(base, "agentdir"), "j1", 1)
	if err := p.hub.Checkpoint(context.Background(), "j1"); err != nil {
		t.Fatal(err)
	}
	e := p.next(executor.JobCheckpointed, "j1")
	if !filepath.IsAbs(e.Checkpoint.Path) {
		t.Errorf("checkpoint path %q is relative", e.Checkpoint.Path)
	}
}

// The agent knows each job's labels for the collector, which writes them
// with the job's GPU processes.
func TestAgentKnowsTheLabelsOfItsJobs(t *testing.T) {
	p := newPlane(t, agenthub.HubOptions{})
	a, _ := runAgent(t, p.url(), "n1", t.TempDir())
	p.next(executor.NodeSynced, "")
	as := assignment("j1", 1, gpusOf("n1", 0), "--steps=100000", "--step-time=5ms")
	as.Job.Spec.Labels = map[string]string{"experiment": "e7"}
	if err := p.hub.Start(context.Background(), as); err != nil {
		t.Fatal(err)
	}
	p.next(executor.JobStarted, "j1")
	if got := a.LabelsOfJob("j1"); got["experiment"] != "e7" {
		t.Errorf("labels of j1: %v", got)
	}
	if got := a.LabelsOfJob("nope"); got != nil {
		t.Errorf("labels of a job the agent does not run: %v", got)
	}
	var _ collector.JobLabels = a
}
