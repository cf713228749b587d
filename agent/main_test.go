package agent

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/agent/protocol"
	"github.com/prescient-sched/prescient/workload"
)

// childEnv makes the test binary run the workload instead of the tests:
// jobs in these tests are real processes, started by the agent, without a
// build of the prescient binary.
const childEnv = "AGENT_TEST_RUN_WORKLOAD"

func TestMain(m *testing.M) {
	// The agent starts its jobs through its own executable, the test
	// binary here, as their supervisor; the job environment makes the
	// supervisor's child the workload.
	if len(os.Args) > 1 && os.Args[1] == SuperviseArg {
		os.Exit(Supervise(os.Args[2:]))
	}
	if os.Getenv(childEnv) == "1" {
		os.Exit(runWorkloadChild(os.Args[1:]))
	}
	if spec := os.Getenv(agentProcEnv); spec != "" {
		os.Exit(runAgentChild(spec))
	}
	os.Exit(m.Run())
}

// runWorkloadChild is `prescient workload` in the test binary.
func runWorkloadChild(args []string) int {
	fs := flag.NewFlagSet("workload", flag.ContinueOnError)
	o := workload.Options{CheckpointDir: os.Getenv(EnvCheckpointDir), AckPath: os.Getenv(EnvCheckpointAck), Stdout: os.Stdout}
	fs.IntVar(&o.Steps, "steps", 100, "")
	fs.DurationVar(&o.StepTime, "step-time", 20*time.Millisecond, "")
	fs.IntVar(&o.CheckpointEvery, "checkpoint-every", 0, "")
	fs.IntVar(&o.FailAt, "fail-at", 0, "")
	fs.BoolVar(&o.IgnoreSIGTERM, "ignore-sigterm", false, "")
	sig := fs.String("checkpoint-signal", "SIGUSR1", "")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	s, err := protocol.ParseSignal(*sig)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	o.CheckpointSignal = s
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, s)
	o.Signals = sigs
	res, err := workload.Run(context.Background(), o)
	if err != nil {
		fmt.Println("error:", err)
	}
	return workload.ExitCode(res, err)
}

// workloadCommand is the argv of a workload job.
func workloadCommand(args ...string) []string {
	return append([]string{os.Args[0]}, args...)
}

// workloadEnv is the job environment that makes the test binary a workload.
var workloadEnv = map[string]string{childEnv: "1"}
