package collector_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/collector"
	"github.com/prescient-sched/prescient/collector/nvml"
	"github.com/prescient-sched/prescient/internal/influxtest"
)

// Settings of the helper process TestCollectorHelperProcess runs as.
const (
	envHelper    = "PRESCIENT_COLLECTOR_HELPER"
	envHelperURL = "PRESCIENT_COLLECTOR_HELPER_URL"
	envHelperBkt = "PRESCIENT_COLLECTOR_HELPER_BUCKET"
	envHelperDir = "PRESCIENT_COLLECTOR_HELPER_DIR"
)

// TestCollectorHelperProcess is not a test: it is the collector that
// TestSIGTERMLosesNothing starts and stops. It samples a simulated host
// into InfluxDB with a spool until SIGTERM, then writes how many samples
// it took to DIR/taken-PID.
func TestCollectorHelperProcess(t *testing.T) {
	if os.Getenv(envHelper) != "1" {
		t.Skip("helper process of TestSIGTERMLosesNothing")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	dir := os.Getenv(envHelperDir)
	sink, err := collector.NewInfluxSink(collector.InfluxOptions{URL: os.Getenv(envHelperURL), Bucket: os.Getenv(envHelperBkt), Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	spool, err := collector.OpenSpool(filepath.Join(dir, "spool"), 64<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	sim, err := nvml.NewSim(nvml.SimOptions{Seed: 31})
	if err != nil {
		t.Fatal(err)
	}
	m := collector.NewMetrics(nil)
	c, err := collector.New(collector.Config{Hosts: []collector.HostSource{{Node: "node-1", Host: sim}}, Interval: 50 * time.Millisecond, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	// Batches bigger than a run: everything is in memory at SIGTERM.
	w := collector.NewWriter(sink, spool, collector.WriterOptions{BatchSize: 100000, FlushInterval: time.Hour, RetryFor: 200 * time.Millisecond}, m, nil)
	if err := os.WriteFile(filepath.Join(dir, "ready"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := c.Run(ctx, w, 0); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	taken := int(metricValue(m.Samples))
	if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("taken-%d", os.Getpid())), []byte(strconv.Itoa(taken)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// runHelper starts the helper collector, lets it sample for a while, stops
// it with SIGTERM and returns how many samples it took.
func runHelper(t *testing.T, dir, influxURL, bucket string, runFor time.Duration) int {
	t.Helper()
	os.Remove(filepath.Join(dir, "ready"))
	cmd := exec.Command(os.Args[0], "-test.run=^TestCollectorHelperProcess$", "-test.v")
	cmd.Env = append(os.Environ(), envHelper+"=1", envHelperURL+"="+influxURL, envHelperBkt+"="+bucket, envHelperDir+"="+dir)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the helper is ready", func() bool { _, err := os.Stat(filepath.Join(dir, "ready")); return err == nil })
	time.Sleep(runFor)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("helper: %v\n%s", err, out.String())
	}
	b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("taken-%d", cmd.Process.Pid)))
	if err != nil {
		t.Fatalf("helper left no count: %v\n%s", err, out.String())
	}
	n, _ := strconv.Atoi(string(b))
	return n
}

// The collector stopped with SIGTERM, once while InfluxDB is unreachable
// (what it holds goes to the spool) and once while it is there (what it
// holds is written), and restarted in between: every sample arrives.
func TestSIGTERMLosesNothing(t *testing.T) {
	srv := influxtest.Shared(t)
	dir := t.TempDir()
	bucket := newBucket("sigterm")
	unreachable := "http://127.0.0.1:1" // nothing listens on port 1

	first := runHelper(t, dir, unreachable, bucket, time.Second)
	spooled, _ := filepath.Glob(filepath.Join(dir, "spool", "*.seg"))
	second := runHelper(t, dir, srv.URL, bucket, time.Second)
	got := countPoints(t, srv.URL, bucket)
	t.Logf("run 1 (InfluxDB unreachable) took %d samples, run 2 took %d; InfluxDB holds %d distinct points; %d spool segments after run 1",
		first, second, got, len(spooled))
	if first == 0 || second == 0 || got != first+second {
		t.Fatalf("InfluxDB holds %d points; the two runs took %d + %d", got, first, second)
	}
}
