package nvml_test

import (
	"strings"
	"testing"

	"github.com/prescient-sched/prescient/collector/nvml"
)

const header = "cluster,metric,unit,cdf_percent,value\n"

func TestReadCDFs(t *testing.T) {
	tests := []struct {
		name, in, wantErr string
	}{
		{name: "a well-formed table reads", in: header + "c,m,percent,0,0\nc,m,percent,50,0\nc,m,percent,100,90\n"},
		{name: "a CDF may start above 0% (mass at its first value)", in: header + "c,m,percent,36,0\nc,m,percent,100,90\n"},
		{name: "a percent falling by rounding is taken as no change", in: header + "c,m,percent,0,0\nc,m,percent,36.07,0\nc,m,percent,36.06,1\nc,m,percent,100,9\n"},
		{name: "a wrong header names the column", in: "cluster,metric,unit,pct,value\n", wantErr: `header column 4 is "pct", want "cdf_percent"`},
		{name: "a falling value names the line", in: header + "c,m,percent,0,5\nc,m,percent,50,4\n", wantErr: "t.csv:3: c/m: point (50%, 4) falls below"},
		{name: "a falling percent names the line", in: header + "c,m,percent,50,1\nc,m,percent,10,4\n", wantErr: "t.csv:3:"},
		{name: "a percent above 100 is refused", in: header + "c,m,percent,101,5\n", wantErr: "t.csv:2: cdf_percent \"101\""},
		{name: "a value that is not a number is refused", in: header + "c,m,percent,10,x\n", wantErr: "t.csv:2: value \"x\""},
		{name: "points that do not reach 100% are refused", in: header + "c,m,percent,0,0\nc,m,percent,50,1\n", wantErr: "end at 50%"},
		{name: "a row with too few columns names its line", in: header + "c,m,percent,0\n", wantErr: "t.csv: record on line 2"},
		{name: "an empty table is refused", in: header, wantErr: "no rows"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := nvml.ReadCDFs(strings.NewReader(tt.in), "t.csv")
			if tt.wantErr == "" && err != nil {
				t.Fatalf("err = %v", err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("err = %v; want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestQuantileAndProbAreInverse(t *testing.T) {
	c, err := nvml.ReadCDFs(strings.NewReader(header+"c,m,percent,0,0\nc,m,percent,30,0\nc,m,percent,60,50\nc,m,percent,100,100\n"), "t.csv")
	if err != nil {
		t.Fatal(err)
	}
	d, _ := c.Get("c", "m")
	for _, tc := range []struct{ u, want float64 }{{0, 0}, {0.2, 0}, {0.45, 25}, {0.8, 75}, {1, 100}} {
		if got := d.Quantile(tc.u); got != tc.want {
			t.Errorf("Quantile(%g) = %g; want %g", tc.u, got, tc.want)
		}
	}
	if got := d.Prob(0); got != 0.3 {
		t.Errorf("Prob(0) = %g; want 0.3", got)
	}
	if _, err := c.Get("c", "other"); err == nil {
		t.Error("Get of a missing metric succeeded")
	}
}

func TestDefaultCalibrationReads(t *testing.T) {
	cal := nvml.DefaultCalibration()
	if p := cal.Util.Prob(0); p < 0.3 || p > 0.33 {
		t.Errorf("built-in Seren P(util = 0) = %g; want about 0.31", p)
	}
}

func FuzzReadCDFs(f *testing.F) {
	f.Add(header + "c,m,percent,0,0\nc,m,percent,100,90\n")
	f.Add(header + "c,m,percent,36.07,0\nc,m,percent,36.06,1\nc,m,percent,100,9\n")
	f.Add("x\n\"")
	f.Fuzz(func(t *testing.T, in string) {
		c, err := nvml.ReadCDFs(strings.NewReader(in), "fuzz.csv")
		if err != nil {
			return
		}
		for _, d := range c {
			prevQ := d.Quantile(0)
			for u := 0.0; u <= 1; u += 0.05 {
				q := d.Quantile(u)
				if q < prevQ {
					t.Fatalf("Quantile falls: %g then %g", prevQ, q)
				}
				prevQ = q
			}
		}
	})
}
