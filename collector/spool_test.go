package collector_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/prescient-sched/prescient/collector"
)

func openSpool(t *testing.T, dir string, max int64) *collector.Spool {
	t.Helper()
	s, err := collector.OpenSpool(dir, max, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// drain peeks and acks everything the spool holds.
func drain(t *testing.T, s *collector.Spool) []collector.Sample {
	t.Helper()
	var out []collector.Sample
	for {
		b, tok, ok, err := s.Peek()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return out
		}
		out = append(out, b...)
		if err := s.Ack(tok, len(b)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestSpoolGivesBatchesBackInOrderAcrossARestart(t *testing.T) {
	dir := t.TempDir()
	s := openSpool(t, dir, 64<<20)
	all := samples("GPU-a", t0, 30)
	for i := 0; i < 30; i += 10 {
		if err := s.Append(all[i : i+10]); err != nil {
			t.Fatal(err)
		}
	}
	// Write the first batch, then "crash" (close without writing the rest).
	b, tok, ok, err := s.Peek()
	if err != nil || !ok || len(b) != 10 || !b[0].Time.Equal(all[0].Time) {
		t.Fatalf("Peek = %d samples, %v, %v", len(b), ok, err)
	}
	if err := s.Ack(tok, len(b)); err != nil {
		t.Fatal(err)
	}
	s.Close()

	s2 := openSpool(t, dir, 64<<20)
	got := drain(t, s2)
	if len(got) != 20 {
		t.Fatalf("after restart the spool gave %d samples; want the 20 not acknowledged", len(got))
	}
	for i, g := range got {
		if !g.Time.Equal(all[10+i].Time) || g.PowerW != all[10+i].PowerW || g.Processes[0].JobID != "job-1" {
			t.Fatalf("sample %d = %+v; want %+v", i, g, all[10+i])
		}
	}
	if s2.Bytes() != 0 {
		t.Errorf("drained spool holds %d bytes", s2.Bytes())
	}
	s2.Close()
	if got := drain(t, openSpool(t, dir, 64<<20)); len(got) != 0 {
		t.Errorf("a drained spool gave %d samples after another restart; want none", len(got))
	}
}

func TestFullSpoolDropsItsOldestSegmentAndCountsIt(t *testing.T) {
	s := openSpool(t, t.TempDir(), 1<<20)
	dropped := 0
	collector.SetSpoolDropHook(s, func(n int, _ int64) { dropped += n })
	batch := samples("GPU-a", t0, 200) // about 120 KB of JSON
	appended := 0
	for i := range 40 {
		for j := range batch {
			batch[j].Time = t0.Add(time.Duration(i*200+j) * time.Second)
		}
		if err := s.Append(batch); err != nil {
			t.Fatal(err)
		}
		appended += len(batch)
		if s.Bytes() > 1<<20 {
			t.Fatalf("spool holds %d bytes; bound 1 MiB", s.Bytes())
		}
	}
	got := drain(t, s)
	if dropped == 0 || len(got)+dropped != appended {
		t.Fatalf("kept %d + dropped %d; want a drop, and %d in all", len(got), dropped, appended)
	}
	if last := got[len(got)-1]; !last.Time.Equal(t0.Add(time.Duration(40*200-1) * time.Second)) {
		t.Errorf("the newest sample was not kept: last is %s", last.Time)
	}
}

func TestSpoolCutsATornTailAndKeepsTheRecordsBefore(t *testing.T) {
	dir := t.TempDir()
	s := openSpool(t, dir, 64<<20)
	_ = s.Append(samples("GPU-a", t0, 5))
	_ = s.Append(samples("GPU-a", t0.Add(time.Hour), 5))
	s.Close()
	damageSegments(t, dir, tornTail)
	if got := drain(t, openSpool(t, dir, 64<<20)); len(got) != 5 {
		t.Errorf("after a torn write the spool gave %d samples; want the 5 of the whole record", len(got))
	}
}

func TestSpoolRefusesBadSettings(t *testing.T) {
	if _, err := collector.OpenSpool(t.TempDir(), 1000, nil); err == nil {
		t.Error("a 1000-byte bound was taken")
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "x.seg"), nil, 0o644)
	if _, err := collector.OpenSpool(dir, 1<<20, nil); err == nil {
		t.Error("a segment with a bad name was taken")
	}
}

func TestSpoolSurvivesDamagedSegments(t *testing.T) {
	tests := []struct {
		name   string
		damage func([]byte) []byte
		want   int
	}{
		{"a flipped payload byte drops the record and the rest of its segment", func(b []byte) []byte { b[20] ^= 0xff; return b }, 0},
		{"a length beyond the file drops the record", func(b []byte) []byte { b[0], b[1], b[2], b[3] = 0xff, 0xff, 0xff, 0x0f; return b }, 0},
		{"zeros after the records read as empty records and are skipped", func(b []byte) []byte { return append(b, make([]byte, 12)...) }, 5},
		{"garbage after the records is cut off", func(b []byte) []byte { return append(b, "garbage"...) }, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			s := openSpool(t, dir, 64<<20)
			_ = s.Append(samples("GPU-a", t0, 5))
			s.Close()
			damageSegments(t, dir, tt.damage)
			if got := drain(t, openSpool(t, dir, 64<<20)); len(got) != tt.want {
				t.Errorf("drained %d samples; want %d", len(got), tt.want)
			}
		})
	}
}

// A batch being replayed while the full spool drops its segment must not,
// when acknowledged, move the mark of the segment that is oldest by then.
func TestSpoolAckOfADroppedSegmentChangesNothing(t *testing.T) {
	s := openSpool(t, t.TempDir(), 1<<20) // segments of 64 KiB
	next := t0
	appendUntil := func(cond func() bool) {
		for !cond() {
			b := samples("GPU-a", next, 20)
			next = next.Add(time.Hour)
			if err := s.Append(b); err != nil {
				t.Fatal(err)
			}
		}
	}
	appendUntil(func() bool { return s.Bytes() > 200<<10 })
	b, tok, ok, err := s.Peek()
	if err != nil || !ok {
		t.Fatalf("Peek: %v, %v", ok, err)
	}
	first := b[0].Time
	appendUntil(func() bool { return s.Bytes() > 1<<20-64<<10 })
	appendUntil(func() bool { // until the first segment is gone
		head, _, _, _ := s.Peek()
		return !head[0].Time.Equal(first)
	})
	head, _, _, err := s.Peek()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Ack(tok, len(b)); err != nil {
		t.Fatal(err)
	}
	after, _, ok, err := s.Peek()
	if err != nil || !ok || !after[0].Time.Equal(head[0].Time) {
		t.Fatalf("after acknowledging a dropped batch the spool starts at %v (ok %v, %v); want %v, unchanged", after[0].Time, ok, err, head[0].Time)
	}
}

// Damaged records found when the spool opens are counted once a writer takes
// the spool, like those found later.
func TestTornRecordFoundAtOpenIsCounted(t *testing.T) {
	dir := t.TempDir()
	s := openSpool(t, dir, 64<<20)
	_ = s.Append(samples("GPU-a", t0, 5))
	s.Close()
	damageSegments(t, dir, tornTail)
	m := collector.NewMetrics(prometheus.NewRegistry())
	w := collector.NewWriter(&fakeSink{}, openSpool(t, dir, 64<<20), collector.WriterOptions{}, m, nil)
	defer w.Close(context.Background())
	if got := testutil.ToFloat64(m.Errors.WithLabelValues("spool", "corrupt_record")); got != 1 {
		t.Fatalf("errors_total{spool,corrupt_record} = %v after opening a spool with one torn record; want 1", got)
	}
}

// tornTail cuts the last record short, as a crash in mid-write does.
func tornTail(b []byte) []byte { return b[:len(b)-7] }

// damageSegments rewrites every non-empty segment of the spool in dir
// through damage.
func damageSegments(t *testing.T, dir string, damage func([]byte) []byte) {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(dir, "*.seg"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range segs {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) == 0 {
			continue
		}
		if err := os.WriteFile(p, damage(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
