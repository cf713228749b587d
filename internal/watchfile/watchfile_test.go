package watchfile

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// parseNumbers reads one number per line, naming the file and the line
// of a bad one.
func parseNumbers(data []byte, path string) ([]int, error) {
	var out []int
	for i, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		n, err := strconv.Atoi(line)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %q is not a number", path, i+1, line)
		}
		out = append(out, n)
	}
	return out, nil
}

func write(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

// A change applies on the period and on a signal; a bad file leaves the
// last good content in force with its error in the status; an unchanged
// file applies nothing.
func TestWatchAppliesChangesAndKeepsTheLastGood(t *testing.T) {
	path := filepath.Join(t.TempDir(), "numbers")
	write(t, path, "1\n2\n")
	if _, err := Open(filepath.Join(t.TempDir(), "none"), "numbers file", parseNumbers, nil); err == nil || !strings.Contains(err.Error(), "numbers file") {
		t.Errorf("a missing file: %v, want an error naming the numbers file", err)
	}
	write(t, path+".bad", "1\nx\n")
	if _, err := Open(path+".bad", "numbers file", parseNumbers, nil); err == nil || !strings.Contains(err.Error(), path+".bad:2") {
		t.Errorf("a bad file: %v, want its line", err)
	}
	f, err := Open(path, "numbers file", parseNumbers, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Current(); len(got) != 2 || got[1] != 2 {
		t.Fatalf("read %v", got)
	}
	first := f.Status()
	applied := make(chan []int, 4)
	hup := make(chan os.Signal, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.Watch(ctx, time.Hour, hup, func(v []int) { applied <- v }) }()
	defer func() { cancel(); <-done }()

	// The signal reads it at once, though the period is an hour.
	write(t, path, "3\n")
	hup <- os.Interrupt
	select {
	case v := <-applied:
		if len(v) != 1 || v[0] != 3 {
			t.Errorf("applied %v", v)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the reload on the signal applied nothing")
	}
	if st := f.Status(); st.SHA256 == first.SHA256 || st.LastError != "" || st.Path != path {
		t.Errorf("status after the change: %+v (before: %+v)", st, first)
	}

	// A bad edit: refused with its line, the last good stays, and the
	// status says so.
	write(t, path, "3\nfour\n")
	if changed, err := f.Reload(); err == nil || changed || !strings.Contains(err.Error(), path+":2") {
		t.Errorf("a bad edit: changed %v, %v", changed, err)
	}
	if v := f.Current(); len(v) != 1 || v[0] != 3 {
		t.Errorf("after a bad edit %v is in force, want the last good", v)
	}
	if st := f.Status(); !strings.Contains(st.LastError, path+":2") || st.ErrorAt.IsZero() {
		t.Errorf("status after a bad edit: %+v", st)
	}

	// Mended again, the same content as in force: nothing to apply, and
	// the error clears.
	write(t, path, "3\n")
	if changed, err := f.Reload(); err != nil || changed {
		t.Errorf("the content in force, read again: changed %v, %v", changed, err)
	}
	if st := f.Status(); st.LastError != "" {
		t.Errorf("status once mended: %+v", st)
	}
	select {
	case v := <-applied:
		t.Errorf("applied %v with nothing changed", v)
	default:
	}
}

// The period alone reads a changed file again.
func TestWatchReadsAgainOnItsPeriod(t *testing.T) {
	path := filepath.Join(t.TempDir(), "numbers")
	write(t, path, "1\n")
	f, err := Open(path, "numbers file", parseNumbers, nil)
	if err != nil {
		t.Fatal(err)
	}
	applied := make(chan []int, 4)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.Watch(ctx, 20*time.Millisecond, nil, func(v []int) { applied <- v }) }()
	defer func() { cancel(); <-done }()
	write(t, path, "7\n")
	select {
	case v := <-applied:
		if len(v) != 1 || v[0] != 7 {
			t.Errorf("applied %v", v)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the period applied nothing")
	}
}
