package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	deploy "github.com/prescient-sched/prescient/deploy/kubernetes"
)

// promMetrics are the series the Prometheus dashboard and a user's alerts
// rely on: each must have been scraped from serve after a short demo run.
var promMetrics = []string{
	"prescient_jobs", "prescient_fleet_gpus", "prescient_fleet_gpus_busy", "prescient_fleet_nodes", "prescient_mode",
	"prescient_job_wait_seconds_bucket", "prescient_job_events_total", "prescient_job_failures_total",
	"prescient_forecast_abs_log_error_bucket", "prescient_forecast_p90_covered_total",
	"prescient_api_requests_total", "prescient_api_request_duration_seconds_bucket",
	"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_POWER_USAGE",
}

// TestPrometheusScrapesTheDemo runs the demo (serve --demo, its agents
// running real workloads on simulated GPUs) and Debian's Prometheus
// scraping it each second, then checks that every metric above has a
// series and that every panel query of the Prometheus dashboard
// (deploy/kubernetes/grafana/prescient-prometheus.json) returns a number.
func TestPrometheusScrapesTheDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the demo and Prometheus for about two minutes")
	}
	promBin := prometheusBinary(t)
	bin := e2eBin(t)
	dir := t.TempDir()
	serveAddr, promAddr := freeAddr(t), freeAddr(t)

	// 1. The demo, busier and faster than make run's: jobs of 20 s to a
	// minute, so that some succeed (forecast error) within the test.
	serve := exec.Command(bin, "serve", "--demo", "--listen", serveAddr, "--db", filepath.Join(dir, "p.db"),
		"--demo-dir", filepath.Join(dir, "demo"), "--demo-jobs-per-minute", "30", "--demo-time-scale", "3600",
		"--demo-token", "prometheus-test-token-0123456789", "--log-level", "warn")
	serveLog, err := os.Create(filepath.Join(dir, "serve.log"))
	if err != nil {
		t.Fatal(err)
	}
	serve.Stdout, serve.Stderr = serveLog, serveLog
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopProcess(t, serve, "serve --demo", 30*time.Second) })

	// 2. Prometheus, scraping serve's /metrics each second.
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"+
		"scrape_configs:\n  - job_name: prescient\n    static_configs:\n      - targets: [%q]\n", serveAddr)), 0o644); err != nil {
		t.Fatal(err)
	}
	prom := exec.Command(promBin, "--config.file", cfg, "--storage.tsdb.path", filepath.Join(dir, "tsdb"),
		"--web.listen-address", promAddr, "--log.level", "warn")
	promLog, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	prom.Stdout, prom.Stderr = promLog, promLog
	if err := prom.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopProcess(t, prom, "prometheus", 10*time.Second) })
	defer func() {
		if t.Failed() {
			for _, f := range []string{"serve.log", "prometheus.log"} {
				b, _ := os.ReadFile(filepath.Join(dir, f))
				t.Logf("%s (end):\n%s", f, e2eTailText(string(b), 30))
			}
		}
	}()

	// 3. Every metric has a series, and jobs succeeded meanwhile.
	q := promQuerier{base: "http://" + promAddr}
	deadline := time.Now().Add(4 * time.Minute)
	for {
		var missing []string
		for _, m := range promMetrics {
			if n, err := q.value(fmt.Sprintf("count(%s)", m)); err != nil || n == 0 {
				missing = append(missing, m)
			}
		}
		done, _ := q.value(`sum(prescient_forecast_p90_covered_total)`)
		if len(missing) == 0 && done >= 2 {
			t.Logf("every metric scraped; %g jobs succeeded with a forecast", done)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 4 minutes Prometheus has no series of %v (%g jobs succeeded with a forecast)", missing, done)
		}
		time.Sleep(2 * time.Second)
	}

	// The demo's fleet has two node shapes, and Prometheus sees both GPU
	// models under dcgm-exporter's label.
	var models []string
	for _, m := range []string{"A100-SXM4-80GB", "A40"} {
		if n, err := q.value(fmt.Sprintf(`count(DCGM_FI_DEV_GPU_UTIL{modelName=%q})`, m)); err == nil && !math.IsNaN(n) {
			models = append(models, fmt.Sprintf("%s×%g", m, n))
		}
	}
	if len(models) != 2 {
		t.Errorf("GPUs by model in Prometheus: %v; want the demo's A100s and A40s", models)
	}

	// 4. Every panel query of the dashboard returns a number, with the
	// rate window over the whole run: at once, or after a few more scrapes
	// (a rate needs two samples since the first increase).
	data, err := deploy.Files.ReadFile("grafana/prescient-prometheus.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("grafana/prescient-prometheus.json: %v", err)
	}
	if len(dash.Panels) == 0 {
		t.Fatal("grafana/prescient-prometheus.json: no panels")
	}
	for {
		var failed []string
		for _, p := range dash.Panels {
			if len(p.Targets) == 0 {
				t.Errorf("panel %q: no query", p.Title)
			}
			for _, tg := range p.Targets {
				expr := strings.NewReplacer("$__rate_interval", "5m", "$__range", "5m", "$__interval", "15s").Replace(tg.Expr)
				n, err := q.value(expr)
				switch {
				case err != nil:
					failed = append(failed, fmt.Sprintf("panel %q: %s: %v", p.Title, expr, err))
				case math.IsNaN(n):
					failed = append(failed, fmt.Sprintf("panel %q: %s: no number", p.Title, expr))
				}
			}
		}
		if len(failed) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 4 minutes:\n%s", strings.Join(failed, "\n"))
		}
		time.Sleep(2 * time.Second)
	}
}

