package datasets

import (
	"cmp"
	"maps"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/prescient-sched/prescient/cluster"
)

// topTenants is how many tenants Summary lists by name.
const topTenants = 10

// Summary describes a trace for `prescient datasets inspect`. Its JSON keys
// are snake_case with units in the names.
type Summary struct {
	Jobs        int       `json:"jobs"`
	Skipped     int       `json:"skipped_rows"`
	FirstSubmit time.Time `json:"first_submit"`
	LastSubmit  time.Time `json:"last_submit"`
	SpanS       float64   `json:"span_s"`

	// GPUs counts jobs by GPU count ("0" for CPU-only jobs, "1" includes
	// fractional ones).
	GPUs           map[string]int `json:"gpus"`
	FractionalJobs int            `json:"fractional_jobs"`
	GPUTimeS       float64        `json:"gpu_time_s"` // run time × GPU share, summed

	// Run-time quantiles over the jobs that ran (Attempts > 0 or a run
	// time), whether they finished or not.
	RanJobs     int     `json:"ran_jobs"`
	RunTimeP50S float64 `json:"run_time_p50_s"`
	RunTimeP90S float64 `json:"run_time_p90_s"`
	RunTimeP99S float64 `json:"run_time_p99_s"`
	RunTimeMaxS float64 `json:"run_time_max_s"`

	WithDeadline int `json:"jobs_with_deadline"`
	// Tenants counts distinct tenant names (an empty name counts as one);
	// TopTenants lists the ten with the most jobs, most first, ties by name.
	Tenants    int            `json:"tenants"`
	TopTenants []TenantCount  `json:"top_tenants"`
	Tiers      map[string]int `json:"tiers"`  // jobs by tier name
	States     map[string]int `json:"states"` // jobs by state
}

// TenantCount is a tenant and its number of jobs.
type TenantCount struct {
	Tenant string `json:"tenant"`
	Jobs   int    `json:"jobs"`
}

// Summarize describes the jobs of a read and the rows it skipped. It does
// not assume the jobs are sorted.
func Summarize(res Result) Summary {
	s := Summary{
		Jobs: len(res.Jobs), Skipped: res.Skipped,
		GPUs: map[string]int{}, Tiers: map[string]int{}, States: map[string]int{},
	}
	tenants := map[string]int{}
	var runs []float64
	for i := range res.Jobs {
		j := &res.Jobs[i]
		s.addTimes(j.SubmitTime)
		s.GPUs[strconv.Itoa(j.Spec.GPUs)]++
		s.Tiers[j.Spec.Tier.String()]++
		s.States[string(j.State)]++
		tenants[j.Spec.Tenant]++
		if j.Spec.Fractional() {
			s.FractionalJobs++
		}
		if j.Spec.HasDeadline() {
			s.WithDeadline++
		}
		if j.Attempts > 0 || j.Outcome.RunTime > 0 {
			runs = append(runs, j.Outcome.RunTime.Seconds())
			s.GPUTimeS += j.Outcome.RunTime.Seconds() * float64(j.Spec.MilliGPUs()) / cluster.MilliGPU
		}
	}
	s.SpanS = s.LastSubmit.Sub(s.FirstSubmit).Seconds()
	s.addRunTimes(runs)
	s.addTenants(tenants)
	return s
}

func (s *Summary) addTimes(t time.Time) {
	if s.FirstSubmit.IsZero() || t.Before(s.FirstSubmit) {
		s.FirstSubmit = t
	}
	if t.After(s.LastSubmit) {
		s.LastSubmit = t
	}
}

func (s *Summary) addRunTimes(runs []float64) {
	slices.Sort(runs)
	s.RanJobs = len(runs)
	s.RunTimeP50S = quantile(runs, 0.5)
	s.RunTimeP90S = quantile(runs, 0.9)
	s.RunTimeP99S = quantile(runs, 0.99)
	s.RunTimeMaxS = quantile(runs, 1)
}

func (s *Summary) addTenants(tenants map[string]int) {
	s.Tenants = len(tenants)
	names := slices.SortedFunc(maps.Keys(tenants), func(a, b string) int {
		return cmp.Or(cmp.Compare(tenants[b], tenants[a]), cmp.Compare(a, b))
	})
	for _, n := range names[:min(topTenants, len(names))] {
		s.TopTenants = append(s.TopTenants, TenantCount{Tenant: n, Jobs: tenants[n]})
	}
}

// quantile is the p-quantile of sorted values, interpolated between the
// two nearest ranks; zero for no values.
func quantile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	pos := p * float64(len(sorted)-1)
	lo := int(math.Floor(pos))
	hi := min(lo+1, len(sorted)-1)
	return sorted[lo] + (sorted[hi]-sorted[lo])*(pos-float64(lo))
}
