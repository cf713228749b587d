package api_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/api"
	"github.com/prescient-sched/prescient/backend/simbackend"
	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/control"
	"github.com/prescient-sched/prescient/datasets"
	"github.com/prescient-sched/prescient/models"
	"github.com/prescient-sched/prescient/predictor"
	"github.com/prescient-sched/prescient/service"
	"github.com/prescient-sched/prescient/store"
	"github.com/prescient-sched/prescient/training"
)

// The load test's stack is serve's: the demo fleet, the prescient policy,
// serve's default backfill depth, advisor mode.
const (
	loadFleet         = "uniform:4x8:A100-SXM4-80GB"
	loadPolicy        = "prescient"
	loadBackfillDepth = 100
	loadQueued        = 1000
	// loadRunning 8-GPU jobs fill the fleet before the queue is submitted.
	loadRunning = 4
	// loadHistoryJobs is the synthetic history the models learn from: a
	// quarter of the demo's, so that training takes seconds, not a minute,
	// on two cores.
	loadHistoryJobs = 500

	loadAdminToken  = "load-test-admin-token-0001"
	loadViewerToken = "load-test-viewer-token-001"
	// loadTenant is the synthetic generator's busiest tenant.
	loadTenant = "tenant-01"
)

// loadStack is the real control plane (SQLite store, simulated backend,
// learned forecasts) behind the real API on a loopback HTTP server.
type loadStack struct {
	url     string
	client  *http.Client
	running int
	queued  int
}

var (
	loadModelsOnce sync.Once
	loadModels     *predictor.Predictor
	loadModelsErr  error
	loadModelsTook time.Duration
	// loadModelsSelected names each target's selected learner.
	loadModelsSelected []string
)

// loadPredictor trains duration and memory models on synthetic history
// with the demo's learners (once per test binary) and loads them. The
// registry is removed once the models are in memory.
func loadPredictor(b *testing.B) *predictor.Predictor {
	b.Helper()
	loadModelsOnce.Do(func() {
		began := time.Now()
		dir, err := os.MkdirTemp("", "prescient-load-models-")
		if err != nil {
			loadModelsErr = err
			return
		}
		defer os.RemoveAll(dir)
		// The generator's fixed start keeps the models the same from run to
		// run.
		cfg := datasets.DefaultGenerateConfig()
		cfg.Seed, cfg.Jobs = 1, loadHistoryJobs
		jobs, err := datasets.Generate(cfg)
		if err != nil {
			loadModelsErr = fmt.Errorf("synthetic history: %w", err)
			return
		}
		reg := training.Registry{Dir: dir}
		learners := []string{models.ForestName, models.RollingMedianName, models.GlobalMedianName}
		for _, t := range []models.Target{models.TargetDuration, models.TargetMemory} {
			rep, err := training.TrainAndPublish(context.Background(), training.Config{Target: t, Learners: learners, Seed: 1}, jobs, reg)
			if err != nil {
				loadModelsErr = fmt.Errorf("training the %s model: %w", t, err)
				return
			}
			loadModelsSelected = append(loadModelsSelected, fmt.Sprintf("%s:%s", t, rep.Selected))
		}
		loadModels, loadModelsErr = predictor.New(reg, nil)
		loadModelsTook = time.Since(began)
	})
	if loadModelsErr != nil {
		b.Fatal(loadModelsErr)
	}
	b.Logf("models %s (%s) trained on %d synthetic jobs in %s", loadModels.Versions(), strings.Join(loadModelsSelected, ", "),
		loadHistoryJobs, loadModelsTook.Round(time.Millisecond))
	return loadModels
}

