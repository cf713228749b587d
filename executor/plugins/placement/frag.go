package placement

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Class is one kind of request in a workload: CPU, GPU count and share, and
// the allowed GPU models (the FGD simulator's PodResource; host memory is
// not part of it).
type Class struct {
	CPUMilli int64
	GPUs     int
	Milli    int
	Models   string // allowed models joined by "|"; "" for any
}

// Typical is the distribution of the most common request classes in a
// workload, their frequencies summing to 1: what the fragmentation of a
// node is measured against.
type Typical struct {
	Classes []Class
	Freq    []float64
	models  [][]string // Classes[i].Models split
}

// DefaultPopularity is the share of requests the typical classes cover, as
// in the FGD experiments (podPopularityThreshold 95).
const DefaultPopularity = 0.95

// ErrNoRequests is returned when a typical distribution is asked of an
// empty workload.
var ErrNoRequests = errors.New("no requests to learn a distribution from")

// NewTypical counts the request classes of a workload and keeps the most
// frequent ones until they cover popularity of all requests (FGD's
// GetTypicalPods with CPU-only requests included, step 1, no GPU weight),
// renormalised to sum to 1. Ties in count go to the larger class (CPU, then
// share, then GPUs, then models), as in the simulator.
func NewTypical(reqs []Request, popularity float64) (*Typical, error) {
	if len(reqs) == 0 {
		return nil, ErrNoRequests
	}
	if popularity <= 0 || popularity > 1 {
		return nil, fmt.Errorf("popularity %g is outside (0, 1]", popularity)
	}
	counts := map[Class]float64{}
	for i := range reqs {
		counts[classOf(&reqs[i])]++
	}
	return typicalFromCounts(counts, float64(len(reqs)), popularity), nil
}

func typicalFromCounts(counts map[Class]float64, total, popularity float64) *Typical {
	classes := make([]Class, 0, len(counts))
	for c := range counts {
		classes = append(classes, c)
	}
	slices.SortFunc(classes, func(a, b Class) int {
		if d := cmp.Compare(counts[b], counts[a]); d != 0 {
			return d
		}
		return compareClass(b, a)
	})
	t := &Typical{}
	cum := 0.0
	for _, c := range classes {
		if cum >= popularity*total {
			break
		}
		cum += counts[c]
		var models []string
		if c.Models != "" {
			models = strings.Split(c.Models, "|")
		}
		t.Classes = append(t.Classes, c)
		t.models = append(t.models, models)
		t.Freq = append(t.Freq, counts[c])
	}
	for i := range t.Freq {
		t.Freq[i] /= cum
	}
	return t
}

func compareClass(a, b Class) int {
	if d := cmp.Compare(a.CPUMilli, b.CPUMilli); d != 0 {
		return d
	}
	if d := cmp.Compare(a.Milli, b.Milli); d != 0 {
		return d
	}
	if d := cmp.Compare(a.GPUs, b.GPUs); d != 0 {
		return d
	}
	return cmp.Compare(a.Models, b.Models)
}

func classOf(r *Request) Class {
	return Class{CPUMilli: r.CPUMilli, GPUs: r.GPUs, Milli: r.Milli, Models: strings.Join(r.Models, "|")}
}

// Frag is the expected fragmentation of a node's free GPU share, in
// milli-GPUs, against the typical requests (FGD's NodeGpuShareFragAmount
// summed over all but the satisfied part): for each class, weighted by its
// frequency, all free GPU share counts as fragment when the node cannot
// host the class (wrong model, too little CPU, too few GPUs with the share
// free, or a CPU-only class); when it can, the GPUs with less than the
// class's share free count.
func (t *Typical) Frag(cpuLeft int64, model string, left []int) float64 {
	total := 0
	for _, m := range left {
		total += m
	}
	if total == 0 {
		return 0
	}
	f := 0.0
	for i := range t.Classes {
		f += t.Freq[i] * float64(classFrag(&t.Classes[i], t.models[i], cpuLeft, model, left, total))
	}
	return f
}

// classFrag is the fragment of one class on the node, in milli-GPUs.
func classFrag(c *Class, models []string, cpuLeft int64, model string, left []int, total int) int {
	if c.Milli == 0 || cpuLeft < c.CPUMilli {
		return total
	}
	if len(models) > 0 && (model == "" || !slices.Contains(models, model)) {
		return total
	}
	if !canHostGPUs(left, c.Milli, c.GPUs) {
		return total
	}
	frag := 0
	for _, m := range left {
		if m < c.Milli {
			frag += m
		}
	}
	return frag
}

// NewTypicalWeighted is NewTypical over weighted requests (a decayed
// histogram: recent requests weigh more). Requests of weight ≤ 0 are left
// out; it fails when none is left.
func NewTypicalWeighted(reqs []Request, weights []float64, popularity float64) (*Typical, error) {
	if len(weights) != len(reqs) {
		return nil, fmt.Errorf("%d weights for %d requests", len(weights), len(reqs))
	}
	if popularity <= 0 || popularity > 1 {
		return nil, fmt.Errorf("popularity %g is outside (0, 1]", popularity)
	}
	h := newHistogram()
	for i := range reqs {
		h.add(&reqs[i], weights[i])
	}
	return h.typical(popularity)
}

// histogram is a weighted histogram of request classes, summed in the
// order the requests come.
type histogram struct {
	counts map[Class]float64
	total  float64
}

func newHistogram() *histogram { return &histogram{counts: map[Class]float64{}} }

// add counts r with weight w; a weight ≤ 0 leaves it out.
func (h *histogram) add(r *Request, w float64) {
	if w > 0 {
		h.counts[classOf(r)] += w
		h.total += w
	}
}

// typical is the histogram's typical distribution (NewTypicalWeighted).
func (h *histogram) typical(popularity float64) (*Typical, error) {
	if h.total == 0 {
		return nil, ErrNoRequests
	}
	return typicalFromCounts(h.counts, h.total, popularity), nil
}
