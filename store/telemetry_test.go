package store

import (
	"context"
	"strings"
	"testing"
	"time"
)

func telemetryRow(uuid string, t time.Time, util float64) TelemetryRow {
	return TelemetryRow{Time: t, Node: "n1", GPUUUID: uuid, GPUIndex: 0, Model: "A100",
		Values: map[string]float64{"util_gpu_pct": util, "power_w": 100 + util}}
}

func TestTelemetryWrittenTwiceIsStoredOnce(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	rows := []TelemetryRow{telemetryRow("GPU-a", base, 10), telemetryRow("GPU-a", base.Add(time.Second), 20)}
	rows[0].Processes = []TelemetryProcess{{PID: 42, JobID: "j1", MemUsedBytes: 1 << 30}}
	for range 2 {
		if err := s.WriteTelemetry(ctx, rows); err != nil {
			t.Fatal(err)
		}
	}
	if n := count(t, s, "SELECT COUNT(*) FROM gpu_samples"); n != 2 {
		t.Errorf("%d samples stored; want 2", n)
	}
	if n := count(t, s, "SELECT COUNT(*) FROM gpu_processes WHERE job_id = 'j1'"); n != 1 {
		t.Errorf("%d process rows stored; want 1", n)
	}
}

func TestTelemetryQueryAggregatesWindowsPerGPU(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	var rows []TelemetryRow
	for i := range 6 {
		rows = append(rows, telemetryRow("GPU-a", base.Add(time.Duration(i)*time.Second), float64(i)))
		rows = append(rows, telemetryRow("GPU-b", base.Add(time.Duration(i)*time.Second), float64(10*i)))
	}
	delete(rows[0].Values, "util_gpu_pct") // not read: left out of the mean
	if err := s.WriteTelemetry(ctx, rows); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		q    TelemetryQuery
		want map[string][]float64
	}{
		{name: "mean over 2 s windows leaves out fields not read",
			q:    TelemetryQuery{Field: "util_gpu_pct", GPUs: []string{"GPU-a"}, Start: base, End: base.Add(6 * time.Second), Step: 2 * time.Second},
			want: map[string][]float64{"GPU-a": {1, 2.5, 4.5}}},
		{name: "max over 3 s windows for every GPU",
			q:    TelemetryQuery{Field: "util_gpu_pct", Start: base, End: base.Add(6 * time.Second), Step: 3 * time.Second, Agg: "max"},
			want: map[string][]float64{"GPU-a": {2, 5}, "GPU-b": {20, 50}}},
		{name: "last of each window",
			q:    TelemetryQuery{Field: "power_w", GPUs: []string{"GPU-b"}, Start: base, End: base.Add(4 * time.Second), Step: 2 * time.Second, Agg: "last"},
			want: map[string][]float64{"GPU-b": {110, 130}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.QueryTelemetry(ctx, tt.q)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("%d series; want %d", len(got), len(tt.want))
			}
			for _, ser := range got {
				want := tt.want[ser.GPUUUID]
				if len(ser.Points) != len(want) {
					t.Fatalf("%s: points %+v; want values %v", ser.GPUUUID, ser.Points, want)
				}
				for i, p := range ser.Points {
					if p.Value != want[i] || !p.Time.Equal(tt.q.Start.Add(time.Duration(i)*tt.q.Step)) {
						t.Errorf("%s point %d = %v at %s; want %v at %s", ser.GPUUUID, i, p.Value, p.Time, want[i], tt.q.Start.Add(time.Duration(i)*tt.q.Step))
					}
				}
			}
		})
	}
}

func TestTelemetryBadInputSaysWhatIsWrong(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		q    TelemetryQuery
		want string
	}{
		{"an unknown field lists the fields", TelemetryQuery{Field: "watts", Start: base, End: base.Add(time.Hour), Step: time.Minute}, "the fields are util_gpu_pct"},
		{"a zero step is refused", TelemetryQuery{Field: "power_w", Start: base, End: base.Add(time.Hour)}, "step 0s"},
		{"an empty range is refused", TelemetryQuery{Field: "power_w", Start: base, End: base, Step: time.Minute}, "is empty"},
		{"an unknown aggregate is refused", TelemetryQuery{Field: "power_w", Start: base, End: base.Add(time.Hour), Step: time.Minute, Agg: "p99"}, `aggregate "p99"`},
	} {
		if _, err := s.QueryTelemetry(ctx, tc.q); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v; want one containing %q", tc.name, err, tc.want)
		}
	}
	bad := telemetryRow("GPU-a", base, 1)
	bad.Values["watts"] = 1
	if err := s.WriteTelemetry(ctx, []TelemetryRow{bad}); err == nil || !strings.Contains(err.Error(), `unknown field "watts"`) {
		t.Errorf("WriteTelemetry with an unknown field: %v", err)
	}
}
