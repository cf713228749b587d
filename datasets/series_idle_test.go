package datasets

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prescient-sched/prescient/internal/testenv"
)

const heliosHeader = "time,total_gpu_num,running_gpu_num,pending_gpu_num,idle_gpu_num\n"

func TestHeliosSeries(t *testing.T) {
	got, err := readHeliosSeries(strings.NewReader(heliosHeader+"2020-05-01 00:00:00,64,59,3,5\n2020-05-01 00:01:00,64,60,0,4\n"),
		"dir/vc3sl_cluster_sequence_vc.csv")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != "vc3sl" || !slices.Equal(got[0].Values, []float64{5, 4}) ||
		!slices.Equal(got[0].Capacity, []float64{64, 64}) || !slices.Equal(got[0].Demand, []float64{3, 0}) {
		t.Fatalf("%+v", got)
	}
	for name, tc := range map[string]struct{ in, want string }{
		"more idle than the cluster names the line": {heliosHeader + "2020-05-01 00:00:00,8,0,0,9\n", "h.csv:2: field idle_gpu_num"},
		"a time that goes back is refused":          {heliosHeader + "2020-05-01 00:01:00,8,0,0,1\n2020-05-01 00:00:00,8,0,0,1\n", "h.csv:3: field time"},
		"a bad count is refused":                    {heliosHeader + "2020-05-01 00:00:00,8,0,x,1\n", "h.csv:2: field pending_gpu_num"},
		"a missing column is named":                 {"time,idle_gpu_num\n", `column "total_gpu_num" is missing`},
		"no rows":                                   {heliosHeader, "h.csv:1: no rows"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := readHeliosSeries(strings.NewReader(tc.in), "h.csv")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
	t.Run("a folder reads every file", func(t *testing.T) {
		dir := testenv.Dataset(t, "helios", "earth_vc_sequence")
		got, err := ReadSeries("helios:" + dir)
		if err != nil {
			t.Fatal(err)
		}
		entries, _ := os.ReadDir(dir)
		if len(got) != len(entries) || len(got) < 12 || len(got[0].Values) != 44640 {
			t.Fatalf("%d series from %d files", len(got), len(entries))
		}
	})
	t.Run("the same series in two files is an error naming both", func(t *testing.T) {
		dir := t.TempDir()
		for _, n := range []string{"vcA_1.csv", "vcA_2.csv"} {
			os.WriteFile(filepath.Join(dir, n), []byte(heliosHeader+"2020-05-01 00:00:00,8,0,0,1\n"), 0o644)
		}
		_, err := ReadSeries("helios:" + dir)
		if err == nil || !strings.Contains(err.Error(), "vcA_1.csv") || !strings.Contains(err.Error(), "vcA_2.csv") {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestPhillyNodesSeries(t *testing.T) {
	got, err := readPhillyNodesSeries(strings.NewReader("time,active,total\n2017-10-03 00:00:00,312,420\n2017-10-03 00:01:00,421,420\n"), "philly_node_sequence.csv")
	if err != nil {
		t.Fatal(err)
	}
	if got[0].ID != "philly" || !slices.Equal(got[0].Values, []float64{108, 0}) || !slices.Equal(got[0].Capacity, []float64{420, 420}) {
		t.Fatalf("%+v", got)
	}
	if _, err := readPhillyNodesSeries(strings.NewReader("time,active,total\n2017-10-03 00:00:00,-1,420\n"), "p.csv"); err == nil ||
		!strings.Contains(err.Error(), "p.csv:2: field active") {
		t.Fatalf("err = %v", err)
	}
	path := testenv.Dataset(t, "philly", "philly_node_sequence.csv")
	real, err := ReadSeries("philly-nodes:" + path)
	if err != nil || len(real) != 1 || len(real[0].Values) < 80000 {
		t.Fatalf("%v", err)
	}
}

func TestGenaiDutySeries(t *testing.T) {
	if _, err := readGenaiDutySeries(strings.NewReader(genaiHeader+"0,100.5,a\n"), "d.csv"); err == nil || !strings.Contains(err.Error(), "d.csv:2: field value") {
		t.Fatalf("a duty cycle over 100%% was accepted: %v", err)
	}
	path := testenv.Dataset(t, "alibaba-genai", "pod_gpu_duty_cycle_anon.csv.gz")
	got, err := ReadSeries("genai:" + path)
	if err != nil || len(got) < 50 || got[0].Capacity != nil {
		t.Fatalf("%d series, %v", len(got), err)
	}
}

// checkSeries is what every series reader promises.
func checkSeries(t *testing.T, got []Series, err error) {
	if err != nil {
		var pe *ParseError
		if !errors.As(err, &pe) && !strings.Contains(err.Error(), "fuzz") {
			t.Fatalf("error without the file: %v", err)
		}
		return
	}
	for _, s := range got {
		if len(s.Times) == 0 || len(s.Values) != len(s.Times) || (s.Capacity != nil && len(s.Capacity) != len(s.Times)) {
			t.Fatalf("series %q: lengths", s.ID)
		}
		for i := range s.Times {
			if i > 0 && !s.Times[i].After(s.Times[i-1]) {
				t.Fatalf("series %q: times not increasing", s.ID)
			}
			if !(s.Values[i] >= 0) || (s.Capacity != nil && s.Values[i] > s.Capacity[i]) {
				t.Fatalf("series %q: value %v", s.ID, s.Values[i])
			}
		}
	}
}

func FuzzHeliosSeries(f *testing.F) {
	f.Add([]byte(heliosHeader + "2020-05-01 00:00:00,64,59,3,5\n2020-05-01 00:01:00,64,60,0,4\n"))
	f.Add([]byte(heliosHeader + "2020-05-01,1e9,0,-1,5\n\"x"))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := readHeliosSeries(bytes.NewReader(data), "fuzz")
		checkSeries(t, got, err)
	})
}

func FuzzPhillyNodesSeries(f *testing.F) {
	f.Add([]byte("time,active,total\n2017-10-03 00:00:00,312,420\n2017-10-03 00:01:00,421,420\n"))
	f.Add([]byte("time,active,total\n2017-10-03T00:00:00Z,,\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := readPhillyNodesSeries(bytes.NewReader(data), "fuzz")
		checkSeries(t, got, err)
	})
}

func FuzzGenaiDutySeries(f *testing.F) {
	f.Add([]byte(genaiHeader + "1662858720.0,0.0,a\n1662858777.0,99.5,a\n"))
	f.Add([]byte(genaiHeader + "1,101,a\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := readGenaiDutySeries(bytes.NewReader(data), "fuzz")
		checkSeries(t, got, err)
		for _, s := range got {
			for _, v := range s.Values {
				if v > 100 {
					t.Fatalf("duty cycle %v", v)
				}
			}
		}
	})
}
