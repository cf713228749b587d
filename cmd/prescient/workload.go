package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/prescient-sched/prescient/agent/protocol"
	"github.com/prescient-sched/prescient/workload"
)

type workloadOptions struct {
	steps            int
	stepTime         time.Duration
	checkpointEvery  int
	failAt           int
	ignoreSIGTERM    bool
	checkpointDir    string
	checkpointAck    string
	checkpointSignal string
}

func newWorkloadCmd(g *globals) *cobra.Command {
	o := workloadOptions{}
	cmd := &cobra.Command{
		Use:   "workload",
		Short: "Run a small training-like program (for tests and demos of the node agent)",
		Long: `Run --steps steps of --step-time each, like a training job, printing one
progress line per step and, first, the job's CUDA_VISIBLE_DEVICES.

Checkpoints go to --checkpoint-dir (PRESCIENT_CHECKPOINT_DIR, which the node
agent sets), written atomically; at start the run resumes from the newest
valid one there. The checkpoint signal (SIGUSR1) writes a checkpoint and then
the acknowledgement file --checkpoint-ack (PRESCIENT_CHECKPOINT_ACK) holding
{"step": N, "path": "..."}; so does every --checkpoint-every steps.
SIGTERM writes a checkpoint and stops.

Exit codes: 0 every step ran; 1 failed (--fail-at, or a checkpoint could not
be written); 143 stopped by SIGTERM after its checkpoint.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runWorkload(cmd.Context(), g, o, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.steps, "steps", 100, "steps in all, counting those done before a resume")
	f.DurationVar(&o.stepTime, "step-time", time.Second, "how long one step takes")
	f.IntVar(&o.checkpointEvery, "checkpoint-every", 0, "write a checkpoint every so many steps (0: only when asked and on SIGTERM)")
	f.IntVar(&o.failAt, "fail-at", 0, "fail (exit 1) at this step (0: never)")
	f.BoolVar(&o.ignoreSIGTERM, "ignore-sigterm", false, "keep running on SIGTERM (to test the agent's SIGKILL after the grace)")
	f.StringVar(&o.checkpointDir, "checkpoint-dir", "", "checkpoint directory (empty: no checkpoints); the agent sets PRESCIENT_CHECKPOINT_DIR")
	f.StringVar(&o.checkpointAck, "checkpoint-ack", "", "file written after each checkpoint; the agent sets PRESCIENT_CHECKPOINT_ACK")
	f.StringVar(&o.checkpointSignal, "checkpoint-signal", "SIGUSR1", "signal that asks for a checkpoint")
	return cmd
}

// workloadReport is what workload prints when it ends.
type workloadReport struct {
	workload.Result
	ExitCode int `json:"exit_code"`
}

func (r workloadReport) writeTable(w io.Writer) error {
	t := newTable(w)
	t.row("steps", r.Steps)
	t.row("resumed_from", r.ResumedFrom)
	t.row("checkpoints", r.Checkpoints)
	t.row("stopped", r.Stopped)
	t.row("loss", fmt.Sprintf("%.4f", r.Loss))
	t.row("duration_s", fmt.Sprintf("%.1f", r.DurationS))
	t.row("exit_code", r.ExitCode)
	return t.flush()
}

func runWorkload(ctx context.Context, g *globals, o workloadOptions, stdout io.Writer) error {
	sig, err := protocol.ParseSignal(o.checkpointSignal)
	if err != nil {
		return fmt.Errorf("--checkpoint-signal: %w", err)
	}
	// Progress lines go to stdout; in JSON mode to stderr, so that stdout is
	// the one report object.
	progress := stdout
	if g.output == "json" {
		progress = os.Stderr
	}
	wo := workload.Options{
		Steps: o.steps, StepTime: o.stepTime, CheckpointEvery: o.checkpointEvery, FailAt: o.failAt,
		IgnoreSIGTERM: o.ignoreSIGTERM, CheckpointDir: o.checkpointDir, AckPath: o.checkpointAck,
		CheckpointSignal: sig, Stdout: progress, Logger: g.logger,
	}
	if err := wo.Validate(); err != nil {
		return err
	}
	// The workload answers SIGTERM itself (checkpoint, then exit 143, or
	// nothing with --ignore-sigterm), so the command's context, which
	// SIGTERM cancels, does not stop it.
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGTERM, sig)
	defer signal.Stop(signals)
	wo.Signals = signals
	res, err := workload.Run(context.WithoutCancel(ctx), wo)
	code := workload.ExitCode(res, err)
	if perr := g.print(stdout, workloadReport{Result: res, ExitCode: code}); perr != nil && err == nil {
		err = perr
	}
	if err != nil {
		return fmt.Errorf("workload: %w", err)
	}
	if code != 0 {
		os.Exit(code)
	}
	return nil
}
