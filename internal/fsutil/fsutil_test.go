package fsutil_test

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/prescient-sched/prescient/internal/fsutil"
)

func TestWriteAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "CURRENT")
	write := func(s string) func(io.Writer) error {
		return func(w io.Writer) error { _, err := io.WriteString(w, s); return err }
	}
	if err := fsutil.WriteAtomic(path, 0o644, write("v1")); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("disk full")
	err := fsutil.WriteAtomic(path, 0o644, func(w io.Writer) error { _, _ = io.WriteString(w, "v2-half"); return boom })
	if !errors.Is(err, boom) {
		t.Fatalf("failed write: %v, want the writer's error", err)
	}
	got, _ := os.ReadFile(path)
	entries, _ := os.ReadDir(dir)
	if string(got) != "v1" || len(entries) != 1 {
		t.Fatalf("after a failed write the file is %q and the directory holds %d entries; want v1 and 1", got, len(entries))
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o644 {
		t.Fatalf("mode %v, want 0644", fi.Mode().Perm())
	}
}
