package park

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)

// acts renders a decision as "park n1, wake n2".
func acts(as []Action) string {
	var out []string
	for _, a := range as {
		out = append(out, fmt.Sprintf("%s %s", a.Kind, a.Node))
	}
	return strings.Join(out, ", ")
}

func TestDecide(t *testing.T) {
	reactive := Policy{IdleAfter: 10 * time.Minute}
	forecast := Policy{IdleAfter: 10 * time.Minute, Forecast: true, Lookahead: 30 * time.Minute}
	// supply is an outlook with free GPUs and a queued demand.
	supply := func(free int, queued float64) Outlook {
		o := Outlook{Look: 30 * time.Minute, Queued: queued}
		o.Free(free)
		return o
	}
	for _, tc := range []struct {
		name string
		pol  Policy
		in   Input
		want string
	}{
		{"without the forecast a node empty for IdleAfter parks", reactive,
			Input{Outlook: supply(16, 100), Empty: []Empty{{Node: "n1", GPUs: 8, Since: t0.Add(-10 * time.Minute)}}}, "park n1"},
		{"without the forecast a node empty for less stays up", reactive,
			Input{Outlook: supply(16, 0), Empty: []Empty{{Node: "n1", GPUs: 8, Since: t0.Add(-9 * time.Minute)}}}, ""},
		{"with the forecast a spare node parks at once", forecast,
			Input{Outlook: supply(24, 4), NodeGPUs: 8, Empty: []Empty{{Node: "n1", GPUs: 8, Since: t0}}}, "park n1"},
		{"with the forecast a node past IdleAfter stays up while the others fall short without it", forecast,
			Input{Outlook: supply(16, 12), NodeGPUs: 8, Empty: []Empty{{Node: "n1", GPUs: 8, Since: t0.Add(-time.Hour)}}}, ""},
		{"with the forecast a node past IdleAfter parks when the others cover the demand", forecast,
			Input{Outlook: supply(16, 8), NodeGPUs: 8, Empty: []Empty{{Node: "n1", GPUs: 8, Since: t0.Add(-time.Hour)}}}, "park n1"},
		{"each node parked is no longer room for the next, the longest empty first", forecast,
			Input{Outlook: supply(24, 8), NodeGPUs: 8, Empty: []Empty{
				{Node: "n2", GPUs: 8, Since: t0.Add(-time.Minute)}, {Node: "n1", GPUs: 8, Since: t0.Add(-2 * time.Minute)}}}, "park n1"},
		{"ties keep the caller's order", reactive,
			Input{Outlook: supply(16, 0), Empty: []Empty{{Node: "b", Since: t0.Add(-time.Hour)}, {Node: "a", Since: t0.Add(-time.Hour)}}}, "park b, park a"},
		{"a node waiting work needs is woken without the forecast", reactive,
			Input{Outlook: supply(0, 8), Asleep: []Asleep{{Node: "p1", GPUs: 8, Since: t0, Needed: "job j waits for it"}, {Node: "p2", GPUs: 8, Since: t0}}}, "wake p1"},
		{"with the forecast the longest parked are woken until the demand is covered", forecast,
			Input{Outlook: supply(4, 12), Asleep: []Asleep{
				{Node: "p3", GPUs: 8, Since: t0.Add(-time.Minute)}, {Node: "p1", GPUs: 8, Since: t0.Add(-3 * time.Minute)}, {Node: "p2", GPUs: 8, Since: t0.Add(-2 * time.Minute)}}}, "wake p1"},
		{"a node woken for work counts before the forecast's wakes", forecast,
			Input{Outlook: supply(0, 8), Asleep: []Asleep{{Node: "p1", GPUs: 8, Since: t0.Add(-time.Hour)}, {Node: "p2", GPUs: 8, Since: t0, Needed: "job j waits for it"}}}, "wake p2"},
		{"wakes come before parks", reactive,
			Input{Outlook: supply(0, 0), Empty: []Empty{{Node: "n1", Since: t0.Add(-time.Hour)}}, Asleep: []Asleep{{Node: "p1", GPUs: 8, Needed: "job j waits for it"}}}, "wake p1, park n1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.Now = t0
			if got := acts(tc.pol.Decide(tc.in)); got != tc.want {
				t.Errorf("Decide = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestDecideTellsWhy(t *testing.T) {
	pol := Policy{IdleAfter: 10 * time.Minute, Forecast: true, Lookahead: 30 * time.Minute}
	o := Outlook{Look: 30 * time.Minute, Queued: 4}
	o.Free(24)
	got := pol.Decide(Input{Now: t0, Outlook: o, NodeGPUs: 8, Empty: []Empty{{Node: "n1", GPUs: 8, Since: t0}}})
	if want := "the forecast: 16.0 GPUs there without it over the next 30m0s, 4.0 wanted and a node's 8 more"; len(got) != 1 || got[0].Reason != want {
		t.Errorf("reason %+v, want %q", got, want)
	}
	idle := Policy{IdleAfter: 10 * time.Minute}.Decide(Input{Now: t0, Empty: []Empty{{Node: "n1", Since: t0.Add(-754 * time.Second)}}})
	if want := "it ran nothing for 12m34s"; len(idle) != 1 || idle[0].Reason != want {
		t.Errorf("reason %+v, want %q", idle, want)
	}
}

// A caller whose park fails decides again on After: the rest comes out
// as if Decide had known the node would stay up.
func TestAfterAFailedParkTheRestIsDecidedAsIfKnown(t *testing.T) {
	pol := Policy{IdleAfter: 10 * time.Minute, Forecast: true, Lookahead: 30 * time.Minute}
	o := Outlook{Look: 30 * time.Minute, Queued: 8}
	o.Free(32) // four empty nodes of 8: with 8 wanted and a node's 8 more, two may go
	in := Input{Now: t0, Outlook: o, NodeGPUs: 8, Empty: []Empty{
		{Node: "n1", GPUs: 8, Since: t0.Add(-4 * time.Minute)}, {Node: "n2", GPUs: 8, Since: t0.Add(-3 * time.Minute)},
		{Node: "n3", GPUs: 8, Since: t0.Add(-2 * time.Minute)}, {Node: "n4", GPUs: 8, Since: t0.Add(-time.Minute)}}}
	first := pol.Decide(in)
	if got := acts(first); got != "park n1, park n2" {
		t.Fatalf("Decide = %q, want park n1, park n2", got)
	}
	// n1 parked, n2's park failed: n2 stays up, so n3 may go in its place.
	if got := acts(pol.Decide(in.After(first, "n2"))); got != "park n3" {
		t.Errorf("after n2 failed: %q, want park n3", got)
	}
}
