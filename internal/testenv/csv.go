package testenv

import (
	"encoding/csv"
	"os"
	"slices"
	"testing"
)

// DatasetCSV reads a CSV file of the shared datasets whole: the column
// index of each header name and the rows after the header.
func DatasetCSV(t testing.TB, parts ...string) (col map[string]int, rows [][]string) {
	t.Helper()
	f, err := os.Open(Dataset(t, parts...))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	all, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) == 0 {
		t.Fatalf("%v: no header", parts)
	}
	col = map[string]int{}
	for i, h := range all[0] {
		col[h] = i
	}
	return col, all[1:]
}

// Median is the median of v (the mean of the middle two for an even
// count); it sorts v.
func Median(v []float64) float64 {
	slices.Sort(v)
	if len(v)%2 == 0 {
		return (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return v[len(v)/2]
}
