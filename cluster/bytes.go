package cluster

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

var byteUnits = []struct {
	suffix string
	factor float64
}{
	// Longest suffixes first so that "GiB" is not read as "B".
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"B", 1},
}

// ParseBytes reads a byte quantity: a plain integer of bytes, or a number with
// a unit, binary (KiB, MiB, GiB, TiB, or Ki, Mi, Gi, Ti as Kubernetes writes
// them) or decimal (KB, MB, GB, TB).
func ParseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	factor := 1.0
	for _, u := range byteUnits {
		if strings.HasSuffix(t, u.suffix) {
			factor = u.factor
			t = strings.TrimSpace(strings.TrimSuffix(t, u.suffix))
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%q is not a byte quantity (e.g. 80GiB, 512Mi, 16000000000)", s)
	}
	b := v * factor
	if b < 0 || b >= 1<<63 {
		return 0, fmt.Errorf("byte quantity %q is out of range", s)
	}
	return int64(math.Round(b)), nil
}
