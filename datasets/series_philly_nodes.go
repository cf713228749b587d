package datasets

import (
	"errors"
	"io"
)

// The Philly per-minute count of active nodes (HeliosArtifact's
// philly_node_sequence.csv):
//
//	time,active,total
//	2017-10-03 00:00:00,312,420
//
// Values are the idle nodes, total − active, and Capacity is total. The
// file has rows with more active nodes than total (22 in the published
// one); they read as no idle node rather than as an error.
const phillyNodesDoc = "Philly node sequence (time,active,total): idle nodes (total − active, at least 0) per minute; " +
	"one series per file, named after it"

var phillyNodesColumns = []string{"time", "active", "total"}

func init() {
	registerSeries(SeriesFormat{Name: "philly-nodes", Doc: phillyNodesDoc, Read: readPhillyNodesSeries})
}

func readPhillyNodesSeries(r io.Reader, file string) ([]Series, error) {
	t, err := newCSVTable(r, file, phillyNodesColumns)
	if err != nil {
		return nil, err
	}
	s := Series{ID: seriesIDFromFile(file)}
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
		v, err := t.counts(countColumn{"active", maxPoolUnits}, countColumn{"total", maxPoolUnits})
		if err != nil {
			return nil, err
		}
		s.Times = append(s.Times, at)
		s.Values = append(s.Values, float64(max(v[1]-v[0], 0)))
		s.Capacity = append(s.Capacity, float64(v[1]))
	}
	if len(s.Times) == 0 {
		return nil, &ParseError{File: file, Line: 1, Err: errors.New("no rows")}
	}
	return []Series{s}, nil
}
