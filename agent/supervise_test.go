package agent

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The supervisor starts the job, reports its PID, passes on the signals it
// gets, and writes how the job ended.
func TestSupervisorRecordsHowTheJobEnded(t *testing.T) {
	for _, tc := range []struct {
		name     string
		argv     []string
		signal   os.Signal // sent to the supervisor once the job is ready
		wantExit int       // the supervisor's
		want     exitStatus
	}{
		{name: "exit code", argv: []string{"/bin/sh", "-c", "touch ready; exit 3"}, wantExit: 3, want: exitStatus{ExitCode: 3}},
		{name: "a SIGTERM to the supervisor reaches the job",
			argv:   []string{"/bin/sh", "-c", "trap 'exit 7' TERM; touch ready; while :; do sleep 0.05; done"},
			signal: syscall.SIGTERM, wantExit: 7, want: exitStatus{ExitCode: 7}},
		{name: "killed by a signal", argv: []string{"/bin/sh", "-c", "touch ready; kill -KILL $$"},
			wantExit: 128 + 9, want: exitStatus{ExitCode: -1, Signal: "SIGKILL"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			status := filepath.Join(dir, "status.json")
			cmd, rep := startSupervisor(t, dir, status, tc.argv)
			waitFor(t, "the job to be ready", func() bool {
				_, err := os.Stat(filepath.Join(dir, "ready"))
				return err == nil
			})
			if tc.signal != nil {
				cmd.Process.Signal(tc.signal)
			}
			cmd.Wait()
			if code := cmd.ProcessState.ExitCode(); code != tc.wantExit {
				t.Errorf("supervisor exited %d, want %d", code, tc.wantExit)
			}
			st, ok, err := readExitStatus(status)
			if err != nil || !ok {
				t.Fatalf("status file: %v, %v", ok, err)
			}
			if st.PID != rep.PID || st.ExitCode != tc.want.ExitCode || st.Signal != tc.want.Signal || st.EndedAt.IsZero() {
				t.Errorf("status %+v, want %+v with the job's pid %d and its end time", st, tc.want, rep.PID)
			}
		})
	}
	t.Run("a command that does not start", func(t *testing.T) {
		dir := t.TempDir()
		status := filepath.Join(dir, "status.json")
		cmd, rep := startSupervisor(t, dir, status, []string{"/nonexistent/program"})
		cmd.Wait()
		if !strings.Contains(rep.Error, "/nonexistent/program") || rep.PID != 0 || cmd.ProcessState.ExitCode() != 127 {
			t.Errorf("report %+v, supervisor exit %d: want the reason, exit 127", rep, cmd.ProcessState.ExitCode())
		}
		if _, ok, _ := readExitStatus(status); ok {
			t.Error("a status file for a job that never ran")
		}
	})
}

// startSupervisor runs the test binary as the supervisor of argv in dir
// and reads its start report.
func startSupervisor(t *testing.T, dir, status string, argv []string) (*exec.Cmd, startReport) {
	t.Helper()
	rd, wr, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	cmd := exec.Command(os.Args[0], append([]string{SuperviseArg, status, "--"}, argv...)...)
	cmd.Dir, cmd.ExtraFiles = dir, []*os.File{wr}
	err = cmd.Start()
	wr.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	rep, err := readStartReport(rd, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return cmd, rep
}
