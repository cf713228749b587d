package models_test

import (
	"bytes"
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/models"
)

// peakArtifact fits the global median on windows of a few ramps.
func peakArtifact(t testing.TB) *models.PeakArtifact {
	t.Helper()
	w := models.DefaultPeakWindow()
	var X [][]float64
	var y []float64
	for i := range 20 {
		times, values := ramp(300, float64(i+1))
		for _, e := range w.Examples("s", times, values, 30*time.Minute) {
			X, y = append(X, e.X), append(y, models.PeakTarget(e))
		}
	}
	l, err := models.LookupLearner(models.GlobalMedianName)
	if err != nil {
		t.Fatal(err)
	}
	m := l.New(models.Options{Features: models.PeakFeatureNames(), Seed: 1})
	if err := m.Fit(context.Background(), X, y); err != nil {
		t.Fatal(err)
	}
	a := &models.PeakArtifact{Format: models.PeakArtifactFormat, Version: 1, Window: w, Step: 30 * time.Minute,
		Features: models.PeakFeatureNames(), ShiftP90: 0.1}
	if err := a.SetModel(models.GlobalMedianName, m); err != nil {
		t.Fatal(err)
	}
	return a
}

// ramp is n one-minute samples climbing from scale/3 to scale over an hour.
func ramp(n int, scale float64) ([]time.Time, []float64) {
	times, values := make([]time.Time, n), make([]float64, n)
	for i := range n {
		times[i] = t0.Add(time.Duration(i) * time.Minute)
		values[i] = scale * (1.0/3 + 2.0/3*math.Min(float64(i)/60, 1))
	}
	return times, values
}

func TestPeakArtifactRoundTripRefinesTheSame(t *testing.T) {
	a := peakArtifact(t)
	var buf bytes.Buffer
	if err := models.EncodePeak(&buf, a); err != nil {
		t.Fatal(err)
	}
	b, err := models.DecodePeak(bytes.NewReader(buf.Bytes()), "v000001.model")
	if err != nil {
		t.Fatal(err)
	}
	times, values := ramp(20, 8)
	ra, errA := a.Refine(times, values)
	rb, errB := b.Refine(times, values)
	if errA != nil || errB != nil || ra != rb || ra.PeakSoFar != values[19] || ra.P90 < ra.P50 {
		t.Fatalf("before encoding %+v (%v), after %+v (%v)", ra, errA, rb, errB)
	}
	if _, err := b.Refine(times[:5], values[:5]); !errors.Is(err, models.ErrTooLittleSeen) {
		t.Errorf("5 minutes: %v, want ErrTooLittleSeen", err)
	}
	data := buf.Bytes()
	data[len(data)-40] ^= 1
	if _, err := models.DecodePeak(bytes.NewReader(data), "v000001.model"); !errors.Is(err, models.ErrCorruptArtifact) {
		t.Errorf("a flipped bit: %v, want ErrCorruptArtifact", err)
	}
	if _, err := models.DecodePeak(bytes.NewReader([]byte("PRESCIENT-PEAK\n\x00\x00\x00\x09")), "v9.model"); !errors.Is(err, models.ErrCorruptArtifact) {
		t.Errorf("a short header: %v, want ErrCorruptArtifact", err)
	}
}

func FuzzDecodePeak(f *testing.F) {
	var buf bytes.Buffer
	if err := models.EncodePeak(&buf, peakArtifact(f)); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add([]byte("PRESCIENT-PEAK\n\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x10"))
	f.Add([]byte("PRESCIENT-PEAK\n\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00\x00"))
	times, values := ramp(30, 4)
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := models.DecodePeak(bytes.NewReader(data), "fuzz")
		if err != nil {
			return
		}
		// What decodes must refine without panicking.
		if r, err := a.Refine(times, values); err == nil && r.P90 < r.P50 {
			t.Fatalf("P90 %v below P50 %v", r.P90, r.P50)
		}
	})
}
