package collector

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/prescient-sched/prescient/internal/fsutil"
)

// The spool keeps, on disk, the batches that could not be written, and
// gives them back in the order they came.
//
// Layout: a directory of segment files NNNNNNNNNNNNNNNN.seg, appended to
// and never rewritten, and beside each a NNNNNNNNNNNNNNNN.ack holding how
// many of its bytes were written to the sink. A record is
//
//	length  uint32, little endian: bytes of payload
//	samples uint32: samples in the batch
//	crc     uint32: CRC-32C of the payload
//	payload JSON of the []Sample
//
// Every append is fsynced before Append returns, and so is every ack: a
// batch the spool has taken survives a crash, and a batch it has handed
// back and seen acknowledged is not handed back again (but for one
// written in the instant between the sink's reply and the ack's fsync,
// which comes back once more: InfluxDB and the embedded store both keep
// one point per series and time, so it is not counted twice).
//
// The spool holds at most MaxBytes. When a new batch would not fit, it
// drops whole segments, oldest first, and counts their samples as dropped:
// the newest telemetry is worth more than the oldest. A batch larger than
// MaxBytes on its own is refused.
type Spool struct {
	dir      string
	maxBytes int64
	segBytes int64
	log      *slog.Logger

	mu      sync.Mutex
	segs    []*segment // oldest first; the last is appended to
	cur     *os.File   // the last segment, open for appending
	nextSeq uint64
	// onDrop is told of every dropped segment's unwritten samples and bytes.
	onDrop func(samples int, bytes int64)
	// corruptAtOpen counts the damaged records OpenSpool found, before
	// anyone could be told; the Writer reports them when it takes the spool.
	corruptAtOpen int
	// onCorrupt is told of every record that could not be read back, with
	// the samples lost with it when the header tells.
	onCorrupt func(samples int)
	closed    bool // after Close, Append refuses
}

type segment struct {
	seq     uint64
	size    int64 // bytes in the file
	acked   int64 // bytes written to the sink
	samples int   // samples in the records past acked
}

// recordHeader is the size of a record's header.
const recordHeader = 12

// maxRecord bounds one record's payload, so that a corrupt length cannot
// make the reader allocate without bound.
const maxRecord = 256 << 20

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorruptRecord is wrapped by errors for records that cannot be read.
var ErrCorruptRecord = errors.New("corrupt spool record")

// OpenSpool opens (creating it) the spool in dir, bounded to maxBytes. It
// reads the segments a previous run left, so that their batches are
// written first, and starts a new segment for its own.
func OpenSpool(dir string, maxBytes int64, log *slog.Logger) (*Spool, error) {
	if maxBytes < 1<<20 {
		return nil, fmt.Errorf("spool %s: bound %d bytes: want at least 1 MiB", dir, maxBytes)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	s := &Spool{dir: dir, maxBytes: maxBytes, segBytes: max(maxBytes/16, 1<<20), log: log.With("component", "spool"),
		onDrop: func(int, int64) {}, onCorrupt: func(int) {}}
	if err := s.load(); err != nil {
		return nil, err
	}
	if err := s.roll(); err != nil {
		return nil, err
	}
	return s, nil
}

// load finds the segments on disk with their ack offsets and sample counts.
func (s *Spool) load() error {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".seg")
		if !ok {
			continue
		}
		seq, err := strconv.ParseUint(name, 10, 64)
		if err != nil {
			return fmt.Errorf("spool %s: file %s: want a name like 0000000000000001.seg", s.dir, e.Name())
		}
		seg := &segment{seq: seq}
		if seg.acked, err = readAck(s.ackPath(seq)); err != nil {
			return err
		}
		if seg.size, seg.samples, err = s.scan(seq, seg.acked); err != nil {
			return err
		}
		s.segs = append(s.segs, seg)
		s.nextSeq = max(s.nextSeq, seq+1)
	}
	sort.Slice(s.segs, func(i, j int) bool { return s.segs[i].seq < s.segs[j].seq })
	if n := s.Bytes(); n > 0 {
		s.log.Info("spool holds batches of an earlier run; they are written first", "dir", s.dir, "bytes", n, "samples", s.samples())
	}
	return nil
}

// scan counts the samples after offset from the record headers, and
// returns the size up to the last whole record (a torn tail is cut off).
func (s *Spool) scan(seq uint64, offset int64) (int64, int, error) {
	f, err := os.Open(s.segPath(seq))
	if err != nil {
		return 0, 0, fmt.Errorf("spool: %w", err)
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return 0, 0, fmt.Errorf("spool: %w", err)
	}
	r := bufio.NewReader(f)
	pos, samples := offset, 0
	for {
		_, n, size, err := readRecord(r)
		if errors.Is(err, io.EOF) {
			return pos, samples, nil
		}
		if err != nil {
			s.log.Warn("spool segment ends in a torn or corrupt record; the rest of it is dropped", "file", s.segPath(seq), "offset", pos, "error", err)
			s.corruptAtOpen++
			return pos, samples, nil
		}
		pos += size
		samples += n
	}
}

