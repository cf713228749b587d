package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
)

// DeadlineSpec is "--deadlines FRACTION:SLACK": a seeded FRACTION of the
// jobs gets the deadline submit + SLACK × true duration.
type DeadlineSpec struct {
	Fraction float64
	Slack    float64
}

// ParseDeadlineSpec parses "FRACTION:SLACK", e.g. "0.3:2".
func ParseDeadlineSpec(s string) (DeadlineSpec, error) {
	f, k, ok := strings.Cut(s, ":")
	if !ok {
		return DeadlineSpec{}, fmt.Errorf("deadlines %q: want FRACTION:SLACK, e.g. 0.3:2", s)
	}
	var d DeadlineSpec
	var err error
	if d.Fraction, err = strconv.ParseFloat(f, 64); err != nil || !(d.Fraction >= 0 && d.Fraction <= 1) {
		return DeadlineSpec{}, fmt.Errorf("deadlines %q: fraction %q is not in 0..1", s, f)
	}
	if d.Slack, err = strconv.ParseFloat(k, 64); err != nil || !(d.Slack > 0) || math.IsInf(d.Slack, 0) {
		return DeadlineSpec{}, fmt.Errorf("deadlines %q: slack %q is not a positive number", s, k)
	}
	return d, nil
}

// AssignDeadlines gives jobs without a deadline one, per the spec, drawn
// with the seed. It changes jobs in place.
func AssignDeadlines(jobs []cluster.Job, d DeadlineSpec, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0xdead1))
	for i := range jobs {
		j := &jobs[i]
		if rng.Float64() >= d.Fraction || j.Spec.HasDeadline() {
			continue
		}
		slack := time.Duration(float64(j.Outcome.RunTime) * d.Slack)
		j.Spec.Deadline = j.SubmitTime.Add(max(slack, time.Second))
	}
}

// AssignTiers gives every job a tier drawn with the seed from mix (weights,
// which need not sum to 1), for traces that record none. It changes jobs in
// place; an empty or all-zero mix changes nothing.
func AssignTiers(jobs []cluster.Job, mix map[cluster.Tier]float64, seed uint64) error {
	var tiers []cluster.Tier
	var cum []float64
	total := 0.0
	for _, t := range cluster.Tiers() {
		w := mix[t]
		if w < 0 || math.IsNaN(w) || math.IsInf(w, 0) {
			return fmt.Errorf("tier mix: %s weight %g is not a finite, non-negative number", t, w)
		}
		if w > 0 {
			total += w
			tiers, cum = append(tiers, t), append(cum, total)
		}
	}
	if total == 0 {
		return nil
	}
	rng := rand.New(rand.NewPCG(seed, 0x7135))
	for i := range jobs {
		x := rng.Float64() * total
		k := 0
		for k < len(cum)-1 && x >= cum[k] {
			k++
		}
		jobs[i].Spec.Tier = tiers[k]
	}
	return nil
}

// DatasetSpec is "--datasets N:SIZE": every job that names no dataset reads
// one of N datasets of SIZE bytes each, drawn with the seed by popularity
// (Zipf, exponent 1.1: a few datasets are read by most jobs).
type DatasetSpec struct {
	N     int
	Bytes int64
}

// ParseDatasetSpec parses "N:SIZE", e.g. "200:500GB".
func ParseDatasetSpec(s string) (DatasetSpec, error) {
	n, size, ok := strings.Cut(s, ":")
	if !ok {
		return DatasetSpec{}, fmt.Errorf("datasets %q: want N:SIZE, e.g. 200:500GB", s)
	}
	var d DatasetSpec
	var err error
	if d.N, err = strconv.Atoi(n); err != nil || d.N < 1 || d.N > 1_000_000 {
		return DatasetSpec{}, fmt.Errorf("datasets %q: count %q is not an integer in 1..1000000", s, n)
	}
	if d.Bytes, err = cluster.ParseBytes(size); err != nil || d.Bytes <= 0 {
		return DatasetSpec{}, fmt.Errorf("datasets %q: size %q is not a positive byte size", s, size)
	}
	return d, nil
}

// AssignDatasets gives every job without a dataset one per the spec, drawn
// with the seed; no copy is warm anywhere at first. It changes jobs in place.
func AssignDatasets(jobs []cluster.Job, d DatasetSpec, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0xda7a))
	var z *rand.Zipf
	if d.N > 1 {
		z = rand.NewZipf(rng, 1.1, 1, uint64(d.N-1))
	}
	for i := range jobs {
		j := &jobs[i]
		if j.Spec.Data != nil {
			continue
		}
		k := uint64(0)
		if z != nil {
			k = z.Uint64()
		}
		j.Spec.Data = &cluster.DataSource{Name: fmt.Sprintf("dataset-%d", k), Bytes: d.Bytes}
	}
}

// AssignJobTypes labels every job without a type (executor.JobTypeLabel)
// with one of types, drawn uniformly with the seed, for traces that record
// none. It changes jobs in place.
func AssignJobTypes(jobs []cluster.Job, types []string, seed uint64) {
	if len(types) == 0 {
		return
	}
	rng := rand.New(rand.NewPCG(seed, 0x7e5))
	for i := range jobs {
		j := &jobs[i]
		if j.Spec.Labels[executor.JobTypeLabel] != "" {
			continue
		}
		labels := make(map[string]string, len(j.Spec.Labels)+1)
		for k, v := range j.Spec.Labels {
			labels[k] = v
		}
		labels[executor.JobTypeLabel] = types[rng.IntN(len(types))]
		j.Spec.Labels = labels
	}
}
