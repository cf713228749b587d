package park

import (
	"math"
	"testing"
	"time"
)

func TestOutlook(t *testing.T) {
	o := Outlook{Look: 30 * time.Minute, Queued: 4, Rate: 8.0 / 3600} // 4 queued, 8 GPUs an hour: demand 8
	o.Free(8)
	if !o.Spare(0) || o.Spare(8) || o.Short() != 0 {
		t.Errorf("8 free against a demand of 8: spare(0) %v spare(8) %v short %g; want true, false, 0", o.Spare(0), o.Spare(8), o.Short())
	}
	// A job near its P50 may well end within the half hour; one that just
	// started with a P50 of a day hardly.
	near, far := Outlook{Look: 30 * time.Minute}, Outlook{Look: 30 * time.Minute}
	near.Running(8, 50*time.Minute, time.Hour, 2*time.Hour)
	far.Running(8, 0, 24*time.Hour, 48*time.Hour)
	if near.Supply() < 2 || near.Supply() > 6 || far.Supply() > 0.01 {
		t.Errorf("8 GPUs of a job 10 minutes before its P50: %g expected within 30 minutes (want 2-6); of a day-long job just started: %g (want ~0)",
			near.Supply(), far.Supply())
	}
	short := Outlook{Look: time.Hour, Queued: 20}
	short.Free(8)
	if got := short.Short(); got != 12 {
		t.Errorf("short %g; want 12", got)
	}
	if o := (Outlook{Look: time.Hour}); !o.Spare(0) || o.Spare(1) {
		t.Error("an empty outlook: a node of no GPUs is spare, one of a GPU is not")
	}
}

func TestArrivalsDecayOverAnHour(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	var a Arrivals
	if r := a.Rate(t0); r != 0 {
		t.Errorf("no arrivals: rate %g, want 0", r)
	}
	a.Add(t0, t0, 8)
	a.Add(t0, t0.Add(-ArrivalTau), 8) // seen an hour after it came: weighs 1/e
	want := (8 + 8/math.E) / ArrivalTau.Seconds()
	if r := a.Rate(t0); math.Abs(r-want) > 1e-12 {
		t.Errorf("rate %g, want %g", r, want)
	}
	if r := a.Rate(t0.Add(ArrivalTau)); math.Abs(r-want/math.E) > 1e-12 {
		t.Errorf("an hour later: rate %g, want %g", r, want/math.E)
	}
	if r := a.Rate(t0); math.Abs(r-want/math.E) > 1e-12 {
		t.Errorf("asked again for an earlier time: rate %g, want it left as it was (%g)", r, want/math.E)
	}
}