// Append adds a batch at the end of the spool and fsyncs it.
func (s *Spool) Append(batch []Sample) error {
	rec, err := encodeRecord(batch)
	if err != nil {
		return err
	}
	size := int64(len(rec))
	payloadLen := len(rec) - recordHeader

	s.mu.Lock()
	defer s.mu.Unlock()
	if size > s.maxBytes || payloadLen > maxRecord {
		return fmt.Errorf("spool %s: a batch of %d bytes exceeds the spool's bound of %d bytes", s.dir, size, s.maxBytes)
	}
	if err := s.makeRoom(size); err != nil {
		return err
	}
	if s.closed {
		return fmt.Errorf("spool %s: closed", s.dir)
	}
	if s.cur == nil { // an earlier roll failed: try again
		if err := s.roll(); err != nil {
			return err
		}
	}
	cur := s.segs[len(s.segs)-1]
	if _, err := s.cur.Write(rec); err != nil {
		return fmt.Errorf("spool: append: %w", err)
	}
	if err := s.cur.Sync(); err != nil {
		return fmt.Errorf("spool: fsync: %w", err)
	}
	cur.size += size
	cur.samples += len(batch)
	if cur.size >= s.segBytes {
		if err := s.roll(); err != nil {
			// The batch is durable; the next Append tries to roll again.
			s.log.Warn("spool: cannot start a new segment", "dir", s.dir, "error", err)
		}
	}
	return nil
}

// makeRoom drops the oldest segments until size more bytes fit.
func (s *Spool) makeRoom(size int64) error {
	for s.bytesLocked()+size > s.maxBytes {
		old := s.segs[0]
		if len(s.segs) == 1 {
			// Only the current segment is left: start a new one, so that
			// the old can go.
			if err := s.roll(); err != nil {
				return err
			}
		}
		s.log.Warn("spool full: dropping its oldest segment", "dir", s.dir, "segment", old.seq, "samples", old.samples, "bytes", old.size-old.acked, "max_bytes", s.maxBytes)
		s.onDrop(old.samples, old.size-old.acked)
		s.segs = s.segs[1:]
		s.remove(old.seq)
	}
	return nil
}

// roll closes the current segment and starts a new one.
func (s *Spool) roll() error {
	if s.cur != nil {
		err := s.cur.Close()
		s.cur = nil
		if err != nil {
			return fmt.Errorf("spool: close segment: %w", err)
		}
	}
	seq := s.nextSeq
	s.nextSeq++
	f, err := os.OpenFile(s.segPath(seq), os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("spool: new segment: %w", err)
	}
	s.cur = f
	s.segs = append(s.segs, &segment{seq: seq})
	return syncDir(s.dir)
}

// SpoolToken names a batch that Peek returned: its segment and the offset
// just past it.
type SpoolToken struct {
	seq uint64
	off int64
}

// Peek returns the oldest batch not yet acknowledged, and the token to
// acknowledge it with; ok is false when the spool is empty. A record that is
// damaged or torn loses the rest of its segment (logged and counted); an
// error reading the file (too many open files, an I/O error) is returned and
// loses nothing.
func (s *Spool) Peek() (batch []Sample, token SpoolToken, ok bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.segs) > 0 {
		seg := s.segs[0]
		last := len(s.segs) == 1
		if seg.acked >= seg.size {
			if last {
				return nil, SpoolToken{}, false, nil
			}
			s.segs = s.segs[1:]
			s.remove(seg.seq)
			continue
		}
		payload, n, size, err := s.readAt(seg.seq, seg.acked)
		if err != nil && !errors.Is(err, ErrCorruptRecord) && !errors.Is(err, io.EOF) {
			return nil, SpoolToken{}, false, fmt.Errorf("spool: read segment %d: %w", seg.seq, err)
		}
		if err == nil {
			if err := json.Unmarshal(payload, &batch); err != nil {
				err = fmt.Errorf("%w: %v", ErrCorruptRecord, err)
			} else if len(batch) != n {
				err = fmt.Errorf("%w: header says %d samples, payload holds %d", ErrCorruptRecord, n, len(batch))
			} else {
				return batch, SpoolToken{seq: seg.seq, off: seg.acked + size}, true, nil
			}
		}
		// A record that cannot be read: the rest of its segment is lost.
		s.log.Warn("spool record cannot be read; the rest of its segment is dropped", "segment", seg.seq, "offset", seg.acked, "error", err)
		s.onCorrupt(seg.samples)
		seg.samples = 0
		seg.acked = seg.size
		if !last {
			s.segs = s.segs[1:]
			s.remove(seg.seq)
		}
	}
	return nil, SpoolToken{}, false, nil
}

