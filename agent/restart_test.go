package agent

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/backend/agenthub"
	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
)

// The agent is killed (kill -9) while its job runs; the job ends while no
// agent runs; the next agent on the work directory reports the job's own
// exit code, which the job's supervisor wrote down.
func TestAJobThatEndsWhileTheAgentIsDownIsReportedWithItsExitCode(t *testing.T) {
	for _, tc := range []struct {
		name    string
		command []string // nil: the workload with args
		args    []string
		want    int
	}{
		{name: "a workload that finishes exits 0", args: []string{"--steps=20", "--step-time=25ms"}, want: 0},
		{name: "a command that fails exits 3", command: []string{"/bin/sh", "-c", "sleep 0.5; exit 3"}, want: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPlane(t, agenthub.HubOptions{})
			dir := t.TempDir()
			first := spawnAgent(t, p.url(), "n1", dir)
			p.next(executor.NodeSynced, "")
			as := assignment("j1", 1, gpusOf("n1", 0), tc.args...)
			if tc.command != nil {
				as.Command = tc.command
			}
			if err := p.hub.Start(context.Background(), as); err != nil {
				t.Fatal(err)
			}
			p.next(executor.JobStarted, "j1")
			first.kill()
			status := statusPath(dir, "j1", 1)
			if _, err := os.Stat(status); err == nil {
				t.Fatal("the job ended before the agent was killed: make it longer")
			}
			recs, err := loadState(filepath.Join(dir, stateFileName))
			if err != nil || len(recs) != 1 || recs[0].SupervisorPID <= 0 {
				t.Fatalf("state file: %+v, %v; want the attempt with its supervisor", recs, err)
			}
			waitFor(t, "the job and its supervisor to end while no agent runs", func() bool {
				_, err := os.Stat(status)
				return err == nil && !alive("/proc", recs[0].SupervisorPID, recs[0].SupervisorStartTicks)
			})

			runAgent(t, p.url(), "n1", dir)
			e := p.next(executor.JobExited, "j1")
			if e.ExitCode != tc.want || e.Stopped || e.Message != "" {
				t.Errorf("exit reported after the restart: %+v, want code %d, not stopped, no message", e, tc.want)
			}
			if sync := p.next(executor.NodeSynced, ""); len(sync.Running) != 0 {
				t.Errorf("sync after the restart: %+v, want nothing running", sync.Running)
			}
		})
	}
}

// A job that still runs when the new agent starts is taken over; its later
// exit is reported with its code, as if the agent had never gone.
func TestAJobTakenOverAtRestartIsReportedWithItsExitCode(t *testing.T) {
	p := newPlane(t, agenthub.HubOptions{})
	dir := t.TempDir()
	first := spawnAgent(t, p.url(), "n1", dir)
	p.next(executor.NodeSynced, "")
	if err := p.hub.Start(context.Background(), assignment("j1", 1, gpusOf("n1", 0), "--steps=60", "--step-time=25ms")); err != nil {
		t.Fatal(err)
	}
	p.next(executor.JobStarted, "j1")
	waitSteps(t, dir, "j1", 1)
	first.kill()

	a, _ := runAgent(t, p.url(), "n1", dir)
	sync := p.next(executor.NodeSynced, "")
	if !slices.Equal(sync.Running, []executor.RunningAttempt{{Job: "j1", Attempt: 1}}) {
		t.Fatalf("sync from the new agent: %+v, want j1 attempt 1 running", sync.Running)
	}
	e := p.next(executor.JobExited, "j1")
	if e.ExitCode != 0 || e.Stopped || e.Message != "" {
		t.Errorf("exit of the taken-over job: %+v, want code 0, not stopped, no message", e)
	}
	if log := jobLog(t, dir, "j1", 1); !strings.Contains(log, "done: 60 steps") {
		t.Errorf("the job did not run to its end:\n%s", log)
	}
	if jobs := a.Jobs(); len(jobs) != 1 || !jobs[0].Ended || jobs[0].ExitCode != 0 {
		t.Errorf("jobs of the new agent: %+v, want j1 ended with code 0", jobs)
	}
}

