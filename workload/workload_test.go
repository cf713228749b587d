package workload

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/agent"
	"github.com/prescient-sched/prescient/agent/protocol"
)

// syncBuffer is a bytes.Buffer safe for a writer and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func env(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }

func TestRunPrintsGPUsAndFinishes(t *testing.T) {
	var out syncBuffer
	res, err := Run(context.Background(), Options{Steps: 3, StepTime: time.Millisecond, Stdout: &out,
		Env: env(map[string]string{"CUDA_VISIBLE_DEVICES": "2,3", "PRESCIENT_JOB_ID": "j1"})})
	if err != nil {
		t.Fatal(err)
	}
	if res.Steps != 3 || res.Stopped || ExitCode(res, err) != ExitDone {
		t.Errorf("result %+v, exit %d: want 3 steps, done", res, ExitCode(res, err))
	}
	for _, want := range []string{"CUDA_VISIBLE_DEVICES=2,3", "job=j1", "step 3/3", "done: 3 steps"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestCheckpointSignalWritesCheckpointThenAck(t *testing.T) {
	dir := t.TempDir()
	ack := filepath.Join(dir, "ack")
	sigs := make(chan os.Signal, 1)
	var out syncBuffer
	done := make(chan error, 1)
	go func() {
		_, err := Run(context.Background(), Options{Steps: 1000, StepTime: 5 * time.Millisecond, CheckpointDir: filepath.Join(dir, "ckpt"),
			AckPath: ack, Signals: sigs, Stdout: &out})
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	sigs <- syscall.SIGUSR1
	deadline := time.Now().Add(5 * time.Second)
	var a protocol.Ack
	for time.Now().Before(deadline) {
		b, err := os.ReadFile(ack)
		if err == nil {
			if a, err = protocol.ParseAck(b); err != nil {
				t.Fatalf("ack %q: %v", b, err)
			}
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if a.Path == "" {
		t.Fatalf("no ack after SIGUSR1; output:\n%s", out.String())
	}
	cp, err := Read(a.Path)
	if err != nil {
		t.Fatalf("the ack names %s: %v", a.Path, err)
	}
	if int64(cp.Step) != a.Step || cp.Step == 0 {
		t.Errorf("checkpoint step %d, ack step %d: want the same, after some steps", cp.Step, a.Step)
	}
	sigs <- syscall.SIGTERM
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestSIGTERMCheckpointsAndStopsThenResumes(t *testing.T) {
	dir := t.TempDir()
	sigs := make(chan os.Signal, 1)
	type result struct {
		res Result
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := Run(context.Background(), Options{Steps: 1000, StepTime: 2 * time.Millisecond, CheckpointDir: dir, Signals: sigs})
		done <- result{r, err}
	}()
	time.Sleep(60 * time.Millisecond)
	sigs <- syscall.SIGTERM
	r := <-done
	if r.err != nil || !r.res.Stopped || ExitCode(r.res, r.err) != ExitStopped || r.res.Checkpoints != 1 {
		t.Fatalf("after SIGTERM: %+v, %v (exit %d): want stopped with one checkpoint, exit %d", r.res, r.err, ExitCode(r.res, r.err), ExitStopped)
	}
	again, err := Run(context.Background(), Options{Steps: r.res.Steps + 2, StepTime: time.Millisecond, CheckpointDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if again.ResumedFrom != r.res.Steps || again.Steps != r.res.Steps+2 {
		t.Errorf("resumed from %d to %d steps: want from %d to %d", again.ResumedFrom, again.Steps, r.res.Steps, r.res.Steps+2)
	}
	if want := lossAt(again.Steps); again.Loss != want {
		t.Errorf("loss %g after the resume, want %g (the same curve)", again.Loss, want)
	}
}

func TestResumesFromTheNamedCheckpointWhenItIsNewer(t *testing.T) {
	// An earlier attempt ran on another node: its checkpoints are in
	// another directory, which PRESCIENT_RESUME_PATH names.
	other, here := t.TempDir(), t.TempDir()
	if _, err := Write(here, Checkpoint{Step: 2, Loss: lossAt(2)}); err != nil {
		t.Fatal(err)
	}
	named, err := Write(other, Checkpoint{Step: 7, Loss: lossAt(7)})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		path string
		want int
	}{
		{"a newer named checkpoint wins", named, 7},
		{"an unreadable named checkpoint falls back to the directory", filepath.Join(other, "missing.json"), 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Run(context.Background(), Options{Steps: 8, CheckpointDir: here, Env: env(map[string]string{EnvResumePath: tc.path})})
			if err != nil || res.ResumedFrom != tc.want || res.Steps != 8 {
				t.Errorf("result %+v, %v: want resumed from step %d and 8 steps", res, err, tc.want)
			}
		})
	}
	if EnvResumePath != agent.EnvResumePath {
		t.Errorf("EnvResumePath %q is not the agent's %q", EnvResumePath, agent.EnvResumePath)
	}
}

func TestIgnoreSIGTERMKeepsRunning(t *testing.T) {
	sigs := make(chan os.Signal, 1)
	sigs <- syscall.SIGTERM
	res, err := Run(context.Background(), Options{Steps: 5, StepTime: 2 * time.Millisecond, IgnoreSIGTERM: true, Signals: sigs})
	if err != nil || res.Stopped || res.Steps != 5 {
		t.Errorf("%+v, %v: want all 5 steps despite SIGTERM", res, err)
	}
}

func TestFailAt(t *testing.T) {
	res, err := Run(context.Background(), Options{Steps: 10, FailAt: 4})
	if !errors.Is(err, ErrFailAt) || res.Steps != 4 || ExitCode(res, err) != ExitFailed {
		t.Errorf("%+v, %v: want ErrFailAt at step 4, exit %d", res, err, ExitFailed)
	}
}

func TestLatestSkipsInvalidCheckpoints(t *testing.T) {
	dir := t.TempDir()
	for _, step := range []int{10, 20, 30, 40} {
		if _, err := Write(dir, Checkpoint{Step: step, Loss: lossAt(step), Time: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	if steps, _ := checkpointSteps(dir); len(steps) != keepCheckpoints || steps[0] != 20 {
		t.Errorf("checkpoints kept: %v, want the newest %d", steps, keepCheckpoints)
	}
	// A torn newest checkpoint and one whose content disagrees with its name.
	os.WriteFile(filepath.Join(dir, checkpointName(50)), []byte(`{"step": 5`), 0o644)
	os.WriteFile(filepath.Join(dir, checkpointName(45)), []byte(`{"step": 44, "loss": 1}`), 0o644)
	os.WriteFile(filepath.Join(dir, "ckpt-junk.json"), []byte(`{}`), 0o644)
	cp, skipped, err := Latest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if cp == nil || cp.Step != 40 {
		t.Fatalf("latest: %+v, want step 40", cp)
	}
	if len(skipped) != 2 {
		t.Errorf("skipped %v, want the two invalid ones", skipped)
	}
}

func TestValidateNamesTheFlag(t *testing.T) {
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{Steps: 0}, "--steps"},
		{Options{Steps: 1, StepTime: -1}, "--step-time"},
		{Options{Steps: 1, CheckpointEvery: -1}, "--checkpoint-every"},
		{Options{Steps: 1, FailAt: -2}, "--fail-at"},
		{Options{Steps: 1, AckPath: "x"}, "--checkpoint-ack"},
	} {
		if err := tc.o.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(%+v) = %v, want an error naming %s", tc.o, err, tc.want)
		}
	}
}

func FuzzParseCheckpoint(f *testing.F) {
	f.Add([]byte(`{"step": 3, "loss": 1.5, "time": "2026-01-01T00:00:00Z"}`))
	f.Add([]byte(`{"step": -1}`))
	f.Add([]byte(`{"step": 1}{}`))
	f.Add([]byte(`{"loss": 1e400}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		cp, err := ParseCheckpoint(b)
		if err == nil && cp.Step < 0 {
			t.Errorf("accepted a negative step: %+v", cp)
		}
	})
}
