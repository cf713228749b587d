package models

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"
)

// ArtifactFormat is the version of the artifact encoding. An artifact of
// another format is refused at load (ErrIncompatibleArtifact); raise it
// whenever Artifact or a model's encoding changes incompatibly.
const ArtifactFormat = 1

// artifactMagic starts every encoded artifact.
const artifactMagic = "PRESCIENT-MODEL\n"

// MaxArtifactBytes bounds the payload a decoder accepts.
const MaxArtifactBytes = 1 << 30

// Errors of Decode, for errors.Is.
var (
	ErrCorruptArtifact      = errors.New("corrupt model artifact")
	ErrIncompatibleArtifact = errors.New("incompatible model artifact")
)

// Artifact is a fitted forecaster as the registry keeps it: every model
// fitted in one training run (learners and baselines), the one selected to
// serve, the feature pipeline with its history state, and where it came
// from.
type Artifact struct {
	Format    int
	Target    Target
	Version   int // given by the registry when published
	CreatedAt time.Time
	// DataFrom and DataUntil span the submit times of the training jobs.
	DataFrom, DataUntil time.Time
	// HoldoutFrom is where the later window it was evaluated on begins.
	HoldoutFrom time.Time
	Rows        int // training rows

	Features     FeatureConfig
	FeatureNames []string
	// History is the pipeline's state after every training job: what the
	// predictor starts from.
	History *History

	Selected string            // the model that serves
	Models   map[string][]byte // each model's MarshalBinary, by name
	// Metrics are each model's figures on the holdout window.
	Metrics map[string]map[string]float64
	// Importance is how much each feature matters to the selected model;
	// Center and Scale (median and interquartile range of each feature)
	// tell how unusual a job's value is.
	Importance, Center, Scale []float64
}

// Encode writes the artifact: magic, format, payload length, gob payload,
// SHA-256 of the payload.
func Encode(w io.Writer, a *Artifact) error {
	var payload bytes.Buffer
	if err := gob.NewEncoder(&payload).Encode(a); err != nil {
		return fmt.Errorf("encode artifact: %w", err)
	}
	var head [len(artifactMagic) + 12]byte
	copy(head[:], artifactMagic)
	binary.BigEndian.PutUint32(head[len(artifactMagic):], uint32(a.Format))
	binary.BigEndian.PutUint64(head[len(artifactMagic)+4:], uint64(payload.Len()))
	sum := sha256.Sum256(payload.Bytes())
	for _, b := range [][]byte{head[:], payload.Bytes(), sum[:]} {
		if _, err := w.Write(b); err != nil {
			return fmt.Errorf("write artifact: %w", err)
		}
	}
	return nil
}

// Decode reads an artifact written by Encode; name (a file) appears in
// errors. A damaged artifact is ErrCorruptArtifact, one of another format
// ErrIncompatibleArtifact; every model in it is decoded and checked.
func Decode(r io.Reader, name string) (*Artifact, error) {
	var head [len(artifactMagic) + 12]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return nil, fmt.Errorf("%s: %w: short header: %v", name, ErrCorruptArtifact, err)
	}
	if string(head[:len(artifactMagic)]) != artifactMagic {
		return nil, fmt.Errorf("%s: %w: not a Prescient model artifact", name, ErrCorruptArtifact)
	}
	if f := binary.BigEndian.Uint32(head[len(artifactMagic):]); f != ArtifactFormat {
		return nil, fmt.Errorf("%s: %w: format %d, this build reads format %d", name, ErrIncompatibleArtifact, f, ArtifactFormat)
	}
	n := binary.BigEndian.Uint64(head[len(artifactMagic)+4:])
	if n > MaxArtifactBytes {
		return nil, fmt.Errorf("%s: %w: payload of %d bytes is too large", name, ErrCorruptArtifact, n)
	}
	// Read what is there rather than allocate what the header claims: a
	// damaged length must not cost a gigabyte.
	payload, err := io.ReadAll(io.LimitReader(r, int64(n)+sha256.Size))
	if err != nil {
		return nil, fmt.Errorf("%s: read: %w", name, err)
	}
	if uint64(len(payload)) != n+sha256.Size {
		return nil, fmt.Errorf("%s: %w: truncated: %d of %d bytes", name, ErrCorruptArtifact, len(payload), n+sha256.Size)
	}
	if sum := sha256.Sum256(payload[:n]); !bytes.Equal(sum[:], payload[n:]) {
		return nil, fmt.Errorf("%s: %w: checksum mismatch", name, ErrCorruptArtifact)
	}
	var a Artifact
	if err := gob.NewDecoder(bytes.NewReader(payload[:n])).Decode(&a); err != nil {
		return nil, fmt.Errorf("%s: %w: %v", name, ErrCorruptArtifact, err)
	}
	if err := a.validate(); err != nil {
		return nil, fmt.Errorf("%s: %w: %v", name, ErrCorruptArtifact, err)
	}
	return &a, nil
}

func (a *Artifact) validate() error {
	if a.Format != ArtifactFormat {
		return fmt.Errorf("format %d in the payload", a.Format)
	}
	if a.History == nil {
		return errors.New("no history")
	}
	if err := a.History.Validate(); err != nil {
		return err
	}
	if a.Features != a.History.Config || a.Features.Target != a.Target {
		return errors.New("feature config does not match the history or the target")
	}
	if !slices.Equal(a.FeatureNames, a.Features.FeatureNames()) {
		return errors.New("feature list differs from this build's pipeline")
	}
	p := len(a.FeatureNames)
	for _, v := range [][]float64{a.Importance, a.Center, a.Scale} {
		if len(v) != p {
			return fmt.Errorf("feature statistics of length %d, want %d", len(v), p)
		}
	}
	if _, ok := a.Models[a.Selected]; !ok {
		return fmt.Errorf("selected model %q is missing", a.Selected)
	}
	for name := range a.Models {
		if _, err := a.Model(name); err != nil {
			return err
		}
	}
	return nil
}

// Model decodes one of the artifact's models.
func (a *Artifact) Model(name string) (Model, error) {
	data, ok := a.Models[name]
	if !ok {
		return nil, fmt.Errorf("model %q is not in the artifact", name)
	}
	l, err := LookupLearner(name)
	if err != nil {
		return nil, err
	}
	m := l.New(Options{Features: a.FeatureNames})
	if err := m.UnmarshalBinary(data); err != nil {
		return nil, fmt.Errorf("model %q: %w", name, err)
	}
	return m, nil
}
