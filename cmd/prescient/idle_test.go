package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prescient-sched/prescient/datasets"
	"github.com/prescient-sched/prescient/internal/testenv"
)

// copyLines writes the first n lines of a (gzip) file to dst, plain.
func copyLines(t *testing.T, src, dst string, n int) {
	t.Helper()
	rc, err := datasets.OpenFile(src)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var b strings.Builder
	sc := bufio.NewScanner(rc)
	for i := 0; i < n && sc.Scan(); i++ {
		b.WriteString(sc.Text() + "\n")
	}
	if err := os.WriteFile(dst, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Three days of four Helios virtual clusters: train and evaluate the idle
// forecaster through the command line, with JSON reports in the shape the
// issue gives.
func TestIdleTrainEvaluate(t *testing.T) {
	dir := t.TempDir()
	series := filepath.Join(dir, "helios")
	os.Mkdir(series, 0o755)
	for _, vc := range []string{"vc6YE", "vc8Sj", "vc3sl", "vcTJs"} {
		copyLines(t, testenv.Dataset(t, "helios", "earth_vc_sequence", vc+"_cluster_sequence_vc.csv.gz"),
			filepath.Join(series, vc+"_cluster_sequence_vc.csv"), 3*1440+1)
	}
	reg := filepath.Join(dir, "models")
	type report struct {
		ModelVersion int      `json:"model_version"`
		ScoredSeries []string `json:"scored_series"`
		Horizons     []map[string]float64
		Windows      map[string]float64
	}
	check := func(t *testing.T, out string, horizons int) report {
		var rep report
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("not one JSON object: %v\n%s", err, out)
		}
		if len(rep.Horizons) != horizons || rep.Windows["min_length_s"] != 900 {
			t.Fatalf("report: %+v", rep)
		}
		for _, h := range rep.Horizons {
			for _, k := range []string{"horizon_s", "mae", "mae_persistence", "mae_seasonal"} {
				if _, ok := h[k]; !ok {
					t.Fatalf("horizon %v lacks %s", h, k)
				}
			}
		}
		if p, r := rep.Windows["precision"], rep.Windows["recall"]; !(p > 0 && p <= 1 && r > 0 && r <= 1) {
			t.Fatalf("windows %v", rep.Windows)
		}
		return rep
	}
	t.Run("train holds out a series, scores it and publishes version 1", func(t *testing.T) {
		out, err := run(t, "train", "--target", "idle", "--series", "helios:"+series, "--models", reg, "--output", "json")
		if err != nil {
			t.Fatal(err)
		}
		rep := check(t, out, 12)
		if rep.ModelVersion != 1 || len(rep.ScoredSeries) != 1 {
			t.Fatalf("report: %+v", rep)
		}
	})
	t.Run("evaluate scores the unseen series from the date on", func(t *testing.T) {
		out, err := run(t, "evaluate", "--target", "idle", "--series", "helios:"+series, "--models", reg,
			"--from", "2020-05-02T12:00:00Z", "--horizon", "60m", "--output", "json")
		if err != nil {
			t.Fatal(err)
		}
		rep := check(t, out, 12)
		if rep.Horizons[5]["horizon_s"] != 1800 || rep.Horizons[11]["horizon_s"] != 3600 {
			t.Fatalf("horizons %v", rep.Horizons)
		}
	})
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"train without --series":        {[]string{"train", "--target", "idle", "--models", reg}, "--series"},
		"evaluate with a bad --horizon": {[]string{"evaluate", "--target", "idle", "--series", "helios:" + series, "--models", reg, "--from", "2020-05-02", "--horizon", "7m"}, "--horizon"},
		"evaluate with a bad --from":    {[]string{"evaluate", "--target", "idle", "--series", "helios:" + series, "--models", reg, "--from", "May"}, "--from"},
		"a series folder that is not":   {[]string{"train", "--target", "idle", "--series", "helios:" + filepath.Join(dir, "nope"), "--models", reg}, "nope"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := run(t, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to name %s", err, tc.want)
			}
		})
	}
}
