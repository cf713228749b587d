package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
)

// report is what a reporting command prints: one JSON object with --output
// json (snake_case keys, SI units in the names), a table otherwise.
type report interface {
	writeTable(w io.Writer) error
}

// print writes r in the format --output chose.
func (g *globals) print(w io.Writer, r report) error {
	if g.output == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	return r.writeTable(w)
}

// table is a tab-aligned two-or-more column writer for reports.
type table struct {
	tw  *tabwriter.Writer
	err error
}

func newTable(w io.Writer) *table {
	return &table{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)}
}

// row writes one line; cells are separated by tabs.
func (t *table) row(cells ...any) {
	if t.err != nil {
		return
	}
	for i, c := range cells {
		sep := "\t"
		if i == len(cells)-1 {
			sep = "\n"
		}
		if _, err := fmt.Fprint(t.tw, c, sep); err != nil {
			t.err = err
			return
		}
	}
}

func (t *table) flush() error {
	if t.err != nil {
		return t.err
	}
	return t.tw.Flush()
}
