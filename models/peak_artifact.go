package models

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"time"
)

// TargetPeak is the online refinement of a running job's peak GPU memory
// (PeakWindow): its artifacts live beside the other targets' in the
// registry, in their own encoding (PeakArtifact).
const TargetPeak Target = "peak"

// PeakArtifactFormat is the version of the peak artifact's encoding; raise
// it when PeakArtifact or PeakFeatures change incompatibly.
const PeakArtifactFormat = 1

// peakEnvelope is how EncodePeak writes a PeakArtifact.
var peakEnvelope = Envelope{Magic: "PRESCIENT-PEAK\n", Format: PeakArtifactFormat, Kind: "peak-refinement"}

// ErrTooLittleSeen is returned when a series is too short (or all zero) to
// refine: less than the window's Observe, or too few samples in it.
var ErrTooLittleSeen = errors.New("too little of the series seen to refine its peak")

// PeakArtifact is a fitted peak refinement as the registry keeps it: one
// learner fitted on log(future peak / peak so far) and the shift that
// calibrates its P90 (split conformal), with the window it was fitted for.
type PeakArtifact struct {
	Format    int
	Version   int // given by the registry when published
	CreatedAt time.Time
	Window    PeakWindow
	// Step is how far apart the refinement points it was fitted on were.
	Step time.Duration
	// Series is how many series it was fitted, calibrated and scored on;
	// DataFrom and DataUntil span their samples.
	Series              int
	DataFrom, DataUntil time.Time
	// FittedSeries are the IDs of the series it was fitted or calibrated
	// on, so that it can be scored on others only; nil in artifacts
	// published before they were recorded.
	FittedSeries []string
	Features     []string
	Selected     string // the learner
	Model        []byte // its MarshalBinary
	// ShiftP90 is added to the learner's P90 in log space.
	ShiftP90 float64
	// Metrics are every learner's and baseline's figures on the scored
	// series, by name.
	Metrics map[string]map[string]float64

	model Model // decoded by Decode or SetModel
}

// SetModel stores m (fitted, of learner name) in the artifact.
func (a *PeakArtifact) SetModel(name string, m Model) error {
	data, err := m.MarshalBinary()
	if err != nil {
		return fmt.Errorf("peak artifact: %s: %w", name, err)
	}
	a.Selected, a.Model, a.model = name, data, m
	return nil
}

// PeakRefinement is the forecast of a running job's peak over the next
// Horizon, in the series' unit.
type PeakRefinement struct {
	PeakSoFar float64
	P50, P90  float64
}

// Refine forecasts the peak of the series (times increasing, from the job's
// start to now) over the window's horizon. The P90 is at least the P50.
// A series too short to refine is ErrTooLittleSeen.
func (a *PeakArtifact) Refine(times []time.Time, values []float64) (PeakRefinement, error) {
	if a.model == nil {
		return PeakRefinement{}, errors.New("peak artifact: no decoded model")
	}
	x, peak, ok := a.Window.PeakFeatures(times, values)
	if !ok {
		return PeakRefinement{}, fmt.Errorf("%w: %d samples over %s (at least %d over %s)", ErrTooLittleSeen, len(values),
			span(times), a.Window.MinSamples, a.Window.Observe)
	}
	q, err := a.model.PredictQuantiles([][]float64{x}, []float64{0.5, 0.9})
	if err != nil {
		return PeakRefinement{}, fmt.Errorf("peak refinement: %w", err)
	}
	r := PeakRefinement{PeakSoFar: peak, P50: peak * math.Exp(q[0][0]), P90: peak * math.Exp(q[0][1]+a.ShiftP90)}
	r.P90 = math.Max(r.P90, r.P50)
	return r, nil
}

// PredictQuantiles is the decoded model's quantiles of log(future peak /
// peak so far) for rows of PeakFeatureNames, before ShiftP90 is added to
// the P90.
func (a *PeakArtifact) PredictQuantiles(X [][]float64, qs []float64) ([][]float64, error) {
	if a.model == nil {
		return nil, errors.New("peak artifact: no decoded model")
	}
	return a.model.PredictQuantiles(X, qs)
}

func span(times []time.Time) time.Duration {
	if len(times) < 2 {
		return 0
	}
	return times[len(times)-1].Sub(times[0])
}

// EncodePeak writes the artifact in its Envelope.
func EncodePeak(w io.Writer, a *PeakArtifact) error { return peakEnvelope.Encode(w, a.Format, a) }

// DecodePeak reads an artifact written by EncodePeak and decodes its
// model; name (a file) appears in errors. A damaged artifact is
// ErrCorruptArtifact, one of another format ErrIncompatibleArtifact.
func DecodePeak(r io.Reader, name string) (*PeakArtifact, error) {
	var a PeakArtifact
	if err := peakEnvelope.Decode(r, name, &a); err != nil {
		return nil, err
	}
	if err := a.restore(); err != nil {
		return nil, fmt.Errorf("%s: %w: %v", name, ErrCorruptArtifact, err)
	}
	return &a, nil
}

// restore checks the artifact and decodes its model.
func (a *PeakArtifact) restore() error {
	switch {
	case a.Format != PeakArtifactFormat:
		return fmt.Errorf("format %d in the payload", a.Format)
	case !slices.Equal(a.Features, PeakFeatureNames()):
		return errors.New("feature list differs from this build's")
	case a.Window.Observe <= 0 || a.Window.Horizon <= 0:
		return errors.New("no window")
	case math.IsNaN(a.ShiftP90) || math.IsInf(a.ShiftP90, 0):
		return fmt.Errorf("P90 shift %v", a.ShiftP90)
	}
	l, err := LookupLearner(a.Selected)
	if err != nil {
		return err
	}
	m := l.New(Options{Features: a.Features})
	if err := m.UnmarshalBinary(a.Model); err != nil {
		return fmt.Errorf("model %q: %w", a.Selected, err)
	}
	a.model = m
	return nil
}
