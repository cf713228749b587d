package datasets

import (
	"strings"
	"testing"
	"time"
)

func TestReadCarbon(t *testing.T) {
	pts, err := readCarbon(strings.NewReader("time,gco2_per_kwh\n2017-11-10 00:00:00,400\n2017-11-10T06:00:00Z, 150.5\n"), "c.csv")
	if err != nil {
		t.Fatal(err)
	}
	want := []CarbonPoint{{time.Date(2017, 11, 10, 0, 0, 0, 0, time.UTC), 400}, {time.Date(2017, 11, 10, 6, 0, 0, 0, time.UTC), 150.5}}
	if len(pts) != 2 || pts[0] != want[0] || pts[1] != want[1] {
		t.Fatalf("read %+v, want %+v", pts, want)
	}
}

func TestReadCarbonNamesTheBadField(t *testing.T) {
	tests := []struct {
		name, data, want string
	}{
		{"a time that goes back", "time,gco2_per_kwh\n2017-11-10,1\n2017-11-09,2\n", "c.csv:3: field time"},
		{"a negative intensity", "time,gco2_per_kwh\n2017-11-10,-1\n", "c.csv:2: field gco2_per_kwh"},
		{"not a number", "time,gco2_per_kwh\n2017-11-10,lots\n", "c.csv:2: field gco2_per_kwh"},
		{"a missing column", "time,carbon\n2017-11-10,1\n", "gco2_per_kwh"},
		{"no points", "time,gco2_per_kwh\n", "no points"},
	}
	for _, tt := range tests {
		if _, err := readCarbon(strings.NewReader(tt.data), "c.csv"); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want one containing %q", tt.name, err, tt.want)
		}
	}
}

func FuzzReadCarbon(f *testing.F) {
	f.Add([]byte("time,gco2_per_kwh\n2017-11-10 00:00:00,400\n2017-11-10T06:00:00Z,150\n"))
	f.Add([]byte("time,gco2_per_kwh\n2017-11-10,1e400\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		pts, err := readCarbon(strings.NewReader(string(data)), "f.csv")
		if err != nil {
			return
		}
		for i, p := range pts {
			if p.GPerKWh < 0 || p.GPerKWh > 5000 || i > 0 && !p.Time.After(pts[i-1].Time) {
				t.Fatalf("accepted point %d: %+v", i, p)
			}
		}
	})
}
