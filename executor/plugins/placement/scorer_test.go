package placement

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/cluster/clustertest"
)

// nodes builds scorer views: each entry is the free milli-GPUs of a node's
// GPUs, every node with 64 CPUs and 256 GiB.
func nodes(model string, lefts ...[]int) []*Node {
	var out []*Node
	for i, left := range lefts {
		n := clustertest.Node("n"+string(rune('a'+i))).GPUs(len(left), model).Obj()
		n.CPUMilli, n.MemoryBytes = 64000, 256<<30
		v := NewNode(i, &n)
		copy(v.MilliLeft, left)
		out = append(out, v)
	}
	return out
}

func place(t *testing.T, name string, ns []*Node, r Request, ctx *Context) Choice {
	t.Helper()
	sc, err := New(name)
	if err != nil {
		t.Fatal(err)
	}
	c, ok := Place(ns, &r, sc, ctx, &Scratch{})
	if !ok {
		t.Fatalf("%s: request %+v placed nowhere", name, r)
	}
	return c
}

func share(milli int) Request { return Request{CPUMilli: 1000, GPUs: 1, Milli: milli} }
func whole(n int) Request     { return Request{CPUMilli: 1000, GPUs: n, Milli: cluster.MilliGPU} }

func TestBaselinesFollowTheirDefinitions(t *testing.T) {
	typical, err := NewTypical([]Request{share(500), share(500), whole(1), whole(2)}, 1)
	if err != nil {
		t.Fatal(err)
	}
	ctx := &Context{Typical: typical}
	full, half := cluster.MilliGPU, 500
	tests := []struct {
		name      string
		placement string
		nodes     [][]int
		req       Request
		wantNode  int
		wantGPU   int // -1: not checked
	}{
		{"best-fit takes the node with the least GPU share left", BestFitName,
			[][]int{{full, full, full, full}, {full, 0, 0, 0}}, whole(1), 1, 0},
		{"best-fit takes the best-fitting GPU of the node", BestFitName,
			[][]int{{full, 700, 300, 0}}, share(300), 0, 2},
		{"dot-product prefers the node whose free vector aligns least (fuller)", DotProductName,
			[][]int{{full, full, full, full}, {full, full, 0, 0}}, whole(1), 1, 0},
		{"gpu-packing prefers a GPU already shared", GPUPackingName,
			[][]int{{full, full}, {full, 600}}, share(500), 1, 1},
		{"gpu-packing prefers free GPUs of a used node over a free node", GPUPackingName,
			[][]int{{full, full}, {full, 0}}, whole(1), 1, 0},
		{"spread takes the emptiest node and GPU", SpreadName,
			[][]int{{full, 0}, {full, full}}, share(500), 1, 0},
		{"fgd avoids the placement that strands a half GPU", FGDName,
			[][]int{{half, full}, {full, full}}, share(half), 0, 0},
		{"prescient fills the half-used GPU", PrescientName,
			[][]int{{full, full}, {half, full}}, share(half), 1, 0},
		{"prescient keeps room for the two-GPU jobs it sees", PrescientName,
			[][]int{{full, full, full, full}, {full, full, 0, 0}}, whole(1), 0, -1},
		{"prescient packs onto the fuller of two equal nodes", PrescientName,
			[][]int{{full, full, full, full}, {full, full, full, 0}}, whole(1), 1, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := place(t, tt.placement, nodes("V100", tt.nodes...), tt.req, ctx)
			if c.Node != tt.wantNode || (tt.wantGPU >= 0 && c.GPUs[0] != tt.wantGPU) {
				t.Fatalf("placed on node %d GPUs %v, want node %d GPU %d", c.Node, c.GPUs, tt.wantNode, tt.wantGPU)
			}
		})
	}
}

