package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"github.com/prescient-sched/prescient/agent/protocol"
	"github.com/prescient-sched/prescient/internal/fsutil"
)

// SuperviseArg, as the first argument, makes a program run Supervise. The
// agent starts every job through its supervisor: by default its own
// executable (/proc/self/exe) with this argument, so a program that runs an
// Agent must begin its main with
//
//	if len(os.Args) > 1 && os.Args[1] == agent.SuperviseArg {
//		os.Exit(agent.Supervise(os.Args[2:]))
//	}
const SuperviseArg = "__prescient-agent-supervise"

// The supervisor, a small process of its own session, is the job's parent
// and outlives the agent: it alone can wait for the job, so it writes the
// job's exit status to a file the agent reads when it watches the
// supervisor end, also an agent started after the job (a restart).
//
//	agent ── starts ──> supervisor (session and group of its own)
//	                      └── starts ──> job (process group of its own)
//	agent <─ fd 3: {"pid": job} or {"error": why it did not start}
//	supervisor ─ job ends ─> status file {"exit_code", "signal", "ended_at"}, exits
//
// The agent signals the job's process (group) itself, as it did with no
// supervisor; a signal sent to the supervisor goes on to the job.

// startReport is what the supervisor tells the agent on fd 3 once it tried
// to start the job.
type startReport struct {
	PID   int    `json:"pid,omitempty"`
	Error string `json:"error,omitempty"`
}

// exitStatus is the status file the supervisor writes when the job ends.
type exitStatus struct {
	PID int `json:"pid"`
	// ExitCode is the job's exit code, -1 when a signal killed it.
	ExitCode int `json:"exit_code"`
	// Signal names the signal that killed it.
	Signal  string    `json:"signal,omitempty"`
	EndedAt time.Time `json:"ended_at"`
}

// forwardedSignals are the signals a supervisor passes on to its job.
var forwardedSignals = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT,
	syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH}

// Supervise runs a job's supervisor: args are the status file, "--" and
// the job's command. It starts the command in its own process group, with
// the supervisor's environment, directory, stdout and stderr, reports it on
// fd 3, passes on the signals it gets, waits for it, writes its exit status
// atomically, and returns the code to exit with.
func Supervise(args []string) int {
	report := os.NewFile(3, "start-report")
	if len(args) < 3 || args[1] != "--" {
		fmt.Fprintf(os.Stderr, "prescient supervisor: usage: %s STATUS_FILE -- COMMAND [ARG...]\n", SuperviseArg)
		return 2
	}
	statusPath, argv := args[0], args[2:]
	// Signals that come before the job runs wait for it.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwardedSignals...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if report != nil {
		syscall.CloseOnExec(3) // the job does not inherit it
	}
	err := cmd.Start()
	rep := startReport{}
	if err != nil {
		rep.Error = err.Error()
	} else {
		rep.PID = cmd.Process.Pid
	}
	if report != nil {
		json.NewEncoder(report).Encode(rep)
		report.Close()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "prescient agent: start: %v\n", err)
		return 127
	}

	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	for {
		select {
		case s := <-sigs:
			cmd.Process.Signal(s)
		case err := <-exited:
			st := exitStatus{PID: cmd.Process.Pid, ExitCode: exitCode(cmd.ProcessState, err), EndedAt: time.Now().UTC()}
			code := st.ExitCode
			if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				st.Signal = signalName(ws.Signal())
				code = 128 + int(ws.Signal())
			}
			if err := writeExitStatus(statusPath, st); err != nil {
				fmt.Fprintf(os.Stderr, "prescient supervisor: %v\n", err)
			}
			return code
		}
	}
}

// signalName is a signal's name with its SIG prefix.
func signalName(s syscall.Signal) string {
	if name := signalNames[s]; name != "" {
		return name
	}
	return fmt.Sprintf("signal %d", int(s))
}

var signalNames = map[syscall.Signal]string{
	syscall.SIGHUP: "SIGHUP", syscall.SIGINT: "SIGINT", syscall.SIGQUIT: "SIGQUIT", syscall.SIGILL: "SIGILL",
	syscall.SIGTRAP: "SIGTRAP", syscall.SIGABRT: "SIGABRT", syscall.SIGBUS: "SIGBUS", syscall.SIGFPE: "SIGFPE",
	syscall.SIGKILL: "SIGKILL", syscall.SIGUSR1: "SIGUSR1", syscall.SIGSEGV: "SIGSEGV", syscall.SIGUSR2: "SIGUSR2",
	syscall.SIGPIPE: "SIGPIPE", syscall.SIGALRM: "SIGALRM", syscall.SIGTERM: "SIGTERM", syscall.SIGXCPU: "SIGXCPU",
	syscall.SIGXFSZ: "SIGXFSZ", syscall.SIGSYS: "SIGSYS",
}

// writeExitStatus writes the status file atomically: a reader sees none or
// all of it.
func writeExitStatus(path string, st exitStatus) error {
	return fsutil.WriteAtomic(path, 0o644, func(w io.Writer) error { return json.NewEncoder(w).Encode(st) })
}

// readExitStatus reads a status file; ok is false when there is none.
func readExitStatus(path string) (st exitStatus, ok bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return exitStatus{}, false, nil
	}
	if err != nil {
		return exitStatus{}, false, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return exitStatus{}, false, fmt.Errorf("exit status %s: %w", path, err)
	}
	return st, true, nil
}

// readStartReport reads the supervisor's report on its job's start, for at
// most timeout.
func readStartReport(r *os.File, timeout time.Duration) (startReport, error) {
	r.SetReadDeadline(time.Now().Add(timeout))
	b, err := io.ReadAll(io.LimitReader(r, 64<<10))
	if err != nil {
		return startReport{}, fmt.Errorf("supervisor: no start report: %w", err)
	}
	var rep startReport
	if err := json.Unmarshal(b, &rep); err != nil {
		return startReport{}, fmt.Errorf("supervisor: start report %q: %w (does the supervisor program call agent.Supervise on %s?)",
			protocol.Truncate(string(b), 80), err, SuperviseArg)
	}
	if rep.Error == "" && rep.PID <= 0 {
		return startReport{}, errors.New("supervisor: start report without a PID")
	}
	return rep, nil
}
