package datasets

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"time"
)

// The Alibaba GenAI trace's per-container metrics (cluster-trace-v2026-GenAI,
// e.g. pod_gpu_memory_used_bytes_anon.csv): one sample per row, rows not
// grouped by container.
//
//	timestamp_anon,value,container_ip
//	1662858720.0,23497801728.0,81202f3feffc31e32dbfcb7c74b72b61
//
// timestamp_anon is in seconds (shifted), value the metric (scaled by the
// publisher: the units are the file's), container_ip the container (hashed).
const genaiMemoryDoc = "Alibaba GenAI pod GPU memory used (pod_gpu_memory_used_bytes_anon.csv: timestamp_anon,value,container_ip); " +
	"values scaled by the publisher, in the file's units; one series per container"

var genaiColumns = []string{"timestamp_anon", "value", "container_ip"}

func init() {
	registerSeries(SeriesFormat{Name: "genai-memory", Doc: genaiMemoryDoc, Read: readGenaiSeries})
}

// maxGenaiSeconds bounds timestamps to those time.Time holds comfortably
// (about year 5138).
const maxGenaiSeconds = 1e11

// readGenaiSeries reads a GenAI metric file into one series per container,
// sorted by time; a container sampled twice at the same second is an
// error naming both lines.
func readGenaiSeries(r io.Reader, file string) ([]Series, error) {
	return readGenaiMetric(r, file, math.Inf(1))
}

// readGenaiMetric is readGenaiSeries with values above maxValue refused.
func readGenaiMetric(r io.Reader, file string, maxValue float64) ([]Series, error) {
	t, err := newCSVTable(r, file, genaiColumns)
	if err != nil {
		return nil, err
	}
	type sample struct {
		at   float64
		v    float64
		line int
	}
	byID := map[string][]sample{}
	colT, colV, colID := t.col("timestamp_anon"), t.col("value"), t.col("container_ip")
	for {
		err := t.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		at, err := strconv.ParseFloat(t.rec[colT], 64)
		if err != nil || math.IsNaN(at) || at < 0 || at > maxGenaiSeconds {
			return nil, t.fieldError(colT, fmt.Errorf("want seconds between 0 and %g", maxGenaiSeconds))
		}
		v, err := strconv.ParseFloat(t.rec[colV], 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, t.fieldError(colV, errNotFinite)
		}
		if v < 0 {
			return nil, t.fieldError(colV, errNegative)
		}
		if v > maxValue {
			return nil, t.fieldError(colV, fmt.Errorf("%w (over %g)", errTooLarge, maxValue))
		}
		id := t.rec[colID]
		if id == "" {
			return nil, t.fieldError(colID, errEmpty)
		}
		byID[id] = append(byID[id], sample{at, v, t.line})
	}
	out := make([]Series, 0, len(byID))
	for _, id := range slices.Sorted(func(yield func(string) bool) {
		for k := range byID {
			if !yield(k) {
				return
			}
		}
	}) {
		ss := byID[id]
		slices.SortStableFunc(ss, func(a, b sample) int { return cmp.Compare(a.at, b.at) })
		s := Series{ID: id, Times: make([]time.Time, len(ss)), Values: make([]float64, len(ss))}
		for i, x := range ss {
			if i > 0 && x.at == ss[i-1].at {
				return nil, &ParseError{File: file, Line: x.line, Field: "timestamp_anon", Value: strconv.FormatFloat(x.at, 'f', -1, 64),
					Err: fmt.Errorf("container %s sampled twice at this time (also line %d)", id, ss[i-1].line)}
			}
			sec, frac := math.Modf(x.at)
			s.Times[i] = time.Unix(int64(sec), int64(frac*1e9)).UTC()
			s.Values[i] = x.v
		}
		out = append(out, s)
	}
	return out, nil
}
