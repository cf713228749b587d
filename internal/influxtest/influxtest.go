// Package influxtest gives tests a real InfluxDB 1.8 server: the one `make
// test` started (its address in PRESCIENT_TEST_INFLUX_URL), or one of the
// test's own, started and stopped through scripts/influxdb.sh, for tests that
// must stop a server or need other settings.
package influxtest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prescient-sched/prescient/internal/testenv"
)

// Env names the variables `make test` (scripts/with-influxdb.sh) exports.
const (
	EnvURL     = "PRESCIENT_TEST_INFLUX_URL"
	EnvInfluxd = "PRESCIENT_TEST_INFLUXD"
)

// Server is a running InfluxDB.
type Server struct {
	URL string

	dir    string // set when this package started it
	script string
	opts   Options
}

// Options choose how an own server is started.
type Options struct {
	// Auth starts the server with authentication on and no users, so that
	// every statement but CREATE USER is refused, as on a locked-down server.
	Auth bool
}

// Shared returns the server `make test` started, or starts one for this test
// when the tests run without it (plain `go test`).
func Shared(t testing.TB) *Server {
	t.Helper()
	if url := os.Getenv(EnvURL); url != "" {
		return &Server{URL: url}
	}
	t.Logf("%s is not set (tests run outside `make test`): starting an InfluxDB of this test's own", EnvURL)
	return Start(t, Options{})
}

// Start starts a server of the test's own in a temporary directory and stops
// it when the test ends. It needs influxd: PRESCIENT_TEST_INFLUXD, influxd on
// PATH, or `go install` (which scripts/influxdb.sh runs when it is missing).
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	script := findScript(t)
	s := &Server{dir: t.TempDir(), script: script, opts: opts}
	s.start(t)
	t.Cleanup(s.Stop)
	return s
}

func (s *Server) start(t testing.TB) {
	t.Helper()
	cmd := exec.Command(s.script, "start", s.dir)
	cmd.Env = os.Environ()
	if bin := os.Getenv(EnvInfluxd); bin != "" {
		cmd.Env = append(cmd.Env, "INFLUXD="+bin)
	}
	if s.opts.Auth {
		cmd.Env = append(cmd.Env, "INFLUXDB_AUTH=true")
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("influxtest: start InfluxDB with %s: %v\n%s", s.script, err, stderr.String())
	}
	s.URL = strings.TrimSpace(string(out))
}

// Restart starts a server this package started, and stopped, again on its
// data: what was written survives. The server gets new ports, so URL
// changes. It fails the test for the shared server.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	if s.dir == "" {
		t.Fatalf("influxtest: Restart of the shared server")
	}
	s.start(t)
}

// Stop stops a server this package started; it is a no-op for the shared one.
// Calling it twice is harmless.
func (s *Server) Stop() {
	if s.dir == "" {
		return
	}
	_ = exec.Command(s.script, "stop", s.dir).Run()
}

// findScript returns scripts/influxdb.sh of this repository.
func findScript(t testing.TB) string {
	t.Helper()
	return filepath.Join(testenv.RepoRoot(t), "scripts", "influxdb.sh")
}
