package idle

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/prescient-sched/prescient/models"
)

// ArtifactFormat is the version of the idle artifact's encoding; raise it
// when Artifact or the features change incompatibly.
const ArtifactFormat = 1

// artifactEnvelope is how Encode writes an Artifact.
var artifactEnvelope = models.Envelope{Magic: "PRESCIENT-IDLE\n", Format: ArtifactFormat, Kind: "idle-forecast"}

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

// Encode writes the artifact in its models.Envelope.
func Encode(w io.Writer, a *Artifact) error { return artifactEnvelope.Encode(w, a.Format, a) }

// Decode reads an artifact written by Encode; name appears in errors. A
// damaged artifact is models.ErrCorruptArtifact, one of another format
// models.ErrIncompatibleArtifact.
func Decode(r io.Reader, name string) (*Artifact, error) {
	var a Artifact
	if err := artifactEnvelope.Decode(r, name, &a); err != nil {
		return nil, err
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
