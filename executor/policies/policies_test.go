package policies

import (
	"strings"
	"testing"
	"time"
)

func TestCheckpointSpecs(t *testing.T) {
	for spec, ok := range map[string]bool{"none": true, "young-daly": true, "young-daly:45m": true, "fixed:1h": true,
		PrescientCheckpoint: true, "young-daly:x": false, "young-daly:0s": false, "young-daly:-1m": false,
		"none:1h": false, "fixed:": false, "fixed:0s": false, "fixed:30s": false, "young-daly:59s": false, "young-daly:1m": true, "daily": false, "": false} {
		_, err := CheckpointTimer(spec)
		if (err == nil) != ok {
			t.Errorf("CheckpointTimer(%q) error %v, want ok=%v", spec, err, ok)
		}
	}
}

func TestEveryPolicyAssembles(t *testing.T) {
	for _, name := range Names() {
		p, err := New(name, Options{})
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if p.Grace != DefaultGrace || Doc(name) == "" {
			t.Errorf("%s: grace %s, doc %q", name, p.Grace, Doc(name))
		}
	}
	if _, err := New("lottery", Options{}); err == nil || !strings.Contains(err.Error(), "lottery") {
		t.Errorf("unknown policy: error %v", err)
	}
	if p, _ := New("prescient", Options{}); p.Checkpoint == nil || p.Preemptor == nil {
		t.Error("prescient has no checkpoint timer or no preemptor")
	}
	if p, _ := New("prescient", Options{Grace: time.Minute}); p.Grace != time.Minute {
		t.Errorf("grace %s, want 1m", p.Grace)
	}
}

// FuzzCheckpointTimer: any --checkpoint value gives a timer or an error
// that names it, never a panic.
func FuzzCheckpointTimer(f *testing.F) {
	for _, s := range []string{"none", "young-daly", "young-daly:20m", "fixed:60m", "fixed:", "young-daly:", ":", "fixed:-1s", "young-daly:1ns", "none:x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		timer, err := CheckpointTimer(spec)
		if err != nil {
			if !strings.Contains(err.Error(), "checkpoint") {
				t.Errorf("error %q does not say what was wrong", err)
			}
			return
		}
		if (timer == nil) != (spec == "none") {
			t.Errorf("CheckpointTimer(%q) = %v", spec, timer)
		}
	})
}
