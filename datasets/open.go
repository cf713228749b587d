package datasets

import (
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// gzipMagic is how every gzip stream begins.
const gzipMagic = "\x1f\x8b"

// OpenFile opens a plain or gzip-compressed file and returns its
// (decompressed) content. Gzip is recognised by its magic bytes, not by the
// file's name.
func OpenFile(path string) (io.ReadCloser, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	br := bufio.NewReaderSize(f, 64<<10)
	head, err := br.Peek(len(gzipMagic))
	if err != nil && !errors.Is(err, io.EOF) {
		f.Close()
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if string(head) != gzipMagic {
		return &readCloser{Reader: br, close: f.Close}, nil
	}
	zr, err := gzip.NewReader(br)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("read %s: gzip: %w", path, err)
	}
	return &readCloser{Reader: zr, close: func() error { return errors.Join(zr.Close(), f.Close()) }}, nil
}

type readCloser struct {
	io.Reader
	close func() error
}

func (r *readCloser) Close() error { return r.close() }

// timeLayouts are the layouts ParseTime accepts, tried in order. Layouts
// without a zone read as UTC.
var timeLayouts = []string{
	"2006-01-02 15:04:05",
	time.RFC3339Nano,
	"2006-01-02",
	"2006-01-02 15:04:05.999999999",
	"2006-01-02T15:04:05.999999999",
}

// ParseTime reads a time written as "YYYY-MM-DD", "YYYY-MM-DD HH:MM:SS"
// (optionally with fractional seconds) or RFC 3339. A time without a zone is
// UTC; the result is always in UTC, and in the years 1 to 9999 so that it
// can be written back in the same forms.
func ParseTime(s string) (time.Time, error) {
	t := strings.TrimSpace(s)
	for _, layout := range timeLayouts {
		v, err := time.Parse(layout, t)
		if err != nil {
			continue
		}
		if v = v.UTC(); v.Year() < 1 || v.Year() > 9999 {
			return time.Time{}, fmt.Errorf("%q is outside the years 1 to 9999 in UTC", s)
		}
		return v, nil
	}
	return time.Time{}, fmt.Errorf("%q is not a time (want YYYY-MM-DD, YYYY-MM-DD HH:MM:SS or RFC 3339)", s)
}