// A stop asked of an agent that is killed during the grace period is
// carried on by the next agent: the job that ignores SIGTERM gets SIGKILL
// at the end of the grace, and its exit is reported as stopped.
func TestAStopOutlivesTheAgentThatWasAskedForIt(t *testing.T) {
	p := newPlane(t, agenthub.HubOptions{})
	dir := t.TempDir()
	first := spawnAgent(t, p.url(), "n1", dir)
	p.next(executor.NodeSynced, "")
	p.hub.Start(context.Background(), assignment("j1", 1, gpusOf("n1", 0), "--steps=100000", "--step-time=5ms", "--ignore-sigterm"))
	p.next(executor.JobStarted, "j1")
	waitSteps(t, dir, "j1", 1)
	begin := time.Now()
	const grace = 1500 * time.Millisecond
	if err := p.hub.Stop(context.Background(), "j1", grace); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the job to get SIGTERM", func() bool {
		return strings.Contains(jobLog(t, dir, "j1", 1), "SIGTERM received: ignored")
	})
	first.kill()

	runAgent(t, p.url(), "n1", dir)
	e := p.next(executor.JobExited, "j1")
	if took := time.Since(begin); took < grace {
		t.Errorf("exited after %s, before the grace of %s", took, grace)
	}
	if e.ExitCode != -1 || !e.Stopped || e.Message != "killed by SIGKILL" {
		t.Errorf("exited: %+v, want killed (-1, killed by SIGKILL) and stopped", e)
	}
}

// Only when no exit status can be found is it reported unknown (-1), with
// the reason.
func TestAnExitWithoutAStatusIsReportedUnknownWithTheReason(t *testing.T) {
	gone := exec.Command("/bin/true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	recs := []record{
		// Its supervisor was killed before the job ended.
		{Job: "no-status", Attempt: 1, WorldSize: 1, StartedAt: time.Now(), PID: gone.Process.Pid, StartTicks: 1,
			SupervisorPID: gone.Process.Pid, SupervisorStartTicks: 1, StatusPath: filepath.Join(dir, "none.status.json")},
		// Started by an agent from before supervisors.
		{Job: "old-agent", Attempt: 1, WorldSize: 1, StartedAt: time.Now(), PID: gone.Process.Pid, StartTicks: 1},
	}
	if err := saveState(filepath.Join(dir, stateFileName), recs); err != nil {
		t.Fatal(err)
	}
	p := newPlane(t, agenthub.HubOptions{})
	runAgent(t, p.url(), "n1", dir)
	got := map[string]executor.JobEvent{}
	for range recs {
		e := p.next(executor.JobExited, "")
		got[string(e.Job)] = e
	}
	for job, want := range map[string]string{"no-status": "ended without writing", "old-agent": "without a supervisor"} {
		e, ok := got[job]
		if !ok || e.ExitCode != -1 || !strings.Contains(e.Message, "exit status unknown") || !strings.Contains(e.Message, want) {
			t.Errorf("exit of %s: %+v, want -1, exit status unknown: %s", job, e, want)
		}
	}
}

// An exit the agent recorded but never delivered (killed in between) is
// reported by the next agent; one it delivered, or one a version 1 state
// file holds, is not reported again.
func TestAnExitNotDeliveredIsReportedByTheNextAgent(t *testing.T) {
	p := newPlane(t, agenthub.HubOptions{})
	dir := t.TempDir()
	ended := time.Now().Add(-time.Minute).UTC().Truncate(time.Second)
	rec := func(job string, reported bool) record {
		return record{Job: job, Attempt: 1, WorldSize: 1, GPUs: []int{0}, StartedAt: ended.Add(-time.Minute), PID: 1 << 22,
			Ended: true, EndedAt: ended, ExitCode: 0, Reported: reported}
	}
	neverRan := rec("never-ran", false)
	neverRan.Lost, neverRan.ExitCode = true, -1
	if err := saveState(filepath.Join(dir, stateFileName), []record{rec("lost-exit", false), rec("told", true), neverRan}); err != nil {
		t.Fatal(err)
	}
	runAgent(t, p.url(), "n1", dir)
	ends := map[cluster.JobID]executor.JobEvent{}
	for range 2 {
		e := p.nextOf(executor.JobExited, executor.JobLost)
		ends[e.Job] = e
	}
	if e := ends["lost-exit"]; e.Type != executor.JobExited || e.ExitCode != 0 || !e.Time.Equal(ended) {
		t.Errorf("the exit reported again: %+v; want code 0 at %s", e, ended)
	}
	// An attempt that never started is reported lost again, never as an exit
	// (which would fail its job).
	if e := ends["never-ran"]; e.Type != executor.JobLost {
		t.Errorf("the undelivered loss reported again as %+v; want lost", e)
	}
	p.next(executor.NodeSynced, "")
	waitFor(t, "the state file to say the exit was reported", func() bool {
		recs, err := loadState(filepath.Join(dir, stateFileName))
		return err == nil && slices.ContainsFunc(recs, func(r record) bool { return r.Job == "lost-exit" && r.Reported })
	})

	// A version 1 file: its ended attempts count as reported.
	old := t.TempDir()
	v1 := `{"version":1,"attempts":[{"job":"old","attempt":1,"rank":0,"world_size":1,"gpus":[0],"pid":4194304,"ended":true,"exit_code":0}]}`
	if err := os.WriteFile(filepath.Join(old, stateFileName), []byte(v1), 0o600); err != nil {
		t.Fatal(err)
	}
	recs, err := loadState(filepath.Join(old, stateFileName))
	if err != nil || len(recs) != 1 || !recs[0].Reported {
		t.Fatalf("a version 1 state file: %+v, %v; want its ended attempt taken as reported", recs, err)
	}
}

