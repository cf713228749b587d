package collector_test

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/prescient-sched/prescient/collector"
)

// validSegment returns the bytes of a spool segment holding two batches.
func validSegment(f *testing.F) []byte {
	var seg []byte
	for _, b := range [][]collector.Sample{samples("GPU-a", t0, 2), samples("GPU-b", t0, 1)} {
		rec, err := collector.EncodeRecord(b)
		if err != nil {
			f.Fatal(err)
		}
		seg = append(seg, rec...)
	}
	return seg
}

// A spool segment left by a crash or damaged on disk never makes the
// record reader panic, allocate for a length it cannot read, or report a
// size other than what it consumed. (OpenSpool on damaged segments is
// covered by TestSpoolSurvivesDamagedSegments; with the file system in
// every run the fuzzer stalls.)
func FuzzSpoolSegment(f *testing.F) {
	seg := validSegment(f)
	f.Add(seg)
	f.Add(seg[:len(seg)-3])
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		var read int64
		for {
			payload, _, size, err := collector.ReadRecord(r)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				if !errors.Is(err, collector.ErrCorruptRecord) {
					t.Fatalf("error %v does not wrap ErrCorruptRecord", err)
				}
				break
			}
			if size != int64(len(payload))+12 {
				t.Fatalf("size %d for a payload of %d", size, len(payload))
			}
			read += size
		}
		if read > int64(len(data)) {
			t.Fatalf("read %d bytes of %d", read, len(data))
		}
	})
}

func FuzzParseEnviron(f *testing.F) {
	f.Add([]byte("A=1\x00PRESCIENT_JOB_ID=j1\x00"))
	f.Add([]byte("PRESCIENT_JOB_ID=\x00PRESCIENT_JOB_ID=x y"))
	f.Fuzz(func(t *testing.T, data []byte) {
		id, ok := collector.ParseEnviron(data)
		if ok && (id == "" || strings.ContainsAny(id, " \x00\n") || !bytes.Contains(data, []byte("PRESCIENT_JOB_ID="+id))) {
			t.Fatalf("ParseEnviron gave %q from %q", id, data)
		}
	})
}

func FuzzParseCgroup(f *testing.F) {
	f.Add([]byte("0::/kubepods.slice/kubepods-pod01234567_89ab_cdef_0123_456789abcdef.slice/x.scope\n"))
	f.Add([]byte("0::/prescient/j-9/\n1:cpu:/prescient-job-x.scope"))
	f.Add([]byte("::"))
	f.Fuzz(func(t *testing.T, data []byte) {
		id, ok := collector.ParseCgroup(data)
		if ok && (id == "" || id == "pod:" || strings.ContainsAny(id, "/\n")) {
			t.Fatalf("ParseCgroup gave %q from %q", id, data)
		}
	})
}