func TestGPUClusteringGroupsKinds(t *testing.T) {
	ns := nodes("V100", []int{1000, 1000, 1000, 1000}, []int{1000, 1000, 1000, 1000}, []int{1000, 1000, 1000, 1000})
	ns[1].Take(&Request{GPUs: 1, Milli: 300}, []int{0}) // node 1 runs shares
	ns[2].Take(&Request{GPUs: 1, Milli: 1000}, []int{0})
	if c := place(t, GPUClusteringName, ns, share(300), &Context{}); c.Node != 1 {
		t.Fatalf("a share went to node %d, want node 1, which runs shares only", c.Node)
	}
	if c := place(t, GPUClusteringName, ns, whole(1), &Context{}); c.Node != 2 {
		t.Fatalf("a one-GPU job went to node %d, want node 2, which runs one-GPU jobs", c.Node)
	}
}

func TestRandomSpreadsOverFeasibleNodes(t *testing.T) {
	ns := nodes("V100", []int{1000}, []int{1000}, []int{1000}, []int{0})
	ctx := &Context{Rand: rand.New(rand.NewPCG(1, 2))}
	count := make([]int, len(ns))
	for range 3000 {
		count[place(t, RandomName, ns, share(200), ctx).Node]++
	}
	if count[3] != 0 {
		t.Fatalf("random placed %d times on the full node", count[3])
	}
	for i := range 3 {
		if count[i] < 850 || count[i] > 1150 {
			t.Fatalf("random placement counts %v are not uniform over the three feasible nodes", count)
		}
	}
}

func TestBestFitNormalisesLikeKubeScheduler(t *testing.T) {
	s := []float64{40, 70, 55}
	bestFit{}.Normalize(s)
	if s[0] != 0 || s[1] != 100 || s[2] != 50 {
		t.Fatalf("normalised %v, want [0 100 50]", s)
	}
}

func TestFitsChecksModelCPUMemoryAndGPUs(t *testing.T) {
	n := nodes("T4", []int{1000, 400})[0]
	tests := []struct {
		name string
		req  Request
		want bool
	}{
		{"a share that fits", Request{GPUs: 1, Milli: 400}, true},
		{"a whole GPU while one is free", whole(1), true},
		{"two whole GPUs while one is free", whole(2), false},
		{"a model the node lacks", Request{GPUs: 1, Milli: 400, Models: []string{"V100"}}, false},
		{"too much CPU", Request{CPUMilli: 65000}, false},
		{"too much memory", Request{MemoryBytes: 257 << 30}, false},
		{"a CPU-only request", Request{CPUMilli: 1000}, true},
	}
	for _, tt := range tests {
		if got := n.Fits(&tt.req); got != tt.want {
			t.Errorf("%s: Fits = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestTypicalAndFrag(t *testing.T) {
	reqs := []Request{share(500), share(500), share(500), whole(1), {CPUMilli: 2000}}
	typ, err := NewTypical(reqs, 0.6)
	if err != nil {
		t.Fatal(err)
	}
	if len(typ.Classes) != 1 || typ.Classes[0].Milli != 500 || typ.Freq[0] != 1 {
		t.Fatalf("60%% popularity keeps %+v %v, want the share class alone", typ.Classes, typ.Freq)
	}
	typ, _ = NewTypical(reqs, 1)
	// On a node with GPUs at 300 and 1000 free: the share class (3/5) sees
	// 300 stranded, the whole-GPU class (1/5) too, the CPU class (1/5) all
	// 1300 (FGD counts every GPU share as fragment for CPU-only requests).
	want := 0.6*300 + 0.2*300 + 0.2*1300
	if got := typ.Frag(64000, "V100", []int{300, 1000}); math.Abs(got-want) > 1e-9 {
		t.Fatalf("Frag = %v, want %v", got, want)
	}
	if got := typ.Frag(500, "V100", []int{300, 1000}); math.Abs(got-1300) > 1e-9 {
		t.Fatalf("Frag with too little CPU for any class = %v, want all 1300", got)
	}
	if _, err := NewTypical(nil, 0.9); err == nil {
		t.Fatal("a distribution of no requests was accepted")
	}
}

func TestNewRejectsUnknownNames(t *testing.T) {
	if _, err := New("worst-fit"); err == nil {
		t.Fatal("an unknown placement was accepted")
	}
}