// StopAll, once the agent stopped, stops its jobs as a stop command does:
// the workload checkpoints on SIGTERM and exits; the next agent reports
// the checkpoint, then the stopped exit.
func TestStopAllCheckpointsAndStopsTheJobsForTheNextAgentToReport(t *testing.T) {
	p := newPlane(t, agenthub.HubOptions{})
	dir := t.TempDir()
	a, stop := runAgent(t, p.url(), "n1", dir)
	p.next(executor.NodeSynced, "")
	if err := p.hub.Start(context.Background(), assignment("j1", 1, gpusOf("n1", 0), "--steps=100000", "--step-time=5ms")); err != nil {
		t.Fatal(err)
	}
	p.next(executor.JobStarted, "j1")
	waitSteps(t, dir, "j1", 1)
	stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if n, err := a.StopAll(ctx, 5*time.Second); n != 1 || err != nil {
		t.Fatalf("StopAll = %d, %v; want the one job stopped", n, err)
	}
	if jobs := a.Jobs(); len(jobs) != 1 || !jobs[0].Ended || jobs[0].ExitCode != 143 {
		t.Fatalf("jobs after StopAll: %+v; want j1 ended by SIGTERM (143)", jobs)
	}

	runAgent(t, p.url(), "n1", dir)
	if cp := p.next(executor.JobCheckpointed, "j1"); cp.Checkpoint == nil || cp.Checkpoint.Step <= 0 {
		t.Errorf("checkpoint reported by the next agent: %+v", cp)
	}
	if e := p.next(executor.JobExited, "j1"); !e.Stopped {
		t.Errorf("exit reported by the next agent: %+v; want stopped", e)
	}
}

// An attempt its agent was killed while starting (claimed, its process
// not yet known) is settled by the next agent from what there is: the
// supervisor still running it (found by its command line, then watched),
// the exit status it wrote, or, with neither, a start that never happened,
// reported lost for the plane to start again (not failed).
func TestAnAttemptWhoseAgentDiedStartingItIsSettled(t *testing.T) {
	p := newPlane(t, agenthub.HubOptions{})
	dir := t.TempDir()
	claimed := func(job string) record {
		return record{Job: job, Attempt: 1, WorldSize: 1, GPUs: []int{0}, StartedAt: time.Now().UTC(),
			Dir: filepath.Join(dir, "jobs", job, "attempt-1"), StatusPath: statusPath(dir, job, 1)}
	}
	running, wrote, never := claimed("running"), claimed("wrote"), claimed("never")
	for _, r := range []record{running, wrote, never} {
		if err := os.MkdirAll(r.Dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := writeExitStatus(wrote.StatusPath, exitStatus{PID: 1, ExitCode: 4, EndedAt: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	sup := exec.Command(os.Args[0], SuperviseArg, running.StatusPath, "--", "/bin/sh", "-c", "sleep 1; exit 0")
	sup.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := sup.Start(); err != nil {
		t.Fatal(err)
	}
	defer sup.Wait()
	waitFor(t, "the supervisor to start its job", func() bool { return len(childrenOf(sup.Process.Pid)) > 0 })
	if err := saveState(filepath.Join(dir, stateFileName), []record{running, wrote, never}); err != nil {
		t.Fatal(err)
	}

	runAgent(t, p.url(), "n1", dir)
	got := map[string]executor.JobEvent{}
	for range 3 {
		e := p.nextOf(executor.JobExited, executor.JobLost)
		got[string(e.Job)] = e
	}
	if e := got["wrote"]; e.Type != executor.JobExited || e.ExitCode != 4 {
		t.Errorf("the attempt whose supervisor wrote exit 4: %+v", e)
	}
	if e := got["never"]; e.Type != executor.JobLost {
		t.Errorf("the attempt that never started: %+v, want lost", e)
	}
	if e := got["running"]; e.Type != executor.JobExited || e.ExitCode != 0 {
		t.Errorf("the attempt whose supervisor ran on: %+v, want its exit 0 once it ended", e)
	}
}

// childrenOf lists the processes whose parent is pid.
func childrenOf(pid int) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := readProcStat("/proc", n); err == nil && st.PPID == pid {
			out = append(out, n)
		}
	}
	return out
}
