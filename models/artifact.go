package models

import (
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

// artifactEnvelope is how Encode writes an Artifact.
var artifactEnvelope = Envelope{Magic: "PRESCIENT-MODEL\n", Format: ArtifactFormat, Kind: "model"}

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

// Encode writes the artifact in its Envelope.
func Encode(w io.Writer, a *Artifact) error { return artifactEnvelope.Encode(w, a.Format, a) }

// Decode reads an artifact written by Encode; name (a file) appears in
// errors. A damaged artifact is ErrCorruptArtifact, one of another format
// ErrIncompatibleArtifact; every model in it is decoded and checked.
func Decode(r io.Reader, name string) (*Artifact, error) {
	var a Artifact
	if err := artifactEnvelope.Decode(r, name, &a); err != nil {
		return nil, err
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
