package datasets

import (
	"errors"
	"io"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseTime(t *testing.T) {
	utc := func(y int, mo time.Month, d, h, mi, s, ns int) time.Time {
		return time.Date(y, mo, d, h, mi, s, ns, time.UTC)
	}
	tests := []struct {
		name, in string
		want     time.Time
	}{
		{"a date alone is midnight UTC", "2017-10-09", utc(2017, 10, 9, 0, 0, 0, 0)},
		{"a date and time without zone is UTC", "2017-10-09 07:01:55", utc(2017, 10, 9, 7, 1, 55, 0)},
		{"fractional seconds are kept", "2017-10-09 07:01:55.25", utc(2017, 10, 9, 7, 1, 55, 250e6)},
		{"RFC 3339 with Z", "2017-10-09T07:01:55Z", utc(2017, 10, 9, 7, 1, 55, 0)},
		{"RFC 3339 with an offset is converted to UTC", "2017-10-09T09:01:55+02:00", utc(2017, 10, 9, 7, 1, 55, 0)},
		{"surrounding spaces are ignored", " 2017-10-09 ", utc(2017, 10, 9, 0, 0, 0, 0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseTime(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if !got.Equal(tt.want) || got.Location() != time.UTC {
				t.Errorf("ParseTime(%q) = %v, want %v in UTC", tt.in, got, tt.want)
			}
		})
	}
	for _, bad := range []string{"", "yesterday", "2017-13-01", "2017-10-09 25:00:00", "10/09/2017",
		"0000-06-01", "9999-12-31T23:30:00-01:00"} { // the last two fall outside years 1..9999 in UTC
		if _, err := ParseTime(bad); err == nil {
			t.Errorf("ParseTime(%q) succeeded, want an error", bad)
		}
	}
}

func TestOpenFileReadsPlainAndGzipByContent(t *testing.T) {
	data := readTestdata(t, "philly_small.csv")
	for name, path := range map[string]string{
		"plain file":                  writeTemp(t, data, "plain.csv.gz"), // a misleading name changes nothing
		"gzip file without .gz name":  gzipToTemp(t, data, "packed.csv"),
		"gzip file with a .gz suffix": gzipToTemp(t, data, "packed.csv.gz"),
	} {
		t.Run(name, func(t *testing.T) {
			rc, err := OpenFile(path)
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			got, err := io.ReadAll(rc)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(data) {
				t.Errorf("content differs from the fixture")
			}
		})
	}
	t.Run("an empty file reads as empty", func(t *testing.T) {
		rc, err := OpenFile(writeTemp(t, nil, "empty"))
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		if got, _ := io.ReadAll(rc); len(got) != 0 {
			t.Errorf("read %d bytes", len(got))
		}
	})
	t.Run("a missing file is an error", func(t *testing.T) {
		if _, err := OpenFile(filepath.Join(t.TempDir(), "nope")); err == nil {
			t.Error("no error")
		}
	})
}

// TestEveryTraceFormatReadsGzipLikePlain reads each format's fixture plain
// and gzip-compressed through ReadTrace and wants the same jobs.
func TestEveryTraceFormatReadsGzipLikePlain(t *testing.T) {
	fixtures := map[string]string{
		"philly":    "philly_small.csv",
		"openb":     "openb_small.csv",
		"prescient": "prescient_golden.jsonl",
		"slurm":     "sacct_small.txt",
		"swf":       "swf_small.swf",
	}
	for _, f := range TraceFormats() {
		t.Run(f.Name, func(t *testing.T) {
			name, ok := fixtures[f.Name]
			if !ok {
				t.Fatalf("format %s has no fixture in this test", f.Name)
			}
			data := readTestdata(t, name)
			plain, err := ReadTrace(f.Name+":"+writeTemp(t, data, name), ReadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			packed, err := ReadTrace(f.Name+":"+gzipToTemp(t, data, name), ReadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(plain.Jobs) == 0 || !reflect.DeepEqual(plain, packed) {
				t.Errorf("gzip read differs from plain read (%d vs %d jobs)", len(packed.Jobs), len(plain.Jobs))
			}
		})
	}
}

func TestReadTraceSpecErrorsListTheFormats(t *testing.T) {
	for _, spec := range []string{"phily:x.csv", "philly", "x.csv", ":x.csv", "philly:"} {
		t.Run(spec, func(t *testing.T) {
			_, err := ReadTrace(spec, ReadOptions{})
			if err == nil {
				t.Fatal("no error")
			}
			for _, want := range []string{"philly", "openb", "prescient", "FORMAT:PATH"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %q", err, want)
				}
			}
		})
	}
}

func TestReadTraceOfAMissingFileNamesIt(t *testing.T) {
	_, err := ReadTrace("philly:/no/such/philly_jobs.csv", ReadOptions{})
	if err == nil || !strings.Contains(err.Error(), "/no/such/philly_jobs.csv") {
		t.Errorf("error = %v, want one naming the path", err)
	}
}

func TestTraceFormatsAreSortedAndDocumented(t *testing.T) {
	var names []string
	for _, f := range TraceFormats() {
		names = append(names, f.Name)
		if f.Doc == "" || f.Read == nil {
			t.Errorf("format %s lacks a doc or a reader", f.Name)
		}
	}
	if want := []string{"openb", "philly", "prescient", "slurm", "swf"}; !reflect.DeepEqual(names, want) {
		t.Errorf("TraceFormats() = %v, want %v", names, want)
	}
}

func TestParseErrorReadsLikeACompilerMessage(t *testing.T) {
	err := error(&ParseError{File: "philly_jobs.csv", Line: 12, Field: "duration", Value: "abc", Err: errNotNumber})
	if got, want := err.Error(), `philly_jobs.csv:12: field duration: "abc": not a number`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(err, errNotNumber) {
		t.Error("Unwrap does not reach the cause")
	}
	row := &ParseError{File: "f.csv", Line: 3, Err: errors.New("row has 4 fields, the header 5")}
	if got, want := row.Error(), "f.csv:3: row has 4 fields, the header 5"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	long := &ParseError{File: "f", Line: 1, Field: "x", Value: strings.Repeat("v", 1000), Err: errEmpty}
	if len(long.Error()) > 200 {
		t.Errorf("a long value is repeated whole: %d bytes", len(long.Error()))
	}
}

func TestBadReadOptionsAreRejected(t *testing.T) {
	for _, tt := range []struct {
		opt  ReadOptions
		want string
	}{
		{ReadOptions{MaxErrors: -1}, "max errors"},
		{ReadOptions{Epoch: time.Date(9990, 1, 1, 0, 0, 0, 0, time.UTC)}, "epoch"},
	} {
		for _, f := range TraceFormats() {
			_, err := f.Read(strings.NewReader(""), "x", tt.opt)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%s: error = %v, want one about %s", f.Name, err, tt.want)
			}
		}
	}
}
