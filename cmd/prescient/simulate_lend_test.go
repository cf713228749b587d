package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/executor/lend"
	"github.com/prescient-sched/prescient/internal/testenv"
)

func TestParseLendSpec(t *testing.T) {
	for spec, want := range map[string]lendSpec{
		"none":            {kind: "none"},
		"oracle":          {kind: "oracle"},
		"recent:30m":      {kind: "recent", window: 30 * time.Minute},
		"model:/m":        {kind: "model", dir: "/m", level: lend.DefaultLevel},
		"model:/m@0.25":   {kind: "model", dir: "/m", level: 0.25},
		"model:C:\\m@0.2": {kind: "model", dir: "C:\\m", level: 0.2},
		"model:/a@b@0.3":  {kind: "model", dir: "/a@b", level: 0.3},
	} {
		got, err := parseLendSpec(spec)
		if err != nil || got != want {
			t.Errorf("%q: %+v, %v; want %+v", spec, got, err, want)
		}
	}
	for _, bad := range []string{"", "always", "oracle:1", "none:", "recent", "recent:10s", "recent:2d", "model:", "model:@0.1", "model:/m@1", "model:/m@x", "model:/m@-0.1"} {
		if _, err := parseLendSpec(bad); err == nil || !strings.Contains(err.Error(), "lend") {
			t.Errorf("%q: error %v, want one naming the lending spec", bad, err)
		}
	}
}

func FuzzParseLendSpec(f *testing.F) {
	for _, s := range []string{"none", "oracle", "recent:30m", "model:/m@0.1", "model:", "recent:-1h", "model:/m@NaN"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sp, err := parseLendSpec(s)
		if err != nil {
			if sp != (lendSpec{}) {
				t.Fatalf("%q: error %v with a spec %+v", s, err, sp)
			}
			return
		}
		switch sp.kind {
		case "none", "oracle":
		case "recent":
			if sp.window < time.Minute || sp.window > 24*time.Hour {
				t.Fatalf("%q: window %s accepted", s, sp.window)
			}
		case "model":
			if sp.dir == "" || !(sp.level > 0 && sp.level < 1) {
				t.Fatalf("%q: %+v accepted", s, sp)
			}
		default:
			t.Fatalf("%q: kind %q accepted", s, sp.kind)
		}
	})
}

// A Philly slice on four training nodes beside the GenAI containers as an
// inference pool: lent by the oracle, by what was idle for 30 minutes and
// by an idle model trained on the containers, the training jobs finish
// sooner than with the pool kept apart; the oracle never leaves the
// service short.
func TestSimulateLendsIdleInferenceNodes(t *testing.T) {
	trace := "philly:" + testenv.Dataset(t, "philly", "philly_jobs.csv")
	genai := "genai:" + testenv.Dataset(t, "alibaba-genai", "pod_gpu_duty_cycle_anon.csv.gz")
	reg := filepath.Join(t.TempDir(), "idle")
	if _, err := run(t, "train", "--target", "idle", "--series", genai, "--models", reg, "--output", "json", "--log-level", "error"); err != nil {
		t.Fatal(err)
	}
	res := map[string]map[string]float64{}
	for _, lend := range []string{"none", "oracle", "recent:30m", "model:" + reg} {
		out, err := run(t, "simulate", "--trace", trace, "--fleet", "uniform:4x8:V100", "--from", "2017-11-10", "--limit", "600",
			"--policy", "prescient", "--oracle", "--inference", genai, "--lend", lend, "-o", "json", "--log-level", "error")
		if err != nil {
			t.Fatalf("--lend %s: %v", lend, err)
		}
		var raw struct {
			Jobs, Finished float64
			AvgJCTS        float64            `json:"avg_jct_s"`
			Lending        map[string]float64 `json:"lending"`
		}
		if err := json.Unmarshal([]byte(out), &raw); err != nil || raw.Lending == nil {
			t.Fatalf("--lend %s: %v, want the lending figures\n%s", lend, err, out)
		}
		m := raw.Lending
		m["jobs"], m["finished"], m["avg_jct_s"] = raw.Jobs, raw.Finished, raw.AvgJCTS
		res[lend] = m
		t.Logf("--lend %-12.12s avg JCT %6.0f s, lent %5.0f GPU-h, short %6.0f GPU-s of %6.0f GPU-h busy, %3.0f loans, %3.0f jobs preempted",
			lend, m["avg_jct_s"], m["lent_gpu_s"]/3600, m["inference_short_gpu_s"], m["inference_busy_gpu_s"]/3600, m["loans"], m["reclaim_preemptions"])
		if m["finished"] != m["jobs"] || m["inference_busy_gpu_s"] <= 0 {
			t.Errorf("--lend %s: finished %v of %v, inference busy %v GPU-s", lend, m["finished"], m["jobs"], m["inference_busy_gpu_s"])
		}
	}
	table, err := run(t, "simulate", "--trace", trace, "--fleet", "uniform:4x8:V100", "--from", "2017-11-10", "--limit", "100",
		"--policy", "fifo", "--inference", genai, "--lend", "recent:30m", "--log-level", "error")
	if err != nil || !strings.Contains(table, "LENT GPU-H") || !strings.Contains(table, "INFERENCE SHORT GPU-H") {
		t.Errorf("table: %v\n%s", err, table)
	}
	none := res["none"]
	if none["lent_gpu_s"] != 0 || none["inference_short_gpu_s"] != 0 {
		t.Errorf("--lend none: lent %v, short %v; want neither", none["lent_gpu_s"], none["inference_short_gpu_s"])
	}
	if res["oracle"]["inference_short_gpu_s"] != 0 {
		t.Errorf("--lend oracle: %v GPU-s short, want 0", res["oracle"]["inference_short_gpu_s"])
	}
	for _, lend := range []string{"oracle", "recent:30m", "model:" + reg} {
		if m := res[lend]; m["lent_gpu_s"] <= 0 || m["avg_jct_s"] >= none["avg_jct_s"] {
			t.Errorf("--lend %s: lent %v GPU-s, avg JCT %v s against %v kept apart: want GPUs lent and jobs sooner", lend, m["lent_gpu_s"], m["avg_jct_s"], none["avg_jct_s"])
		}
	}
}
