package workload

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"syscall"
	"time"

	"github.com/prescient-sched/prescient/internal/fsutil"
)

// Exit codes of `prescient workload`.
const (
	ExitDone    = 0   // every step ran
	ExitFailed  = 1   // --fail-at was reached, or a checkpoint could not be written
	ExitStopped = 143 // SIGTERM: it checkpointed and stopped (128 + 15, as a shell reports it)
)

// EnvResumePath names the checkpoint the control plane resumes a job from
// (agent.EnvResumePath, set by the node agent).
const EnvResumePath = "PRESCIENT_RESUME_PATH"

// ErrFailAt is returned when the step given by Options.FailAt is reached.
var ErrFailAt = errors.New("failed on purpose (--fail-at)")

// Options configure a run.
type Options struct {
	Steps    int           // steps in all, counting those done before a resume
	StepTime time.Duration // how long one step takes
	// CheckpointEvery writes a checkpoint every so many steps; 0 only on
	// request and on SIGTERM.
	CheckpointEvery int
	// FailAt makes the run fail when it reaches this step (1-based); 0
	// never.
	FailAt int
	// IgnoreSIGTERM keeps running on SIGTERM (to test the agent's SIGKILL).
	IgnoreSIGTERM bool
	// CheckpointDir is where checkpoints go and are resumed from; empty
	// means no checkpoints.
	CheckpointDir string
	// AckPath is the file written after each checkpoint; empty means none.
	AckPath string
	// CheckpointSignal is the signal that asks for a checkpoint; default
	// SIGUSR1.
	CheckpointSignal os.Signal
	// Signals delivers the signals the process receives (SIGTERM and the
	// checkpoint signal); nil means none arrive.
	Signals <-chan os.Signal
	// Stdout receives the progress lines; nil discards them.
	Stdout io.Writer
	Logger *slog.Logger
	// Env reads the environment for the start line and EnvResumePath;
	// default os.Getenv.
	Env func(string) string
}

// Validate names the option that is wrong.
func (o Options) Validate() error {
	switch {
	case o.Steps <= 0:
		return fmt.Errorf("--steps: %d: want a positive number", o.Steps)
	case o.StepTime < 0:
		return fmt.Errorf("--step-time: %s: want 0 or a positive duration", o.StepTime)
	case o.CheckpointEvery < 0:
		return fmt.Errorf("--checkpoint-every: %d: want 0 or a positive number of steps", o.CheckpointEvery)
	case o.FailAt < 0:
		return fmt.Errorf("--fail-at: %d: want 0 or a step number", o.FailAt)
	case o.AckPath != "" && o.CheckpointDir == "":
		return errors.New("--checkpoint-ack: set without a checkpoint directory")
	}
	return nil
}

// Result says what a run did.
type Result struct {
	Steps       int     `json:"steps"`        // steps done in all, counting those before the resume
	ResumedFrom int     `json:"resumed_from"` // step of the checkpoint it resumed from; 0 afresh
	Checkpoints int     `json:"checkpoints"`  // checkpoints this run wrote
	Stopped     bool    `json:"stopped"`      // SIGTERM ended it
	Loss        float64 `json:"loss"`
	DurationS   float64 `json:"duration_s"`
	// LastCheckpoint is the path of the newest checkpoint this run wrote.
	LastCheckpoint string `json:"last_checkpoint,omitempty"`
}

// ExitCode is the process exit code for a run's result and error.
func ExitCode(r Result, err error) int {
	switch {
	case err != nil:
		return ExitFailed
	case r.Stopped:
		return ExitStopped
	}
	return ExitDone
}