// Ack marks the batch Peek returned with token as written, durably. A token
// whose segment was dropped meanwhile (the spool was full) changes nothing.
func (s *Spool) Ack(token SpoolToken, samples int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.segs) == 0 {
		return nil
	}
	seg := s.segs[0]
	if seg.seq != token.seq || token.off <= seg.acked || token.off > seg.size {
		return nil // the segment was dropped meanwhile
	}
	seg.acked = token.off
	seg.samples -= samples
	if seg.acked >= seg.size && len(s.segs) > 1 {
		s.segs = s.segs[1:]
		s.remove(seg.seq)
		return nil
	}
	return writeAck(s.ackPath(seg.seq), token.off)
}

// Bytes is how many bytes the spool holds that are not yet written.
func (s *Spool) Bytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytesLocked()
}

func (s *Spool) bytesLocked() int64 {
	var n int64
	for _, seg := range s.segs {
		n += seg.size - seg.acked
	}
	return n
}

// samples is how many samples the spool holds that are not yet written.
func (s *Spool) samples() int {
	n := 0
	for _, seg := range s.segs {
		n += seg.samples
	}
	return n
}

// Close closes the current segment; what it holds stays for the next run.
func (s *Spool) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.cur == nil {
		return nil
	}
	err := s.cur.Close()
	s.cur = nil
	return err
}

func (s *Spool) readAt(seq uint64, off int64) ([]byte, int, int64, error) {
	f, err := os.Open(s.segPath(seq))
	if err != nil {
		return nil, 0, 0, err
	}
	defer f.Close()
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return nil, 0, 0, err
	}
	return readRecord(bufio.NewReader(f))
}

func (s *Spool) remove(seq uint64) {
	for _, p := range []string{s.segPath(seq), s.ackPath(seq)} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			s.log.Warn("spool: cannot remove a written segment", "file", p, "error", err)
		}
	}
	// Without this a power loss could bring the segment back, to be written again.
	if err := syncDir(s.dir); err != nil {
		s.log.Warn("spool: cannot sync the spool directory", "dir", s.dir, "error", err)
	}
}

func (s *Spool) segPath(seq uint64) string {
	return filepath.Join(s.dir, fmt.Sprintf("%016d.seg", seq))
}
func (s *Spool) ackPath(seq uint64) string {
	return filepath.Join(s.dir, fmt.Sprintf("%016d.ack", seq))
}

// encodeRecord makes a record of a batch.
func encodeRecord(batch []Sample) ([]byte, error) {
	payload, err := json.Marshal(batch)
	if err != nil {
		return nil, fmt.Errorf("spool: encode: %w", err)
	}
	rec := make([]byte, recordHeader+len(payload))
	binary.LittleEndian.PutUint32(rec[0:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(rec[4:], uint32(len(batch)))
	binary.LittleEndian.PutUint32(rec[8:], crc32.Checksum(payload, castagnoli))
	copy(rec[recordHeader:], payload)
	return rec, nil
}

// readRecord reads one record: its payload, its sample count and its size
// on disk. At a clean end it returns io.EOF; a torn or damaged record is an
// error wrapping ErrCorruptRecord.
func readRecord(r io.Reader) (payload []byte, samples int, size int64, err error) {
	var h [recordHeader]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, 0, 0, io.EOF
		}
		return nil, 0, 0, fmt.Errorf("%w: header: %v", ErrCorruptRecord, err)
	}
	n := binary.LittleEndian.Uint32(h[0:])
	if n > maxRecord {
		return nil, 0, 0, fmt.Errorf("%w: length %d exceeds %d", ErrCorruptRecord, n, maxRecord)
	}
	// Read what is there rather than allocate the length up front: a
	// damaged length must not cost hundreds of megabytes.
	payload, err = io.ReadAll(io.LimitReader(r, int64(n)))
	if err != nil {
		return nil, 0, 0, fmt.Errorf("%w: payload: %v", ErrCorruptRecord, err)
	}
	if len(payload) != int(n) {
		return nil, 0, 0, fmt.Errorf("%w: payload: %d of %d bytes", ErrCorruptRecord, len(payload), n)
	}
	if crc32.Checksum(payload, castagnoli) != binary.LittleEndian.Uint32(h[8:]) {
		return nil, 0, 0, fmt.Errorf("%w: checksum mismatch", ErrCorruptRecord)
	}
	return payload, int(binary.LittleEndian.Uint32(h[4:])), int64(recordHeader) + int64(n), nil
}

func readAck(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("spool: %w", err)
	}
	if len(b) != 8 {
		return 0, fmt.Errorf("spool: %s: %d bytes, want 8", path, len(b))
	}
	return int64(binary.LittleEndian.Uint64(b)), nil
}

// writeAck replaces the ack file atomically (write, fsync, rename).
func writeAck(path string, off int64) error {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(off))
	err := fsutil.WriteAtomic(path, 0o644, func(w io.Writer) error {
		_, err := w.Write(b[:])
		return err
	})
	if err != nil {
		return fmt.Errorf("spool: ack: %w", err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("spool: fsync %s: %w", dir, err)
	}
	return nil
}
