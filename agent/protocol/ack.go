package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/prescient-sched/prescient/internal/fsutil"
)

// Ack is the content of the checkpoint acknowledgement file that a job
// writes to PRESCIENT_CHECKPOINT_ACK after its checkpoint landed: the step
// and the checkpoint's path. Either as JSON, {"step": 120, "path":
// "/ckpt/120"}, or as one line "STEP PATH" (easy from a shell script).
type Ack struct {
	Step int64  `json:"step"`
	Path string `json:"path"`
}

// maxAckBytes bounds the acknowledgement file the agent reads.
const maxAckBytes = 64 << 10

// ParseAck reads an acknowledgement file's content.
func ParseAck(b []byte) (Ack, error) {
	if len(b) > maxAckBytes {
		return Ack{}, fmt.Errorf("ack: %d bytes, at most %d", len(b), maxAckBytes)
	}
	if !utf8.Valid(b) {
		return Ack{}, errors.New("ack: not UTF-8 text")
	}
	t := bytes.TrimSpace(b)
	if len(t) == 0 {
		return Ack{}, errors.New("ack: empty; want {\"step\": N, \"path\": \"...\"} or \"STEP PATH\"")
	}
	var a Ack
	if t[0] == '{' {
		if err := DecodeStrict(bytes.NewReader(t), &a); err != nil {
			return Ack{}, fmt.Errorf("ack: %w", err)
		}
	} else {
		step, path, ok := strings.Cut(string(t), " ")
		if !ok || strings.ContainsAny(path, "\n\r") {
			return Ack{}, fmt.Errorf("ack: %q: want one line \"STEP PATH\"", Truncate(string(t), 80))
		}
		n, err := strconv.ParseInt(step, 10, 64)
		if err != nil {
			return Ack{}, fmt.Errorf("ack: step %q: want an integer", Truncate(step, 40))
		}
		a = Ack{Step: n, Path: strings.TrimSpace(path)}
	}
	switch {
	case a.Step < 0:
		return Ack{}, fmt.Errorf("ack: step %d is negative", a.Step)
	case a.Path == "":
		return Ack{}, errors.New("ack: path: empty")
	case strings.ContainsRune(a.Path, 0):
		return Ack{}, errors.New("ack: path: holds a NUL byte")
	}
	return a, nil
}

// WriteAck writes the acknowledgement file atomically, so that the agent
// never reads half of it.
func WriteAck(path string, a Ack) error {
	return fsutil.WriteAtomic(path, 0o644, func(w io.Writer) error {
		return json.NewEncoder(w).Encode(a)
	})
}

// ReadAck reads the acknowledgement file; a missing file is (zero, false,
// nil).
func ReadAck(path string) (Ack, bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return Ack{}, false, nil
	}
	if err != nil {
		return Ack{}, false, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxAckBytes+1))
	if err != nil {
		return Ack{}, false, err
	}
	a, err := ParseAck(b)
	if err != nil {
		return Ack{}, false, fmt.Errorf("%s: %w", path, err)
	}
	return a, true, nil
}

// checkpointSignals are the signals a job may choose for checkpoint
// requests: those whose default action a job is expected to override.
var checkpointSignals = map[string]syscall.Signal{
	"SIGUSR1":  syscall.SIGUSR1,
	"SIGUSR2":  syscall.SIGUSR2,
	"SIGHUP":   syscall.SIGHUP,
	"SIGINT":   syscall.SIGINT,
	"SIGQUIT":  syscall.SIGQUIT,
	"SIGWINCH": syscall.SIGWINCH,
}

// ParseSignal reads a checkpoint signal's name ("SIGUSR2" or "USR2"); ""
// is SIGUSR1.
func ParseSignal(name string) (syscall.Signal, error) {
	if name == "" {
		return syscall.SIGUSR1, nil
	}
	n := strings.ToUpper(name)
	if !strings.HasPrefix(n, "SIG") {
		n = "SIG" + n
	}
	if s, ok := checkpointSignals[n]; ok {
		return s, nil
	}
	return 0, fmt.Errorf("%q is not one of SIGUSR1, SIGUSR2, SIGHUP, SIGINT, SIGQUIT, SIGWINCH", Truncate(name, 40))
}

func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
