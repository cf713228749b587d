package workload

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prescient-sched/prescient/internal/fsutil"
)

// Checkpoint is the workload's saved state.
type Checkpoint struct {
	Step int       `json:"step"`
	Loss float64   `json:"loss"`
	Time time.Time `json:"time"`
	// Path is where it was read from (not stored).
	Path string `json:"-"`
}

// keepCheckpoints is how many checkpoints Write leaves in the directory.
const keepCheckpoints = 3

const (
	checkpointPrefix = "ckpt-"
	checkpointSuffix = ".json"
)

// checkpointName is the file of the checkpoint at step; the zero-padded
// step makes names sort by step.
func checkpointName(step int) string {
	return fmt.Sprintf("%s%012d%s", checkpointPrefix, step, checkpointSuffix)
}

// Write stores cp atomically in dir (temporary file, fsync, rename, fsync
// of the directory) and removes all but the newest keepCheckpoints. It
// returns the checkpoint's path.
func Write(dir string, cp Checkpoint) (string, error) {
	path := filepath.Join(dir, checkpointName(cp.Step))
	err := fsutil.WriteAtomic(path, 0o644, func(w io.Writer) error {
		return json.NewEncoder(w).Encode(cp)
	})
	if err != nil {
		return "", fmt.Errorf("checkpoint: %w", err)
	}
	steps, err := checkpointSteps(dir)
	if err != nil {
		return path, nil // the checkpoint landed; pruning waits for the next one
	}
	for _, s := range steps[:max(0, len(steps)-keepCheckpoints)] {
		os.Remove(filepath.Join(dir, checkpointName(s)))
	}
	return path, nil
}

// InvalidCheckpoint is a checkpoint file Latest skipped, and why.
type InvalidCheckpoint struct {
	Path string
	Err  error
}

// Latest returns the newest valid checkpoint in dir (nil when there is
// none) and the newer ones it skipped as invalid. A checkpoint is valid when
// it parses, its step matches its name and its loss is a finite number.
func Latest(dir string) (*Checkpoint, []InvalidCheckpoint, error) {
	steps, err := checkpointSteps(dir)
	if err != nil {
		return nil, nil, err
	}
	var skipped []InvalidCheckpoint
	for _, step := range slices.Backward(steps) {
		path := filepath.Join(dir, checkpointName(step))
		cp, err := Read(path)
		if err != nil {
			skipped = append(skipped, InvalidCheckpoint{Path: path, Err: err})
			continue
		}
		if cp.Step != step {
			skipped = append(skipped, InvalidCheckpoint{Path: path, Err: fmt.Errorf("step %d does not match the file name's %d", cp.Step, step)})
			continue
		}
		return &cp, skipped, nil
	}
	return nil, skipped, nil
}

// Read reads one checkpoint file.
func Read(path string) (Checkpoint, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint: %w", err)
	}
	cp, err := ParseCheckpoint(b)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	cp.Path = path
	return cp, nil
}

// ParseCheckpoint decodes a checkpoint file's content.
func ParseCheckpoint(b []byte) (Checkpoint, error) {
	var cp Checkpoint
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cp); err != nil {
		return Checkpoint{}, fmt.Errorf("decode: %w", err)
	}
	if dec.More() {
		return Checkpoint{}, errors.New("decode: trailing data after the object")
	}
	switch {
	case cp.Step < 0:
		return Checkpoint{}, fmt.Errorf("step: %d is negative", cp.Step)
	case math.IsNaN(cp.Loss) || math.IsInf(cp.Loss, 0):
		return Checkpoint{}, fmt.Errorf("loss: %g is not finite", cp.Loss)
	}
	return cp, nil
}

// checkpointSteps lists the steps of dir's checkpoint files, ascending.
func checkpointSteps(dir string) ([]int, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint dir: %w", err)
	}
	var steps []int
	for _, e := range entries {
		name := e.Name()
		digits, ok := strings.CutPrefix(name, checkpointPrefix)
		if !ok || !e.Type().IsRegular() {
			continue
		}
		digits, ok = strings.CutSuffix(digits, checkpointSuffix)
		if !ok {
			continue
		}
		step, err := strconv.Atoi(digits)
		if err != nil || step < 0 || checkpointName(step) != name {
			continue
		}
		steps = append(steps, step)
	}
	slices.Sort(steps)
	return steps, nil
}
