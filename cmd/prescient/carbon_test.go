package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A forecast rewritten by a timer is seen at the next read; a rewrite
// that breaks it is an error, not the old series.
func TestCarbonFileIsReadAgainWhenItChanges(t *testing.T) {
	path := filepath.Join(t.TempDir(), "carbon.csv")
	write := func(text string) {
		t.Helper()
		if err := os.WriteFile(path, []byte("time,gco2_per_kwh\n"+text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	at := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	f := &carbonFile{path: path}
	for _, c := range []struct {
		text string
		want float64
	}{
		{"2026-12-07 10:00:00,400\n", 400},
		{"2026-12-07 10:00:00,400\n2026-12-07 11:00:00,150\n", 150},
	} {
		write(c.text)
		s, err := f.Read(context.Background())
		if err != nil || s.At(at) != c.want {
			t.Fatalf("%q: %v, %v; want %v", c.text, s, err, c.want)
		}
	}
	write("2026-12-07 10:00:00,lots\n")
	if s, err := f.Read(context.Background()); err == nil {
		t.Fatalf("a broken file read as %v", s)
	}
}
