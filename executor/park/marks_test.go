package park

import "testing"

func TestOnMark(t *testing.T) {
	busy, idle := true, false
	for _, tc := range []struct {
		name string
		m    Mark
		act  MarkAction
		why  string
	}{
		{"a node parked here keeps its mark", Mark{Record: &Record{State: Parked}, Parking: true, Listed: true}, KeepMark, ""},
		{"a node being woken here is uncordoned", Mark{Record: &Record{State: Waking}, Parking: true, Listed: true, Up: true}, UncordonMark, ""},
		{"a mark the plane left itself is taken off", Mark{Ours: true, Parking: true, Listed: true}, UncordonMark, ""},
		{"with parking off every mark is taken off", Mark{Listed: true}, UncordonMark, ""},
		{"a node the fleet does not list is uncordoned", Mark{Parking: true}, UncordonMark, ""},
		{"a marked node down with no record is taken as parked", Mark{Parking: true, Listed: true}, AdoptMark, ""},
		{"a marked node up with no record: are the plane's jobs there?", Mark{Parking: true, Listed: true, Up: true}, AskBusy, ""},
		{"up with none of the plane's jobs there, it is taken as parked", Mark{Parking: true, Listed: true, Up: true, Busy: &idle}, AdoptMark, ""},
		{"up with the plane's jobs there, it is uncordoned", Mark{Parking: true, Listed: true, Up: true, Busy: &busy, Unparkable: "x"}, UncordonMark, "jobs of this plane run there"},
		{"up where the Cordoner says no, it is uncordoned", Mark{Parking: true, Listed: true, Up: true, Busy: &idle, Unparkable: "a pod of another scheduler runs there"},
			UncordonMark, "a pod of another scheduler runs there"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if act, why := OnMark(tc.m); act != tc.act || why != tc.why {
				t.Errorf("OnMark = %d %q, want %d %q", act, why, tc.act, tc.why)
			}
		})
	}
}
