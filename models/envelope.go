package models

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/gob"
	"fmt"
	"io"
)

// Envelope is the one encoding of every model artifact the registry keeps:
// the kind's magic line, the format version (4 bytes, big-endian), the
// payload's length (8 bytes), the gob payload and its SHA-256. Each kind
// (Artifact, PeakArtifact, idle.Artifact) has a magic and a format of its
// own, so a file of one kind is never read as another.
type Envelope struct {
	Magic string // ends in a newline, e.g. "PRESCIENT-MODEL\n"
	// Format is the version this build reads.
	Format uint32
	// Kind names the artifact in errors: "model", "peak-refinement",
	// "idle-forecast".
	Kind string
}

func (e Envelope) headLen() int { return len(e.Magic) + 12 }

// Encode writes v (a pointer to the artifact) in the envelope, with the
// format the artifact says it is.
func (e Envelope) Encode(w io.Writer, format int, v any) error {
	var payload bytes.Buffer
	if err := gob.NewEncoder(&payload).Encode(v); err != nil {
		return fmt.Errorf("encode %s artifact: %w", e.Kind, err)
	}
	head := make([]byte, e.headLen())
	copy(head, e.Magic)
	binary.BigEndian.PutUint32(head[len(e.Magic):], uint32(format))
	binary.BigEndian.PutUint64(head[len(e.Magic)+4:], uint64(payload.Len()))
	sum := sha256.Sum256(payload.Bytes())
	for _, b := range [][]byte{head, payload.Bytes(), sum[:]} {
		if _, err := w.Write(b); err != nil {
			return fmt.Errorf("write %s artifact: %w", e.Kind, err)
		}
	}
	return nil
}

// Decode reads an envelope written by Encode into v (a pointer to the
// artifact); name (a file) appears in errors. A damaged envelope is
// ErrCorruptArtifact, one of another format ErrIncompatibleArtifact. The
// artifact's own checks are the caller's.
func (e Envelope) Decode(r io.Reader, name string, v any) error {
	head := make([]byte, e.headLen())
	if _, err := io.ReadFull(r, head); err != nil {
		return fmt.Errorf("%s: %w: short header: %v", name, ErrCorruptArtifact, err)
	}
	if string(head[:len(e.Magic)]) != e.Magic {
		return fmt.Errorf("%s: %w: not a Prescient %s artifact", name, ErrCorruptArtifact, e.Kind)
	}
	if f := binary.BigEndian.Uint32(head[len(e.Magic):]); f != e.Format {
		return fmt.Errorf("%s: %w: format %d, this build reads format %d", name, ErrIncompatibleArtifact, f, e.Format)
	}
	n := binary.BigEndian.Uint64(head[len(e.Magic)+4:])
	if n > MaxArtifactBytes {
		return fmt.Errorf("%s: %w: payload of %d bytes is too large", name, ErrCorruptArtifact, n)
	}
	// Read what is there rather than allocate what the header claims: a
	// damaged length must not cost a gigabyte.
	payload, err := io.ReadAll(io.LimitReader(r, int64(n)+sha256.Size))
	if err != nil {
		return fmt.Errorf("%s: read: %w", name, err)
	}
	if uint64(len(payload)) != n+sha256.Size {
		return fmt.Errorf("%s: %w: truncated: %d of %d bytes", name, ErrCorruptArtifact, len(payload), n+sha256.Size)
	}
	if sum := sha256.Sum256(payload[:n]); !bytes.Equal(sum[:], payload[n:]) {
		return fmt.Errorf("%s: %w: checksum mismatch", name, ErrCorruptArtifact)
	}
	if err := gob.NewDecoder(bytes.NewReader(payload[:n])).Decode(v); err != nil {
		return fmt.Errorf("%s: %w: %v", name, ErrCorruptArtifact, err)
	}
	return nil
}