// newLoadStack builds the stack and fills it: loadRunning jobs started in
// autopilot, then advisor mode and loadQueued synthetic jobs submitted
// through the Service, which stay queued.
func newLoadStack(b *testing.B) *loadStack {
	b.Helper()
	began := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	log := slog.New(slog.DiscardHandler)
	st, err := store.Open(ctx, filepath.Join(b.TempDir(), "prescient.db"), store.WithLogger(log))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() }) // after the plane stopped (cleanups run last first)
	fleet, err := datasets.ReadFleet(loadFleet)
	if err != nil {
		b.Fatal(err)
	}
	backend, err := simbackend.New(simbackend.Config{Duration: labelledDuration, Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	plane, err := control.New(control.Config{
		Store: st, Nodes: service.StaticFleet{Fleet: fleet}, Backend: backend, Policy: loadPolicy,
		BackfillDepth: loadBackfillDepth, Forecaster: predictor.Adapter{P: loadPredictor(b)},
		Mode: service.ModeAutopilot, Logger: log,
	})
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- plane.Run(ctx) }()
	b.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			b.Errorf("control plane: %v", err)
		}
	})
	select {
	case <-plane.Ready():
	case <-time.After(30 * time.Second):
		b.Fatal("the control plane was not ready after 30s")
	}

	// Fill the fleet with long jobs in autopilot, then stop acting.
	for i := range loadRunning {
		spec := cluster.JobSpec{Tenant: loadTenant, Tier: cluster.TierStandard, GPUs: 8, GPUMilli: cluster.MilliGPU,
			Checkpointable: true, CheckpointCost: time.Minute, Labels: map[string]string{"duration_s": "36000"}}
		if _, err := plane.Submit(ctx, service.SubmitRequest{ID: cluster.JobID(fmt.Sprintf("run-%d", i)), Spec: spec}); err != nil {
			b.Fatal(err)
		}
	}
	waitRunning(b, plane, loadRunning)
	if err := plane.SetMode(ctx, service.ModeAdvisor); err != nil {
		b.Fatal(err)
	}

	// The queue: synthetic jobs from the generator the models learned from.
	cfg := datasets.DefaultGenerateConfig()
	cfg.Seed, cfg.Jobs, cfg.Start = 2, loadQueued, time.Now().UTC()
	jobs, err := datasets.Generate(cfg)
	if err != nil {
		b.Fatal(err)
	}
	for i, j := range jobs {
		spec := j.Clone().Spec
		spec.GPUs = min(spec.GPUs, 8) // one node of the demo fleet
		spec.GangSize, spec.GPUModels = 0, nil
		if spec.HasDeadline() {
			spec.Deadline = time.Now().UTC().Add(j.Spec.Deadline.Sub(j.SubmitTime))
		}
		if _, err := plane.Submit(ctx, service.SubmitRequest{ID: cluster.JobID(fmt.Sprintf("q%04d", i)), Spec: spec}); err != nil {
			b.Fatalf("submitting queued job %d: %v", i, err)
		}
	}
	fs, err := plane.Fleet(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if fs.Running != loadRunning || fs.Queued != loadQueued {
		b.Fatalf("fleet has %d running and %d queued jobs, want %d and %d", fs.Running, fs.Queued, loadRunning, loadQueued)
	}

	srv := httptest.NewServer(api.New(api.Config{Service: plane, Logger: log, Version: "load-test", Tokens: api.Tokens{List: []api.Token{
		api.NewToken(loadAdminToken, "ops", api.RoleAdmin),
		api.NewToken(loadViewerToken, loadTenant, api.RoleViewer),
	}}}).Handler())
	transport := &http.Transport{MaxIdleConnsPerHost: 64}
	b.Cleanup(func() {
		transport.CloseIdleConnections()
		srv.Close()
	})
	b.Logf("load stack: %d running and %d queued jobs on %s, ready in %s", fs.Running, fs.Queued, loadFleet, time.Since(began).Round(time.Millisecond))
	return &loadStack{url: srv.URL, client: &http.Client{Transport: transport, Timeout: time.Minute}, running: fs.Running, queued: fs.Queued}
}

// labelledDuration is how long a job runs on the simulated backend: its
// label duration_s, else one hour (serve's rule).
func labelledDuration(j *cluster.Job) time.Duration {
	if s, err := strconv.ParseFloat(j.Spec.Labels["duration_s"], 64); err == nil && s > 0 {
		return time.Duration(s * float64(time.Second))
	}
	return time.Hour
}

// waitRunning waits until n jobs run.
func waitRunning(b *testing.B, plane *control.Plane, n int) {
	b.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		js, err := plane.Jobs(context.Background(), service.JobQuery{States: []cluster.JobState{cluster.StateRunning}})
		if err != nil {
			b.Fatal(err)
		}
		if len(js) == n {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d jobs running after 30s, want %d", len(js), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// post sends one request and reads the whole answer.
func (s *loadStack) post(path, token, body string) (int, []byte, error) {
	req, err := http.NewRequest(http.MethodPost, s.url+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, err
}

// load is a bounded load: each b.Loop iteration sends clients × perClient
// requests, perClient from each of clients concurrent clients, and waits
// for all answers. It reports the requests' p50_ms and p99_ms over all
// iterations, the throughput in req/s and the process's CPU time per
// request in cpu_ms/req.
func (s *loadStack) load(b *testing.B, clients, perClient int, path, token, body string) {
	b.Helper()
	var all []time.Duration
	var busy, cpu time.Duration
	for b.Loop() {
		began, cpuBegan := time.Now(), processCPU(b)
		lat := make([][]time.Duration, clients)
		errs := make([]error, clients)
		var wg sync.WaitGroup
		for c := range clients {
			wg.Go(func() {
				lat[c] = make([]time.Duration, 0, perClient)
				for range perClient {
					start := time.Now()
					code, out, err := s.post(path, token, body)
					if err == nil && code != http.StatusOK {
						err = fmt.Errorf("POST %s = %d: %.300s", path, code, out)
					}
					if err != nil {
						errs[c] = err
						return
					}
					lat[c] = append(lat[c], time.Since(start))
				}
			})
		}
		wg.Wait()
		busy += time.Since(began)
		cpu += processCPU(b) - cpuBegan
		for c := range clients {
			if errs[c] != nil {
				b.Fatalf("client %d: %v", c, errs[c])
			}
			all = append(all, lat[c]...)
		}
	}
	slices.Sort(all)
	q := func(p float64) float64 {
		return float64(all[min(int(p*float64(len(all))), len(all)-1)]) / float64(time.Millisecond)
	}
	b.ReportMetric(q(0.50), "p50_ms")
	b.ReportMetric(q(0.99), "p99_ms")
	b.ReportMetric(float64(len(all))/busy.Seconds(), "req/s")
	b.ReportMetric(float64(cpu)/float64(time.Millisecond)/float64(len(all)), "cpu_ms/req")
}

// processCPU is the CPU time (user and system) this process has used: the
// server, the clients and the control plane's own loop together. Per
// request it says what a request costs however busy the machine is.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
