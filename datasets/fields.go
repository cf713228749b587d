package datasets

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
)

// MaxJobGPUs is the most GPUs a job read from a trace may ask for; more is
// an error.
const MaxJobGPUs = 100000

// Bounds on other values read from outside. They are far above anything
// real and keep a corrupt row from overflowing a time.Duration.
const (
	// maxSeconds bounds durations and time offsets: 50 years.
	maxSeconds = 50 * 365 * 24 * 3600
	// maxMilliCPU bounds cpu_milli: a million cores.
	maxMilliCPU = 1_000_000_000
	// maxMiB bounds memory in MiB: one exbibyte.
	maxMiB = 1 << 40
)

// parseSeconds reads a duration written in seconds, possibly fractional.
func parseSeconds(s string) (time.Duration, error) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, errNotNumber
	}
	return secondsToDuration(v)
}

// secondsToDuration converts seconds to a Duration, rejecting NaN, infinities,
// negative and huge values.
func secondsToDuration(v float64) (time.Duration, error) {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return 0, errNotFinite
	case v < 0:
		return 0, errNegative
	case v > maxSeconds:
		return 0, fmt.Errorf("%w (over %d s)", errTooLarge, maxSeconds)
	}
	// Whole and fractional seconds apart, so that what Duration.Seconds
	// wrote comes back to the nanosecond (for up to 2^23 s, about 97 days,
	// where a float64 still resolves nanoseconds).
	whole := math.Trunc(v)
	return time.Duration(whole)*time.Second + time.Duration(math.Round((v-whole)*1e9)), nil
}

// parseCount reads a non-negative integer no larger than limit.
func parseCount(s string, limit int64) (int64, error) {
	v, err := strconv.ParseInt(s, 10, 64)
	if errors.Is(err, strconv.ErrRange) {
		if v < 0 {
			return 0, errNegative
		}
		return 0, fmt.Errorf("%w (over %d)", errTooLarge, limit)
	}
	if err != nil {
		if _, ferr := strconv.ParseFloat(s, 64); ferr == nil {
			return 0, errNotInteger
		}
		return 0, errNotNumber
	}
	return checkCount(v, limit)
}

func checkCount(v, limit int64) (int64, error) {
	if v < 0 {
		return 0, errNegative
	}
	if v > limit {
		return 0, fmt.Errorf("%w (over %d)", errTooLarge, limit)
	}
	return v, nil
}
