package main

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/cluster/clustertest"
	"github.com/prescient-sched/prescient/control/lending"
	"github.com/prescient-sched/prescient/control/parking"
	"github.com/prescient-sched/prescient/executor/lend"
	"github.com/prescient-sched/prescient/executor/park"
	"github.com/prescient-sched/prescient/training"
)

func TestServeAnswersProbesAndShutsDownCleanly(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		root := newRootCmd()
		root.SetArgs([]string{"serve", "--addr", addr, "--db", filepath.Join(t.TempDir(), "p.db"), "--log-level", "warn"})
		done <- root.ExecuteContext(ctx)
	}()

	for _, path := range []string{"/healthz", "/readyz"} {
		if code := waitFor(t, "http://"+addr+path); code != http.StatusOK {
			t.Fatalf("GET %s = %d, want 200", path, code)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve returned %v after SIGTERM-like cancellation", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not stop within 15 s of cancellation")
	}
}

func waitFor(t testing.TB, url string) int {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		res, err := http.Get(url)
		if err == nil {
			res.Body.Close()
			return res.StatusCode
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: %v", url, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestServeRefusesFlagsThatCannotWork(t *testing.T) {
	base := func() serveOptions {
		return serveOptions{listen: "127.0.0.1:0", mode: "advisor", backend: "agent", policy: "prescient", tick: time.Second, backfillDepth: 100,
			maxFailed: 5}
	}
	for _, tc := range []struct {
		name string
		edit func(*serveOptions)
		want string
	}{
		{"unknown mode", func(o *serveOptions) { o.mode = "yolo" }, "--mode"},
		{"kubernetes backend with a fleet", func(o *serveOptions) { o.backend = "kubernetes"; o.fleet = "uniform:1x8" }, "--fleet"},
		{"kubernetes flags without the backend", func(o *serveOptions) { o.kube.leaderElect = true }, "--leader-elect"},
		{"sim backend without a fleet", func(o *serveOptions) { o.backend = "sim" }, "--fleet"},
		{"agent backend with a fleet", func(o *serveOptions) { o.fleet = "uniform:1x8" }, "--fleet"},
		{"unknown policy", func(o *serveOptions) { o.policy = "lifo" }, "--policy"},
		{"retraining without a registry", func(o *serveOptions) { o.retrainEvery = time.Hour }, "--models"},
		{"negative backfill depth", func(o *serveOptions) { o.backfillDepth = -1 }, "--backfill-depth"},
		{"zero tick", func(o *serveOptions) { o.tick = 0 }, "--tick"},
		{"short demo token", func(o *serveOptions) { o.demo = demoOptions{enabled: true, timeScale: 1, token: "short"} }, "--demo-token"},
		{"lending without headroom", func(o *serveOptions) { o.lend = lendDefaults(); o.lend.Headroom = 0 }, "--lend-headroom"},
		{"lending on a level of 1", func(o *serveOptions) { o.lend = lendDefaults(); o.lend.Level = 1 }, "--lend-level"},
		{"lending every 90 seconds", func(o *serveOptions) { o.lend = lendDefaults(); o.lend.Every = 90 * time.Second }, "--lend-every"},
		{"lending with no notice", func(o *serveOptions) { o.lend = lendDefaults(); o.lend.Notice = 0 }, "--lend-notice"},
		{"lending on a day's history", func(o *serveOptions) { o.lend = lendDefaults(); o.lend.Recent = 24 * time.Hour }, "--lend-recent"},
		{"forecast parking without a delay", func(o *serveOptions) { o.park.Forecast = true }, "--park-idle-after"},
		{"a suspend program without parking", func(o *serveOptions) { o.park.Suspend = "/bin/true" }, "--park-idle-after"},
		{"parking a negative time", func(o *serveOptions) { o.park = parkDefaults(); o.park.IdleAfter = -time.Minute }, "--park-idle-after"},
		{"parking with a suspend program that is not there", func(o *serveOptions) {
			o.park = parkDefaults()
			o.park.Suspend = "/nonexistent/ipmi-off"
		}, "--park-suspend-program /nonexistent/ipmi-off"},
		{"no failed start allowed", func(o *serveOptions) { o.maxFailed = 0 }, "--max-failed-starts 0"},
		{"parking with no wake timeout", func(o *serveOptions) { o.park = parkDefaults(); o.park.WakeTimeout = 0 }, "--park-wake-timeout"},
		{"a tenants file never read again", func(o *serveOptions) { o.tenantsFile = "t.yaml" }, "--tenants-reload 0s"},
		{"priority tiers without Kubernetes", func(o *serveOptions) { o.kube.priorityTiers = map[string]string{"high": "production"} }, "--priority-tier needs --backend kubernetes"},
		{"a priority class's unknown tier", func(o *serveOptions) {
			o.backend = "kubernetes"
			o.kube.priorityTiers = map[string]string{"high": "urgent"}
		}, "--priority-tier high=urgent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := base()
			tc.edit(&o)
			err := o.validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("validate() = %v, want an error naming %s", err, tc.want)
			}
		})
	}
	o := base()
	if err := o.validate(); err != nil {
		t.Fatalf("the defaults: %v", err)
	}
	o.lend = lendDefaults()
	if err := o.validate(); err != nil {
		t.Fatalf("the defaults with --lend-pools: %v", err)
	}
	o.park = parkDefaults()
	o.park.Suspend, o.park.Resume = "/bin/true", "true"
	if err := o.validate(); err != nil {
		t.Fatalf("parking with programs that are there: %v", err)
	}
}

// parkDefaults are the --park-* flags' defaults with --park-idle-after 10m.
func parkDefaults() parking.Config {
	return parking.Config{IdleAfter: 10 * time.Minute, Lookahead: park.DefaultLookahead, WakeTimeout: parking.DefaultWakeTimeout}
}

// lendDefaults are the --lend-* flags' defaults with --lend-pools inference.
func lendDefaults() lending.Config {
	return lending.Config{Pools: []string{"inference"}, Every: 5 * time.Minute, MinLoan: 30 * time.Minute, Notice: 2 * time.Minute,
		Level: lend.DefaultLevel, Recent: lend.DefaultRecent, Handover: lending.DefaultHandover, Headroom: lending.DefaultHeadroom}
}

// Before any duration model is published the control plane still plans,
// and each forecast says where its figures came from.
func TestLiveForecasterWithoutModelsAnswersLabelledDefaults(t *testing.T) {
	f := newLiveForecaster(training.Registry{Dir: t.TempDir()}, slog.New(slog.DiscardHandler))
	j := clustertest.Job("j1").Obj()
	fc, err := f.Forecast(t.Context(), []*cluster.Job{&j})
	if err != nil {
		t.Fatal(err)
	}
	if fc[0].DurationP50 != defaultP50 || fc[0].DurationP90 != defaultP90 || !strings.Contains(fc[0].Source, "no duration model") {
		t.Errorf("forecast %+v", fc[0])
	}
	for in, want := range map[string]time.Duration{"90": 90 * time.Second, "0.5": 500 * time.Millisecond, "-1": 0, "x": 0, "1e12": 0} {
		got, ok := durationLabel(map[string]string{"duration_s": in})
		if got != want || ok != (want > 0) {
			t.Errorf("duration_s=%s: %s, %v; want %s", in, got, ok, want)
		}
	}
}
