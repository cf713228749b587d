package sim_test

import (
	"testing"

	"github.com/prescient-sched/prescient/datasets"
	"github.com/prescient-sched/prescient/executor/policies"
	"github.com/prescient-sched/prescient/internal/testenv"
)

// BenchmarkReplayPhilly replays the first 20,000 jobs of the Philly table on
// uniform:75x8 per policy (the whole table is `make eval`'s job).
func BenchmarkReplayPhilly(b *testing.B) {
	res, err := datasets.ReadTrace("philly:"+testenv.Dataset(b, "philly", "philly_jobs.csv"), datasets.ReadOptions{})
	if err != nil {
		b.Fatal(err)
	}
	jobs := res.Jobs[:20000]
	fleet, err := datasets.ReadFleet("uniform:75x8:V100")
	if err != nil {
		b.Fatal(err)
	}
	for _, p := range policies.Names() {
		b.Run(p, func(b *testing.B) {
			for b.Loop() {
				r := replay(b, p, fleet, jobs, nil)
				b.ReportMetric(float64(r.PlanCycles), "cycles/op")
			}
		})
	}
}
