// Package testenv finds what tests need outside their package: the
// repository's root and the real traces in shared/datasets beside it.
package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

// EnvDatasets overrides where the shared datasets are (default: the folder
// shared/datasets next to the repository).
const EnvDatasets = "PRESCIENT_DATASETS"

// RepoRoot returns the repository's root: the nearest directory above the
// working directory that holds go.mod.
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatalf("testenv: no go.mod above the test's directory")
		}
		dir = parent
	}
}

// Dataset returns the path of a real dataset file, e.g.
// Dataset(t, "philly", "philly_jobs.csv"). A missing file fails the test with
// a message saying where it was looked for: these tests exist to run against
// the real data, and a skip would hide that they did not.
func Dataset(t testing.TB, parts ...string) string {
	t.Helper()
	dir := os.Getenv(EnvDatasets)
	if dir == "" {
		dir = filepath.Join(filepath.Dir(RepoRoot(t)), "shared", "datasets")
	}
	p := filepath.Join(append([]string{dir}, parts...)...)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("real dataset %s is missing: the tests need the shared datasets (../shared/datasets beside the repository, or %s): %v", p, EnvDatasets, err)
	}
	return p
}
