package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prescient-sched/prescient/internal/testenv"
	"github.com/prescient-sched/prescient/models"
)

// The foundation's acceptance check: the Philly job table has 74,167 rows
// submitted between 2017-09-04 and 2017-11-30.
func TestInspectPhillyCountsEveryRowAndTheSpan(t *testing.T) {
	path := testenv.Dataset(t, "philly", "philly_jobs.csv")
	out, err := run(t, "datasets", "inspect", "philly:"+path, "--output", "json")
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Jobs        int    `json:"jobs"`
		FirstSubmit string `json:"first_submit"`
		LastSubmit  string `json:"last_submit"`
		GPUs        map[string]int
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("inspect --output json is not one JSON object: %v\n%s", err, out)
	}
	if got.Jobs != 74167 || got.FirstSubmit != "2017-09-04T10:30:41Z" || got.LastSubmit != "2017-11-30T23:52:11Z" {
		t.Fatalf("philly: %d jobs from %s to %s; want 74167 from 2017-09-04T10:30:41Z to 2017-11-30T23:52:11Z", got.Jobs, got.FirstSubmit, got.LastSubmit)
	}
	table, err := run(t, "datasets", "inspect", "philly:"+path)
	if err != nil || !strings.Contains(table, "74167") {
		t.Fatalf("table output lacks the row count: %v\n%s", err, table)
	}
}

func TestInspectRejectsMalformedInputSayingWhere(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.csv")
	body := "timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-09 07:01:55,66.0,1,66.0,vc1\n2017-10-09 07:02:55,abc,1,66.0,vc1\n"
	if err := os.WriteFile(bad, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := run(t, "datasets", "inspect", "philly:"+bad)
	if err == nil || !strings.Contains(err.Error(), "bad.csv:3") || !strings.Contains(err.Error(), "duration") {
		t.Fatalf("inspect of a bad row: %v; want an error naming bad.csv:3 and the field duration", err)
	}
	out, err := run(t, "datasets", "inspect", "philly:"+bad, "--lenient", "-o", "json", "--log-level", "error")
	if err != nil || !strings.Contains(out, `"jobs": 1`) || !strings.Contains(out, `"skipped_rows": 1`) {
		t.Fatalf("lenient inspect: %v\n%s", err, out)
	}
	if _, err := run(t, "datasets", "inspect", "nosuch:"+bad); err == nil || !strings.Contains(err.Error(), "philly") {
		t.Fatalf("unknown format: %v; want an error listing the formats", err)
	}
}

func TestGenerateWritesHistoryThatInspectReads(t *testing.T) {
	out := filepath.Join(t.TempDir(), "synthetic.jsonl.gz")
	if _, err := run(t, "datasets", "generate", "--jobs", "500", "--seed", "7", "--out", out, "--tier-mix", "production=1,batch=1", "--log-level", "warn"); err != nil {
		t.Fatal(err)
	}
	report, err := run(t, "datasets", "inspect", "prescient:"+out, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Jobs  int            `json:"jobs"`
		Tiers map[string]int `json:"tiers"`
	}
	if err := json.Unmarshal([]byte(report), &got); err != nil {
		t.Fatal(err)
	}
	if got.Jobs != 500 || got.Tiers["production"]+got.Tiers["batch"] != 500 {
		t.Fatalf("generated history read back as %+v; want 500 jobs, all production or batch", got)
	}
	if _, err := run(t, "datasets", "generate", "--tier-mix", "urgent=1"); err == nil || !strings.Contains(err.Error(), "--tier-mix") {
		t.Fatalf("bad --tier-mix: %v", err)
	}
}

// datasets features writes one causal row per labelled job, in submit
// order, with the learners' feature names as its header.
func TestDatasetsFeaturesWritesTheLearnersRows(t *testing.T) {
	trace := "philly:" + filepath.Join(testenv.RepoRoot(t), "datasets", "testdata", "philly_small.csv")
	out := filepath.Join(t.TempDir(), "features.csv")
	if _, err := run(t, "datasets", "features", "--trace", trace, "--out", out); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	names := models.DefaultFeatureConfig(models.TargetDuration).FeatureNames()
	if len(lines) != 7 || lines[0] != "id,submit_time,label_log,"+strings.Join(names, ",") {
		t.Fatalf("%d lines, header %q", len(lines), lines[0])
	}
	if !strings.Contains(lines[1], ",2017-09-29T07:58:32Z,") || strings.Count(lines[1], ",") != len(names)+2 {
		t.Errorf("first row %q: want the earliest job, every feature", lines[1])
	}
	if _, err := run(t, "datasets", "features", "--trace", trace, "--target", "peak"); err == nil || !strings.Contains(err.Error(), "--target") {
		t.Errorf("--target peak: %v", err)
	}
}
