package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/collector"
	"github.com/prescient-sched/prescient/collector/nvml"
	"github.com/prescient-sched/prescient/store"
)

func TestCollectSimulatedHostIntoTheEmbeddedStore(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "p.db")
	out, err := run(t, "collect", "--nvml", "sim", "--node", "n1", "--interval", "200ms", "--duration", "1s",
		"--db", db, "--spool-dir", filepath.Join(dir, "spool"), "--metrics-listen", "127.0.0.1:0", "--log-level", "warn", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var r collectReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	if r.Devices != 8 || r.SamplesTotal < 16 || r.SamplesWritten != r.SamplesTotal || r.SpoolBytes != 0 {
		t.Fatalf("report %+v; want 8 devices and every sample written", r)
	}
	st, err := store.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	series, err := collector.NewEmbeddedSink(st).Query(context.Background(), collector.SeriesQuery{
		Field: "power_w", Start: mustTime(t, "2000-01-01T00:00:00Z"), End: mustTime(t, "2100-01-01T00:00:00Z"), Step: 1e9})
	if err != nil || len(series) != 8 {
		t.Fatalf("stored series: %d, %v; want 8", len(series), err)
	}
}

func TestCollectRejectsBadSettingsNamingTheFlag(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"an unknown NVML backend", []string{"--nvml", "fake"}, `--nvml: "fake" is not one of auto, real, sim`},
		{"a zero interval", []string{"--interval", "0s"}, "--interval 0s"},
		{"a spool bound below 1 MiB", []string{"--spool-max-bytes", "100"}, "--spool-max-bytes 100"},
		{"a fleet with real NVML", []string{"--nvml", "real", "--fleet", "uniform:1x8"}, "--fleet: simulates a fleet"},
		{"a bucket with two slashes", []string{"--influx-url", "http://127.0.0.1:1", "--influx-bucket", "a/b/c"}, "--influx-url/--influx-bucket"},
		{"real NVML on a machine without it says what to do", []string{"--nvml", "real"}, "--nvml sim simulates GPUs"},
		{"the default on a machine without NVML fails too, saying what to do", nil, "--nvml auto: nvml: init: libnvidia-ml.so could not be loaded (is the NVIDIA driver installed?) (--nvml sim simulates GPUs)"},
		{"a fleet without --nvml sim", []string{"--fleet", "uniform:1x8"}, "--fleet: simulates a fleet, which only --nvml sim does"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if strings.Contains(tt.want, "--nvml sim") || strings.Contains(tt.want, "libnvidia-ml") {
				if h, err := nvml.OpenReal(); err == nil {
					h.Close()
					t.Skip("this machine has NVML")
				}
			}
			dir := t.TempDir()
			args := append([]string{"collect", "--duration", "1s", "--db", filepath.Join(dir, "p.db"), "--spool-dir", filepath.Join(dir, "s"), "--log-level", "error"}, tt.args...)
			_, err := run(t, args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v; want one containing %q", err, tt.want)
			}
		})
	}
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
