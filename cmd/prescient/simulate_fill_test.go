package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prescient-sched/prescient/internal/testenv"
)

// fillKeys are the keys the issue defines for the fill experiment.
var fillKeys = []string{"gpu_alloc_pct", "gpu_whole_alloc_pct", "failed_pods", "unallocated_gpus", "alloc_curve"}

func TestSimulateFillIsOneObjectWithTheIssuesKeys(t *testing.T) {
	pods := "openb:" + testenv.Dataset(t, "alibaba-openb", "openb_pod_list_default.csv")
	fleet := "openb:" + testenv.Dataset(t, "alibaba-openb", "openb_node_list_gpu_node.csv") + "?every=5"
	out, err := run(t, "simulate", "--trace", pods, "--fleet", fleet, "--experiment", "fill", "--placement", "prescient",
		"--tune", "1.3", "--seed", "42", "--output", "json", "--log-level", "error")
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("not one JSON object: %v\n%s", err, out)
	}
	for _, k := range fillKeys {
		if _, ok := got[k]; !ok {
			t.Errorf("key %s missing", k)
		}
	}
	if pct := got["gpu_alloc_pct"].(float64); pct < 94.8 {
		t.Errorf("gpu_alloc_pct %.2f, want at least FGD's 94.8", pct)
	}
	curve := got["alloc_curve"].([]any)
	if last := curve[len(curve)-1].(map[string]any); last["arrived_pct"].(float64) < 129 {
		t.Errorf("the curve ends at %v%% arrived, want about 130", last["arrived_pct"])
	}
}

func TestSimulateReplayTakesAPlacement(t *testing.T) {
	trace := "philly:" + filepath.Join(testenv.RepoRoot(t), "datasets", "testdata", "philly_small.csv")
	out, err := run(t, "simulate", "--trace", trace, "--fleet", "uniform:2x8:V100", "--policy", "fifo", "--placement", "prescient",
		"-o", "json", "--log-level", "error")
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil || got["jobs"] != got["finished"] {
		t.Fatalf("replay with --placement prescient: %v\n%s", err, out)
	}
}

func TestSimulateFillRejectsBadFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"fill without a placement", []string{"--experiment", "fill", "--trace", "openb:x.csv", "--fleet", "uniform:1x8"}, "needs --placement"},
		{"an unknown placement", []string{"--experiment", "fill", "--placement", "worst-fit", "--trace", "openb:x.csv", "--fleet", "uniform:1x8"}, "--placement"},
		{"a negative tune", []string{"--experiment", "fill", "--placement", "random", "--tune", "-1", "--trace", "openb:x.csv", "--fleet", "uniform:1x8"}, "--tune"},
		{"an unknown experiment", []string{"--experiment", "drain", "--trace", "philly:x.csv", "--fleet", "uniform:1x8"}, "--experiment"},
		{"an unknown placement in a replay", []string{"--placement", "worst-fit", "--trace", "philly:x.csv", "--fleet", "uniform:1x8"}, "--placement"},
		{"a negative power-cap price", []string{"--power-cap-price", "-1", "--trace", "philly:x.csv", "--fleet", "uniform:1x8"}, "--power-cap-price"},
		{"a carbon wait without a series", []string{"--carbon-wait", "1h", "--trace", "philly:x.csv", "--fleet", "uniform:1x8"}, "--carbon-wait"},
		{"forecast parking without parking", []string{"--park-forecast", "--trace", "philly:x.csv", "--fleet", "uniform:1x8"}, "--park-forecast needs --park-idle-after"},
	}
	for _, tt := range tests {
		_, err := run(t, append([]string{"simulate", "--log-level", "error"}, tt.args...)...)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want one naming %s", tt.name, err, tt.want)
		}
	}
}

func TestSimulateReportsCarbonAndParking(t *testing.T) {
	trace := "philly:" + filepath.Join(testenv.RepoRoot(t), "datasets", "testdata", "philly_small.csv")
	carbon := filepath.Join(t.TempDir(), "carbon.csv")
	if err := os.WriteFile(carbon, []byte("time,gco2_per_kwh\n2017-10-01,400\n2017-11-01 12:00:00,200\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, "simulate", "--trace", trace, "--fleet", "uniform:4x8:V100", "--policy", "fifo", "--placement", "prescient",
		"--park-idle-after", "10m", "--carbon", carbon, "-o", "json", "--log-level", "error")
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	kwh, kg, parked := got["energy_kwh"].(float64), got["kgco2"].(float64), got["parked_node_s"].(float64)
	if kg <= 0 || kg < kwh*0.2 || kg > kwh*0.4 || parked <= 0 {
		t.Errorf("energy %.1f kWh, %.1f kgCO2 (want 200-400 g/kWh of it), parked %.0f s", kwh, kg, parked)
	}
}

// A pod list with only the five request columns (as several published
// variants are) runs the fill experiment; a replay refuses it.
func TestSimulateFillReadsAFiveColumnPodList(t *testing.T) {
	data, err := os.ReadFile(testenv.Dataset(t, "alibaba-openb", "openb_pod_list_default.csv"))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		cols := strings.Split(line, ",")
		b.WriteString(strings.Join(cols[:5], ",") + "\n")
	}
	five := filepath.Join(t.TempDir(), "openb_pod_list_five.csv")
	if err := os.WriteFile(five, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	fleet := "openb:" + testenv.Dataset(t, "alibaba-openb", "openb_node_list_gpu_node.csv") + "?every=5"
	out, err := run(t, "simulate", "--trace", "openb:"+five, "--fleet", fleet, "--experiment", "fill", "--placement", "best-fit",
		"--tune", "1.3", "--seed", "42", "--output", "json", "--log-level", "error")
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil || got["gpu_alloc_pct"].(float64) < 80 {
		t.Fatalf("fill on the five-column list: %v\n%s", err, out)
	}
	if _, err := run(t, "simulate", "--trace", "openb:"+five, "--fleet", fleet, "--policy", "fifo", "--log-level", "error"); err == nil ||
		!strings.Contains(err.Error(), "--experiment fill") {
		t.Errorf("a replay of the five-column list: %v, want a refusal naming --experiment fill", err)
	}
}
