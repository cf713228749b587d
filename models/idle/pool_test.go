package idle

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"
)

func minutes(ms ...int) []time.Time {
	out := make([]time.Time, len(ms))
	for i, m := range ms {
		out[i] = t0.Add(time.Duration(m) * time.Minute)
	}
	return out
}

func TestNewPoolCarriesSamplesForwardUpToMaxGap(t *testing.T) {
	p, err := NewPool("vc", minutes(0, 1, 9), []float64{3, 4, 5}, []float64{8, 8, 8}, nil, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// Minutes 2..6 carry minute 1's value (at most 5 minutes old); 7 and 8 are unknown.
	want := []float64{3, 4, 4, 4, 4, 4, 4, math.NaN(), math.NaN(), 5}
	if p.Len() != len(want) {
		t.Fatalf("len %d", p.Len())
	}
	for i, w := range want {
		if got := p.Idle[i]; got != w && !(math.IsNaN(got) && math.IsNaN(w)) {
			t.Fatalf("minute %d: %v, want %v", i, got, w)
		}
	}
	if _, err := NewPool("vc", minutes(0), []float64{1, 2}, []float64{8}, nil, time.Minute); err == nil {
		t.Fatal("mismatched lengths accepted")
	}
}

func TestDeviceGridsAndPools(t *testing.T) {
	devs := []Device{
		{ID: "a", Times: minutes(0, 1, 2), Values: []float64{0, 50, 1}},
		{ID: "b", Times: minutes(1, 2), Values: []float64{4.9, 5}},
		{ID: "c", Times: minutes(0, 1, 2), Values: []float64{0, 0, 0}},
	}
	g, err := DeviceGrids(devs, 5, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(g[0].Idle, []float64{1, 0, 1}) || !math.IsNaN(g[1].Idle[0]) || g[1].Idle[1] != 1 || g[1].Idle[2] != 0 {
		t.Fatalf("grids %+v", g)
	}
	// Three devices in pools of two: two pools; at minute 1 all three have
	// a value and two are idle.
	pools := PoolsFromGrids(g, 2, 0)
	if len(pools) != 2 || pools[0].Capacity[1]+pools[1].Capacity[1] != 3 || pools[0].Idle[1]+pools[1].Idle[1] != 2 {
		t.Fatalf("pools %+v %+v", pools[0], pools[1])
	}
	// In pools of four, a last pool smaller than half a pool joins the one before.
	five := append(slices.Clone(g), Grid{ID: "d", Start: t0, Step: time.Minute, Idle: []float64{1, 1, 1}}, Grid{ID: "e", Start: t0, Step: time.Minute, Idle: []float64{0, 0, 0}})
	if p := PoolsFromGrids(five, 4, 0); len(p) != 1 || p[0].Capacity[2] != 5 {
		t.Fatalf("pools of four from five devices: %d", len(p))
	}
	if len(PoolsFromGrids(g, 1, 0)) != 3 || len(PoolsFromGrids(g, 1, 7)) != 3 {
		t.Fatal("pools of one")
	}
}

func TestHeldOutIsStableAndProper(t *testing.T) {
	ids := []string{"vc1", "vc2", "vc3", "vc4", "vc5", "vc6", "vc7", "vc8"}
	a := HeldOut(ids, 0.25)
	if len(a) != 2 {
		t.Fatalf("held out %v", a)
	}
	rev := slices.Clone(ids)
	slices.Reverse(rev)
	if c := HeldOut(rev, 0.25); len(c) != 2 || !mapsEqual(a, c) {
		t.Fatalf("the order of the IDs changed the split: %v vs %v", a, c)
	}
	if len(HeldOut(ids[:1], 0.5)) != 0 || len(HeldOut(ids[:2], 0.9)) != 1 {
		t.Fatal("a split must leave a series to train on")
	}
}

func mapsEqual(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

func TestSurvivalTable(t *testing.T) {
	// A device idle in long runs: once idle for a while, it stays idle.
	g := Grid{ID: "d", Start: t0, Step: time.Minute, Idle: make([]float64, 600)}
	for i := range g.Idle {
		if (i/100)%2 == 0 {
			g.Idle[i] = 1
		}
	}
	s := FitSurvival([]Grid{g}, 30)
	if !s.validate() {
		t.Fatal("invalid table")
	}
	if !(s.IdleThrough(10*time.Minute, 15*time.Minute) > 0.7) || s.IdleThrough(0, time.Minute) != 0 || !(s.IdleAt(0, time.Minute) < 0.1) {
		t.Fatalf("through %v, busy-idle-at %v", s.IdleThrough(10*time.Minute, 15*time.Minute), s.IdleAt(0, time.Minute))
	}
}

func TestGroups(t *testing.T) {
	for _, tc := range []struct {
		n, size int
		want    string
	}{
		{16, 8, "[[0 1 2 3 4 5 6 7] [8 9 10 11 12 13 14 15]]"},
		{19, 8, "[[0 1 2 3 4 5 6 7] [8 9 10 11 12 13 14 15 16 17 18]]"},
		{21, 8, "[[0 1 2 3 4 5 6 7] [8 9 10 11 12 13 14 15] [16 17 18 19 20]]"},
		{3, 8, "[[0 1 2]]"},
	} {
		xs := make([]int, tc.n)
		for i := range xs {
			xs[i] = i
		}
		groups := Groups(xs, tc.size)
		if got := fmt.Sprint(groups); got != tc.want {
			t.Errorf("%d in %d: %s, want %s", tc.n, tc.size, got, tc.want)
		}
		_ = append(groups[0], -1) // a group's append must not write into the input
		for i, x := range xs {
			if x != i {
				t.Fatalf("%d in %d: the input changed to %v", tc.n, tc.size, xs)
			}
		}
	}
}