// Run runs the steps. It returns when every step ran, on SIGTERM (after a
// checkpoint, with Result.Stopped), at FailAt (ErrFailAt), or when ctx ends
// (ctx.Err(), without a checkpoint: the process is being killed).
func Run(ctx context.Context, o Options) (Result, error) {
	if err := o.Validate(); err != nil {
		return Result{}, err
	}
	if o.Stdout == nil {
		o.Stdout = io.Discard
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Env == nil {
		o.Env = os.Getenv
	}
	if o.CheckpointSignal == nil {
		o.CheckpointSignal = syscall.SIGUSR1
	}
	start := time.Now()
	r := &run{o: o, log: o.Logger.With("component", "workload")}

	// 1. Resume from the newest valid checkpoint, if there is one: in the
	// checkpoint directory, or the one the control plane names
	// (PRESCIENT_RESUME_PATH: the last one an earlier attempt reported,
	// perhaps from another node's directory), whichever is newer.
	if o.CheckpointDir != "" {
		if err := os.MkdirAll(o.CheckpointDir, 0o755); err != nil {
			return Result{}, fmt.Errorf("checkpoint dir: %w", err)
		}
		cp, skipped, err := Latest(o.CheckpointDir)
		if err != nil {
			return Result{}, err
		}
		for _, s := range skipped {
			r.log.Warn("skipping an invalid checkpoint", "path", s.Path, "error", s.Err)
		}
		if path := o.Env(EnvResumePath); path != "" {
			named, err := Read(path)
			switch {
			case err != nil:
				r.log.Warn("the checkpoint to resume from is unreadable here; resuming from the checkpoint directory", "path", path, "error", err)
			case cp == nil || named.Step > cp.Step:
				cp = &named
			}
		}
		if cp != nil {
			r.res.ResumedFrom, r.res.Steps, r.res.Loss = cp.Step, cp.Step, cp.Loss
		}
	}
	fmt.Fprintf(o.Stdout, "workload start job=%s attempt=%s CUDA_VISIBLE_DEVICES=%s rank=%s world_size=%s resume_step=%d steps=%d\n",
		dash(o.Env("PRESCIENT_JOB_ID")), dash(o.Env("PRESCIENT_ATTEMPT")), dash(o.Env("CUDA_VISIBLE_DEVICES")),
		dash(o.Env("PRESCIENT_RANK")), dash(o.Env("PRESCIENT_WORLD_SIZE")), r.res.ResumedFrom, o.Steps)

	// 2. Step until done, answering signals between (and during) steps.
	err := r.loop(ctx)
	r.res.DurationS = time.Since(start).Seconds()
	return r.res, err
}

type run struct {
	o   Options
	log *slog.Logger
	res Result
}

func (r *run) loop(ctx context.Context) error {
	timer := time.NewTimer(r.o.StepTime)
	defer timer.Stop()
	for r.res.Steps < r.o.Steps {
		timer.Reset(r.o.StepTime)
		if stop, err := r.waitStep(ctx, timer); stop || err != nil {
			return err
		}
		r.res.Steps++
		r.res.Loss = lossAt(r.res.Steps)
		fmt.Fprintf(r.o.Stdout, "step %d/%d loss=%.4f\n", r.res.Steps, r.o.Steps, r.res.Loss)
		if r.o.FailAt > 0 && r.res.Steps == r.o.FailAt {
			fmt.Fprintf(r.o.Stdout, "failing at step %d (--fail-at)\n", r.res.Steps)
			return fmt.Errorf("step %d: %w", r.res.Steps, ErrFailAt)
		}
		if r.o.CheckpointEvery > 0 && r.res.Steps%r.o.CheckpointEvery == 0 && r.res.Steps < r.o.Steps {
			if err := r.checkpoint("interval"); err != nil {
				return err
			}
		}
	}
	fmt.Fprintf(r.o.Stdout, "done: %d steps, loss=%.4f\n", r.res.Steps, r.res.Loss)
	return nil
}

// waitStep waits out one step, answering the signals that arrive meanwhile;
// stop says the run ends.
func (r *run) waitStep(ctx context.Context, timer *time.Timer) (stop bool, err error) {
	for {
		select {
		case <-ctx.Done():
			return true, ctx.Err()
		case sig := <-r.o.Signals:
			if stop, err := r.onSignal(sig); stop || err != nil {
				return true, err
			}
		case <-timer.C:
			return false, nil
		}
	}
}

// onSignal answers one signal; stop says the run ends.
func (r *run) onSignal(sig os.Signal) (stop bool, err error) {
	switch {
	case sig == syscall.SIGTERM && r.o.IgnoreSIGTERM:
		fmt.Fprintln(r.o.Stdout, "SIGTERM received: ignored (--ignore-sigterm)")
		return false, nil
	case sig == syscall.SIGTERM:
		fmt.Fprintf(r.o.Stdout, "SIGTERM received at step %d: checkpointing and stopping\n", r.res.Steps)
		if err := r.checkpoint("stop"); err != nil {
			return true, err
		}
		r.res.Stopped = true
		return true, nil
	case sig == r.o.CheckpointSignal:
		fmt.Fprintf(r.o.Stdout, "%s received at step %d: checkpointing\n", sig, r.res.Steps)
		return false, r.checkpoint("request")
	}
	return false, nil
}

// checkpoint writes the state and then the acknowledgement.
func (r *run) checkpoint(why string) error {
	if r.o.CheckpointDir == "" {
		fmt.Fprintf(r.o.Stdout, "checkpoint (%s) skipped: no checkpoint directory\n", why)
		return nil
	}
	cp := Checkpoint{Step: r.res.Steps, Loss: r.res.Loss, Time: time.Now().UTC()}
	path, err := Write(r.o.CheckpointDir, cp)
	if err != nil {
		return err
	}
	r.res.Checkpoints++
	r.res.LastCheckpoint = path
	fmt.Fprintf(r.o.Stdout, "checkpoint step=%d path=%s (%s)\n", cp.Step, path, why)
	if r.o.AckPath != "" {
		if err := writeAck(r.o.AckPath, cp.Step, path); err != nil {
			return err
		}
	}
	return nil
}

// writeAck writes the acknowledgement file of the agent protocol (its
// format is agent.Ack's) atomically, so that the agent never reads half of
// it.
func writeAck(path string, step int, checkpoint string) error {
	return fsutil.WriteAtomic(path, 0o644, func(w io.Writer) error {
		return json.NewEncoder(w).Encode(struct {
			Step int    `json:"step"`
			Path string `json:"path"`
		}{step, checkpoint})
	})
}

// lossAt is the made-up training loss after step steps: a deterministic
// decay, so a resumed run continues the same curve.
func lossAt(step int) float64 { return 2.5*math.Exp(-float64(step)/200) + 0.1 }

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
