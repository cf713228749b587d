package datasets

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"
)

// CarbonPoint is the grid's carbon intensity from a time on.
type CarbonPoint struct {
	Time    time.Time
	GPerKWh float64 // grams of CO2 per kWh
}

// carbonColumns are the columns of a carbon-intensity file:
//
//	time,gco2_per_kwh
//	2017-11-10 00:00:00,412.5
//
// Times as ParseTime reads them (UTC without a zone), strictly increasing.
var carbonColumns = []string{"time", "gco2_per_kwh"}

// maxCarbonPoints bounds a series (ten years of minutes).
const maxCarbonPoints = 10 * 366 * 24 * 60

// ReadCarbon reads a carbon-intensity series from a plain or gzip CSV file.
func ReadCarbon(path string) ([]CarbonPoint, error) {
	rc, err := OpenFile(path)
	if err != nil {
		return nil, fmt.Errorf("carbon series: %w", err)
	}
	pts, err := readCarbon(rc, path)
	if err != nil {
		rc.Close()
		return nil, err
	}
	return pts, closeError(rc, path)
}

// readCarbon parses the CSV; a bad row is an error naming the file, the
// line and the field.
func readCarbon(r io.Reader, file string) ([]CarbonPoint, error) {
	t, err := newCSVTable(r, file, carbonColumns)
	if err != nil {
		return nil, err
	}
	var pts []CarbonPoint
	for {
		err := t.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		p, err := carbonRow(t, pts)
		if err != nil {
			return nil, err
		}
		if pts = append(pts, p); len(pts) > maxCarbonPoints {
			return nil, &ParseError{File: file, Line: t.line, Err: fmt.Errorf("more than %d points", maxCarbonPoints)}
		}
	}
	if len(pts) == 0 {
		return nil, &ParseError{File: file, Line: 1, Err: errors.New("no points after the header")}
	}
	return pts, nil
}

func carbonRow(t *csvTable, before []CarbonPoint) (CarbonPoint, error) {
	colT, colV := t.col("time"), t.col("gco2_per_kwh")
	at, err := ParseTime(t.rec[colT])
	if err != nil {
		return CarbonPoint{}, t.fieldError(colT, err)
	}
	if n := len(before); n > 0 && !at.After(before[n-1].Time) {
		return CarbonPoint{}, t.fieldError(colT, errors.New("not after the time of the row before"))
	}
	v, err := strconv.ParseFloat(t.rec[colV], 64)
	if err != nil || math.IsNaN(v) || v < 0 || v > 5000 {
		return CarbonPoint{}, t.fieldError(colV, errors.New("want gCO2/kWh in 0..5000"))
	}
	return CarbonPoint{Time: at, GPerKWh: v}, nil
}
