package datasets

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/internal/testenv"
)

const genaiHeader = "timestamp_anon,value,container_ip\n"

func TestGenaiMemorySeries(t *testing.T) {
	t.Run("rows are grouped by container and sorted by time", func(t *testing.T) {
		in := genaiHeader + "120.0,5,b\n60.0,3,a\n0.0,1,b\n60.5,4,b\n"
		got, err := readGenaiSeries(strings.NewReader(in), "m.csv")
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0].ID != "a" || got[1].ID != "b" || !slices.Equal(got[1].Values, []float64{1, 4, 5}) ||
			!got[1].Times[1].Equal(time.Unix(60, 5e8)) {
			t.Fatalf("%+v", got)
		}
	})
	for name, tc := range map[string]struct{ in, want string }{
		"a negative value names the line and field": {genaiHeader + "0,1,a\n60,-1,a\n", "m.csv:3: field value"},
		"a time that is not a number is refused":    {genaiHeader + "noon,1,a\n", "m.csv:2: field timestamp_anon"},
		"a missing container is refused":            {genaiHeader + "0,1,\n", "m.csv:2: field container_ip"},
		"a container sampled twice at once":         {genaiHeader + "0,1,a\n0,2,a\n", "also line 2"},
		"a missing column is named":                 {"timestamp_anon,value\n0,1\n", `column "container_ip" is missing`},
		"a short row is refused":                    {genaiHeader + "0,1\n", "m.csv:2: row has 2 fields"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := readGenaiSeries(strings.NewReader(tc.in), "m.csv")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
	t.Run("ReadSeries reads the real gzip file", func(t *testing.T) {
		path := testenv.Dataset(t, "alibaba-genai", "pod_gpu_memory_used_bytes_anon.csv.gz")
		got, err := ReadSeries("genai-memory:" + path)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, s := range got {
			n += len(s.Values)
		}
		if len(got) < 50 || n < 50000 {
			t.Fatalf("%d series, %d samples", len(got), n)
		}
	})
	t.Run("an unknown series format lists the known ones", func(t *testing.T) {
		_, err := ReadSeries("nope:" + filepath.Join(t.TempDir(), "x"))
		if err == nil || !strings.Contains(err.Error(), "genai-memory") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("a missing file is an error naming it", func(t *testing.T) {
		_, err := ReadSeries("genai-memory:/nonexistent/m.csv")
		if !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("err = %v", err)
		}
	})
}

func FuzzGenaiMemorySeries(f *testing.F) {
	f.Add([]byte(genaiHeader + "1662858720.0,23497801728.0,81202f\n1662858780.0,1e10,81202f\n"))
	f.Add([]byte(genaiHeader + "1e400,NaN,x\n-1,1,\n\"a,b"))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := readGenaiSeries(bytes.NewReader(data), "fuzz")
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) && !strings.Contains(err.Error(), "fuzz") {
				t.Fatalf("error without the file: %v", err)
			}
			return
		}
		for _, s := range got {
			if len(s.Times) != len(s.Values) || len(s.Times) == 0 {
				t.Fatalf("series %q: %d times, %d values", s.ID, len(s.Times), len(s.Values))
			}
			for i := 1; i < len(s.Times); i++ {
				if !s.Times[i].After(s.Times[i-1]) {
					t.Fatalf("series %q: times not increasing", s.ID)
				}
			}
			for _, v := range s.Values {
				if !(v >= 0) {
					t.Fatalf("series %q: value %v", s.ID, v)
				}
			}
		}
	})
}
