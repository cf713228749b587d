package datasets

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/prescient-sched/prescient/cluster"
)

// csvTable reads a CSV file with a header row, by column name. Fields are
// trimmed of surrounding spaces (the Philly machine list puts a space after
// each comma).
type csvTable struct {
	file   string
	r      *csv.Reader
	header []string
	cols   map[string]int
	rec    []string
	line   int // line of the current record, 1-based, the header being line 1
}

// newCSVTable reads the header and checks that every wanted column is there.
// Extra columns are allowed; a missing or renamed one is an error naming it.
func newCSVTable(r io.Reader, file string, want []string) (*csvTable, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	t := &csvTable{file: file, r: cr, cols: make(map[string]int, len(want))}
	header, err := cr.Read()
	switch {
	case errors.Is(err, io.EOF):
		return nil, &ParseError{File: file, Line: 1, Err: errors.New("empty file: no header")}
	case err != nil:
		return nil, headerError(file, err)
	}
	t.header = make([]string, len(header))
	for i, h := range header {
		t.header[i] = strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))
		if _, dup := t.cols[t.header[i]]; dup {
			return nil, &ParseError{File: file, Line: 1, Err: fmt.Errorf("header: column %q appears twice", t.header[i])}
		}
		t.cols[t.header[i]] = i
	}
	for _, w := range want {
		if _, ok := t.cols[w]; !ok {
			return nil, &ParseError{File: file, Line: 1, Err: fmt.Errorf("header: column %q is missing (want %s; have %s)",
				w, strings.Join(want, ","), strings.Join(t.header, ","))}
		}
	}
	return t, nil
}

func headerError(file string, err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return &ParseError{File: file, Line: 1, Err: fmt.Errorf("header: %w", pe.Err)}
	}
	return fmt.Errorf("read %s: %w", file, err)
}

// next reads the next record. It returns io.EOF at the end, a *ParseError
// for a malformed row (the read may go on) and any other error for a
// failure of the underlying reader (it may not).
func (t *csvTable) next() error {
	rec, err := t.r.Read()
	if err != nil {
		return t.readError(err)
	}
	t.rec = rec
	t.line, _ = t.r.FieldPos(0)
	if len(rec) != len(t.header) {
		return &ParseError{File: t.file, Line: t.line, Err: fmt.Errorf("row has %d fields, the header %d", len(rec), len(t.header))}
	}
	for i := range rec {
		rec[i] = strings.TrimSpace(rec[i])
	}
	return nil
}

func (t *csvTable) readError(err error) error {
	if errors.Is(err, io.EOF) {
		return io.EOF
	}
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		t.line = pe.StartLine
		return &ParseError{File: t.file, Line: pe.StartLine, Err: pe.Err}
	}
	return fmt.Errorf("read %s: %w", t.file, err)
}

// col returns the index of a column checked by newCSVTable.
func (t *csvTable) col(name string) int { return t.cols[name] }

// has reports whether the header has a column, for columns a format may
// lack (newCSVTable checks only those it must have).
func (t *csvTable) has(name string) bool {
	_, ok := t.cols[name]
	return ok
}

// fieldError builds the error for a bad value in column col of the current row.
func (t *csvTable) fieldError(col int, err error) *ParseError {
	return &ParseError{File: t.file, Line: t.line, Field: t.header[col], Value: t.rec[col], Err: err}
}

// rowParser turns the current row of a table into a job. Its errors are
// *ParseError values.
type rowParser func(t *csvTable) (cluster.Job, error)

// readCSVJobs reads a CSV trace: the header, then one job per row.
func readCSVJobs(r io.Reader, file string, opt ReadOptions, columns []string, checkIDs bool, parse rowParser) (Result, error) {
	if err := opt.Validate(); err != nil {
		return Result{}, err
	}
	t, err := newCSVTable(r, file, columns)
	if err != nil {
		return Result{}, err
	}
	sink := newJobSink(opt, checkIDs)
	for {
		err := t.next()
		if errors.Is(err, io.EOF) {
			return sink.result(), nil
		}
		if err == nil {
			var job cluster.Job
			if job, err = parse(t); err == nil {
				err = sink.add(job, t.file, t.line)
			}
		}
		if err := sink.handle(err); err != nil {
			return Result{}, err
		}
	}
}

// countColumn names an integer column and the largest value it may hold.
type countColumn struct {
	name  string
	limit int64
}

// counts reads non-negative integer columns of the current row, in order.
func (t *csvTable) counts(cols ...countColumn) ([]int64, error) {
	vals := make([]int64, len(cols))
	for i, c := range cols {
		v, err := parseCount(t.rec[t.col(c.name)], c.limit)
		if err != nil {
			return nil, t.fieldError(t.col(c.name), err)
		}
		vals[i] = v
	}
	return vals, nil
}
