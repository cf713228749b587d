package sim

import (
	"fmt"
	"testing"
)

func TestPeriodicStretches(t *testing.T) {
	xs := []float64{0, 1, 2, 3, 4}
	for _, tc := range []struct {
		from, to int
		want     string
	}{
		{0, 4, "[0 1 2 3 4]"}, {6, 8, "[1 2 3]"}, {3, 6, "[3 4 0 1]"}, {4, 15, "[4 0 1 2 3 4 0 1 2 3 4 0]"}, {7, 7, "[2]"},
	} {
		got := periodic(xs, tc.from, tc.to)
		if fmt.Sprint(got) != tc.want {
			t.Errorf("minutes %d..%d: %v, want %s", tc.from, tc.to, got, tc.want)
		}
		if len(got) > 0 && cap(got) > len(got) {
			t.Errorf("minutes %d..%d: capacity %d beyond the stretch: an append would write into the series", tc.from, tc.to, cap(got))
		}
	}
}
