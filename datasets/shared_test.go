package datasets

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"testing"

	"github.com/prescient-sched/prescient/internal/testenv"
)

// sharedDataset returns the path of a real dataset file under the shared
// datasets folder; a missing file fails the test (see testenv.Dataset).
func sharedDataset(t testing.TB, parts ...string) string {
	t.Helper()
	return testenv.Dataset(t, parts...)
}

// readTestdata returns the content of a file under testdata.
func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatalf("testdata: %v", err)
	}
	return data
}

// gzipToTemp writes data gzip-compressed to a file in a fresh temporary
// directory, under a name without a .gz suffix (detection is by content),
// and returns its path.
func gzipToTemp(t testing.TB, data []byte, name string) string {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// writeTemp writes data to a file in a fresh temporary directory.
func writeTemp(t testing.TB, data []byte, name string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
