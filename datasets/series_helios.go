package datasets

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"
)

// The SenseTime Helios per-minute virtual-cluster series
// (HeliosArtifact's Earth_vcs/<vc>/cluster_sequence_vc.csv), one file per
// virtual cluster:
//
//	time,...,total_gpu_num,running_gpu_num,pending_gpu_num,idle_gpu_num,...
//	2020-05-01 00:00:00,...,64,59,0,5,...
//
// Values are idle_gpu_num, Capacity total_gpu_num and Demand
// pending_gpu_num (GPUs asked for by queued jobs). The series' ID is the
// file's name up to its first underscore (vc3sl_cluster_sequence_vc.csv.gz
// → vc3sl), so that a folder of them reads as one series per cluster.
const heliosDoc = "SenseTime Helios virtual-cluster sequence (time,total_gpu_num,pending_gpu_num,idle_gpu_num,...): " +
	"idle GPUs per minute, with the cluster's size and its queued GPU demand; one series per file"

var heliosColumns = []string{"time", "total_gpu_num", "pending_gpu_num", "idle_gpu_num"}

// maxPoolUnits bounds the GPU or node counts of a pool series.
const maxPoolUnits = 10_000_000

func init() {
	registerSeries(SeriesFormat{Name: "helios", Doc: heliosDoc, Read: readHeliosSeries})
}

func readHeliosSeries(r io.Reader, file string) ([]Series, error) {
	t, err := newCSVTable(r, file, heliosColumns)
	if err != nil {
		return nil, err
	}
	s := Series{ID: seriesIDFromFile(file)}
	colIdle := t.col("idle_gpu_num")
	for {
		err := t.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		at, err := t.seriesTime(s.Times)
		if err != nil {
			return nil, err
		}
		v, err := t.counts(countColumn{"total_gpu_num", maxPoolUnits}, countColumn{"pending_gpu_num", maxPoolUnits},
			countColumn{"idle_gpu_num", maxPoolUnits})
		if err != nil {
			return nil, err
		}
		total, pending, idle := v[0], v[1], v[2]
		if idle > total {
			return nil, t.fieldError(colIdle, fmt.Errorf("more idle GPUs than the cluster's %d", total))
		}
		s.Times = append(s.Times, at)
		s.Values = append(s.Values, float64(idle))
		s.Capacity = append(s.Capacity, float64(total))
		s.Demand = append(s.Demand, float64(pending))
	}
	if len(s.Times) == 0 {
		return nil, &ParseError{File: file, Line: 1, Err: errors.New("no rows")}
	}
	return []Series{s}, nil
}

// seriesTime reads the current row's "time" column, which must come after
// the previous row's (the last of times).
func (t *csvTable) seriesTime(times []time.Time) (time.Time, error) {
	col := t.col("time")
	at, err := ParseTime(t.rec[col])
	if err != nil {
		return time.Time{}, t.fieldError(col, err)
	}
	if n := len(times); n > 0 && !at.After(times[n-1]) {
		return time.Time{}, t.fieldError(col, fmt.Errorf("not after the previous row's %s", times[n-1].Format(time.DateTime)))
	}
	return at, nil
}

// seriesIDFromFile names a series after its file: the base name up to the
// first underscore or dot.
func seriesIDFromFile(file string) string {
	base := filepath.Base(file)
	if i := strings.IndexAny(base, "_."); i > 0 {
		return base[:i]
	}
	return base
}
