package lend_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/executor/lend"
)

func TestOracleAndRecentLenders(t *testing.T) {
	q := lend.Query{GPUs: 8, History: []float64{8, 8, 5, 8, 8}, Step: 2 * time.Minute, Leads: 3, Future: []float64{8, 7, 8, 8, 2, 8}}
	got, err := lend.Oracle{}.IdleAhead(q)
	if err != nil {
		t.Fatal(err)
	}
	if want := []float64{7, 8, 2}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("oracle: %v, want %v", got, want)
	}
	for window, want := range map[time.Duration]float64{2 * time.Minute: 8, 3 * time.Minute: 5, time.Hour: 5} {
		got, _ := lend.Recent{Window: window}.IdleAhead(q)
		if len(got) != 3 || got[0] != want || got[2] != want {
			t.Errorf("recent %s: %v, want %g at every lead", window, got, want)
		}
	}
	q.History = nil
	if got, _ := (lend.Recent{Window: time.Hour}).IdleAhead(q); fmt.Sprint(got) != "[0 0 0]" {
		t.Errorf("recent with no history: %v, want nothing spare", got)
	}
}

func TestAModelLenderWithoutHistoryLendsNothing(t *testing.T) {
	got, err := lend.Model{Level: 0.1}.IdleAhead(lend.Query{GPUs: 8, History: make([]float64, 10), Replicas: [][]float64{make([]float64, 10)}, Step: 5 * time.Minute, Leads: 2})
	if err != nil || fmt.Sprint(got) != "[0 0]" {
		t.Errorf("%v (%v), want [0 0]", got, err)
	}
}

func nodes(states ...lend.State) []lend.Node {
	out := make([]lend.Node, len(states))
	for k, s := range states {
		out[k] = lend.Node{State: s, GPUs: 8}
	}
	return out
}

func TestDecide(t *testing.T) {
	pol := lend.Policy{}.WithDefaults() // 5m steps, 30m loans, 2m notice
	if pol.Leads() != 7 {
		t.Fatalf("leads %d, want 7 (30 minutes of 5 and the one after)", pol.Leads())
	}
	flat := func(v float64) []float64 {
		out := make([]float64, pol.Leads())
		for k := range out {
			out[k] = v
		}
		return out
	}
	S, L, R := lend.Serving, lend.Lent, lend.Returning
	for name, tc := range map[string]struct {
		ahead          []float64
		nodes          []lend.Node
		busy           float64
		takeBack, lent []int
	}{
		"lends the last nodes first":        {flat(16), nodes(S, S, S), 8, nil, []int{2, 1}},
		"keeps the busy GPUs served":        {flat(24), nodes(S, S, S), 9, nil, []int{2}},
		"a node only while it is idle":      {flat(15), nodes(S, S, S), 0, nil, []int{2}},
		"returning nodes count as lent":     {flat(16), nodes(S, S, R), 0, nil, []int{1}},
		"nothing spare":                     {flat(7), nodes(S, S), 0, nil, nil},
		"no forecast lends nothing":         {append([]float64{nan()}, flat(24)[1:]...), nodes(S, L, L), 0, []int{1, 2}, nil},
		"demand back within the notice":     {append([]float64{16, 8}, flat(16)[2:]...), nodes(S, L, L), 0, []int{1}, nil},
		"demand back after the next choice": {append([]float64{16, 16, 16, 0}, flat(16)[4:]...), nodes(S, L, L), 0, nil, nil},
		"not lent for under the loan":       {append(flat(16)[:6], 0), nodes(S, S, S), 0, nil, []int{2, 1}},
		"but lent for less than it":         {append(flat(16)[:5], 0, 0), nodes(S, S, S), 0, nil, nil},
	} {
		t.Run(name, func(t *testing.T) {
			d := pol.Decide(tc.ahead, tc.nodes, tc.busy)
			if !slices.Equal(d.TakeBack, tc.takeBack) || !slices.Equal(d.Lend, tc.lent) {
				t.Errorf("take back %v, lend %v; want %v, %v (keep %g, loanable %g)", d.TakeBack, d.Lend, tc.takeBack, tc.lent, d.Keep, d.Loanable)
			}
		})
	}
	pol.Headroom = 1
	for name, tc := range map[string]struct {
		ahead          []float64
		nodes          []lend.Node
		busy           float64
		takeBack, lent []int
	}{
		"headroom: a node short of the forecast": {flat(16), nodes(S, S, S), 0, nil, []int{2}},
		"headroom: the busy GPUs and one":        {flat(24), nodes(S, S, S), 8, nil, []int{2}},
		"headroom: taken back a GPU early":       {flat(16), nodes(S, L, L), 0, []int{1}, nil},
		"headroom: a node kept is passed over":   {flat(24), keep(nodes(S, S, S), 2), 8, nil, []int{1}},
	} {
		t.Run(name, func(t *testing.T) {
			d := pol.Decide(tc.ahead, tc.nodes, tc.busy)
			if !slices.Equal(d.TakeBack, tc.takeBack) || !slices.Equal(d.Lend, tc.lent) {
				t.Errorf("take back %v, lend %v; want %v, %v (keep %g, loanable %g)", d.TakeBack, d.Lend, tc.takeBack, tc.lent, d.Keep, d.Loanable)
			}
		})
	}
}