// prometheusBinary is Debian's prometheus (PRESCIENT_TEST_PROMETHEUS names
// another); the test fails, saying how to get it, when it is missing.
func prometheusBinary(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("PRESCIENT_TEST_PROMETHEUS")
	if bin == "" {
		bin = "/usr/bin/prometheus"
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("Prometheus is needed for this test and %s is missing: run scripts/ensure-prometheus.sh "+
			"(make test does), or set PRESCIENT_TEST_PROMETHEUS to a prometheus binary", bin)
	}
	return bin
}

// freeAddr is a loopback address with a port free a moment ago.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// stopProcess sends SIGTERM and waits up to grace for the process to exit,
// then kills it.
func stopProcess(t *testing.T, c *exec.Cmd, name string, grace time.Duration) {
	_ = c.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = c.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		t.Errorf("%s did not stop within %s of SIGTERM; killed", name, grace)
		_ = c.Process.Kill()
		<-done
	}
}

// promQuerier asks Prometheus's HTTP API.
type promQuerier struct{ base string }

// value is the sum of an instant query's samples; NaN when it has none or
// only NaN, an error when Prometheus refuses the query.
func (q promQuerier) value(expr string) (float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, q.base+"/api/v1/query?"+url.Values{"query": {expr}}.Encode(), nil)
	if err != nil {
		return 0, err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string            `json:"resultType"`
			Result     []json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(res.Body).Decode(&body); err != nil {
		return 0, fmt.Errorf("answer %d: %w", res.StatusCode, err)
	}
	if body.Status != "success" {
		return 0, fmt.Errorf("prometheus: %s", body.Error)
	}
	sum, got := 0.0, false
	for _, r := range body.Data.Result {
		var s struct {
			Value [2]any `json:"value"`
		}
		if err := json.Unmarshal(r, &s); err != nil {
			return 0, err
		}
		str, _ := s.Value[1].(string)
		v, err := strconv.ParseFloat(str, 64)
		if err != nil || math.IsNaN(v) {
			continue
		}
		sum, got = sum+v, true
	}
	if !got {
		return math.NaN(), nil
	}
	return sum, nil
}
