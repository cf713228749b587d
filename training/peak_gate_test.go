package training

import "testing"

func TestPeakBetterPrefersCoverageThenTheSmallerReservation(t *testing.T) {
	row := func(cov, res float64) map[string]float64 {
		return map[string]float64{"p90_coverage": cov, "mean_reservation_vs_peak_x1_2": res}
	}
	for _, tc := range []struct {
		a, b map[string]float64
		want bool
	}{
		{row(0.91, 1.1), row(0.89, 0.8), true},  // covering the goal beats a smaller reservation
		{row(0.89, 0.8), row(0.91, 1.1), false}, // and the other way round
		{row(0.93, 0.9), row(0.95, 1.0), true},  // both cover: the smaller reservation
		{row(0.95, 1.0), row(0.93, 0.9), false},
		{row(0.85, 2.0), row(0.80, 0.5), true},  // neither covers: the higher coverage
		{row(0.92, 1.0), row(0.92, 1.0), false}, // equal: not better, so a retraining passes the gate
	} {
		if got := peakBetter(tc.a, tc.b); got != tc.want {
			t.Errorf("peakBetter(%v, %v) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}