// keep marks nodes k to keep.
func keep(ns []lend.Node, ks ...int) []lend.Node {
	for _, k := range ks {
		ns[k].Keep = true
	}
	return ns
}

func nan() float64 { var z float64; return z / z }

func TestTakeBackTheLeastLoadedNodesThatAreUp(t *testing.T) {
	ns := nodes(lend.Lent, lend.Lent, lend.Lent, lend.Serving, lend.Lent)
	ns[0].Load, ns[1].Load, ns[2].Load, ns[4].Load = 5, 1, 0, 2
	ns[2].Down = true
	if got := lend.TakeBack(ns, 9); !slices.Equal(got, []int{1, 4}) {
		t.Errorf("%v, want [1 4]: the least loaded lent nodes that are up", got)
	}
	if got := lend.TakeBack(ns, 100); !slices.Equal(got, []int{1, 4, 0}) {
		t.Errorf("%v, want every lent node up", got)
	}
}

func TestSettingsValidateNamesTheField(t *testing.T) {
	good := lend.Settings{Policy: lend.Policy{}.WithDefaults(), Level: lend.DefaultLevel, Recent: lend.DefaultRecent}
	if err := good.Validate("--lend-"); err != nil {
		t.Fatalf("the defaults: %v", err)
	}
	model := good
	model.Recent = 0
	if err := model.Validate("--lend-"); err != nil {
		t.Fatalf("recent 0 (the model alone): %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(*lend.Settings)
		want string
	}{
		{"every 90 seconds", func(s *lend.Settings) { s.Every = 90 * time.Second }, "--lend-every 1m30s: want whole minutes"},
		{"no notice", func(s *lend.Settings) { s.Notice = 0 }, "--lend-notice 0s"},
		{"a negative minimum loan", func(s *lend.Settings) { s.MinLoan = -time.Minute }, "--lend-min-loan -1m0s"},
		{"a level of 1", func(s *lend.Settings) { s.Level = 1 }, "--lend-level 1"},
		{"a negative headroom", func(s *lend.Settings) { s.Headroom = -1 }, "--lend-headroom -1"},
		{"a negative recent", func(s *lend.Settings) { s.Recent = -time.Minute }, "--lend-recent -1m0s"},
		{"more history than is kept", func(s *lend.Settings) { s.Recent = 5 * time.Hour }, "--lend-recent 5h0m0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := good
			tc.edit(&s)
			if err := s.Validate("--lend-"); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate() = %v, want an error with %q", err, tc.want)
			}
		})
	}
}

func TestUrgentTakesBackTheDemandBeyondWhatTheServiceHolds(t *testing.T) {
	for _, tc := range []struct {
		name       string
		busy, held float64
		censored   bool
		want       float64
	}{
		{"a replay knows the demand: what it exceeds", 10, 8, false, 2},
		{"a replay within what it holds takes nothing", 6, 8, false, 0},
		{"live, every serving GPU busy: a GPU's worth", 8, 8, true, 1},
		{"live, an idle GPU left: nothing", 7, 8, true, 0},
		{"live, serving nothing: blind, a GPU's worth", 0, 0, true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := lend.Urgent(tc.busy, tc.held, tc.censored); got != tc.want {
				t.Errorf("Urgent(%g, %g, %v) = %g, want %g", tc.busy, tc.held, tc.censored, got, tc.want)
			}
		})
	}
}
