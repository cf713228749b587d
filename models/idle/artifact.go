package idle

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/prescient-sched/prescient/models"
)

// ArtifactFormat is the version of the idle artifact's encoding; raise it
// when Artifact or the features change incompatibly.
const ArtifactFormat = 1

// artifactMagic starts every encoded idle artifact.
const artifactMagic = "PRESCIENT-IDLE\n"

// Artifact is a fitted idle model as the registry keeps it.
type Artifact struct {
	Format    int
	Version   int // given by the registry when published
	CreatedAt time.Time
	// Series names the series it was trained on, SeriesFormat their format;
	// TrainedUntil, when set, is where its training data ended (later
	// samples of those series were not seen).
	Series              []string
	SeriesFormat        string
	DataFrom, DataUntil time.Time
	TrainedUntil        time.Time
	Features            []string
	Model               *Model
	// Metrics are its figures on the held-out data, by name.
	Metrics map[string]float64
}

// Encode writes the artifact: magic, format, payload length, gob payload,
// SHA-256 of the payload.
func Encode(w io.Writer, a *Artifact) error {
	var payload bytes.Buffer
	if err := gob.NewEncoder(&payload).Encode(a); err != nil {
		return fmt.Errorf("encode idle artifact: %w", err)
	}
	var head [len(artifactMagic) + 12]byte
	copy(head[:], artifactMagic)
	binary.BigEndian.PutUint32(head[len(artifactMagic):], uint32(a.Format))
	binary.BigEndian.PutUint64(head[len(artifactMagic)+4:], uint64(payload.Len()))
	sum := sha256.Sum256(payload.Bytes())
	for _, b := range [][]byte{head[:], payload.Bytes(), sum[:]} {
		if _, err := w.Write(b); err != nil {
			return fmt.Errorf("write idle artifact: %w", err)
		}
	}
	return nil
}

// Decode reads an artifact written by Encode; name appears in errors. A
// damaged artifact is models.ErrCorruptArtifact, one of another format
// models.ErrIncompatibleArtifact.
func Decode(r io.Reader, name string) (*Artifact, error) {
	var head [len(artifactMagic) + 12]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return nil, fmt.Errorf("%s: %w: short header: %v", name, models.ErrCorruptArtifact, err)
	}
	if string(head[:len(artifactMagic)]) != artifactMagic {
		return nil, fmt.Errorf("%s: %w: not a Prescient idle-forecast artifact", name, models.ErrCorruptArtifact)
	}
	if f := binary.BigEndian.Uint32(head[len(artifactMagic):]); f != ArtifactFormat {
		return nil, fmt.Errorf("%s: %w: format %d, this build reads format %d", name, models.ErrIncompatibleArtifact, f, ArtifactFormat)
	}
	n := binary.BigEndian.Uint64(head[len(artifactMagic)+4:])
	if n > models.MaxArtifactBytes {
		return nil, fmt.Errorf("%s: %w: payload of %d bytes is too large", name, models.ErrCorruptArtifact, n)
	}
	payload, err := io.ReadAll(io.LimitReader(r, int64(n)+sha256.Size))
	if err != nil {
		return nil, fmt.Errorf("%s: read: %w", name, err)
	}
	if uint64(len(payload)) != n+sha256.Size {
		return nil, fmt.Errorf("%s: %w: truncated: %d of %d bytes", name, models.ErrCorruptArtifact, len(payload), n+sha256.Size)
	}
	if sum := sha256.Sum256(payload[:n]); !bytes.Equal(sum[:], payload[n:]) {
		return nil, fmt.Errorf("%s: %w: checksum mismatch", name, models.ErrCorruptArtifact)
	}
	var a Artifact
	if err := gob.NewDecoder(bytes.NewReader(payload[:n])).Decode(&a); err != nil {
		return nil, fmt.Errorf("%s: %w: %v", name, models.ErrCorruptArtifact, err)
	}
	if err := a.validate(); err != nil {
		return nil, fmt.Errorf("%s: %w: %v", name, models.ErrCorruptArtifact, err)
	}
	return &a, nil
}

func (a *Artifact) validate() error {
	switch {
	case a.Format != ArtifactFormat:
		return fmt.Errorf("format %d in the payload", a.Format)
	case a.Model == nil:
		return errors.New("no model")
	case len(a.Features) != len(FeatureNames):
		return errors.New("feature list differs from this build's")
	case !a.Model.Survival.validate():
		return errors.New("inconsistent survival table")
	}
	for i, f := range a.Features {
		if FeatureNames[i] != f {
			return fmt.Errorf("feature %d is %q, this build computes %q", i, f, FeatureNames[i])
		}
	}
	if err := a.Model.Config.Validate(); err != nil {
		return err
	}
	return a.Model.restore()
}
