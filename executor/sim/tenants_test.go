package sim_test

import (
	"testing"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/datasets"
	"github.com/prescient-sched/prescient/executor/sim"
)

// TestTheWorstTenantCountsOnlyTenantsWithEnoughJobs replays 3,000 Philly
// jobs: the tenants' job counts add up to the jobs finished, and the
// worst tenant's ratio is the largest mean wait over the average among
// the tenants with at least MinTenantJobs jobs, whatever the smaller
// tenants waited.
func TestTheWorstTenantCountsOnlyTenantsWithEnoughJobs(t *testing.T) {
	r := replay(t, "fifo", mustFleet(t, "uniform:12x8:V100"), phillySlice(t, 3000), nil)
	total, small := 0, 0
	want := 0.0
	for tenant, n := range r.JobsByTenant {
		total += n
		if n < sim.MinTenantJobs {
			small++
			continue
		}
		want = max(want, r.WaitByTenantS[tenant]/r.AvgWaitS)
	}
	if total != r.Finished {
		t.Errorf("tenants' jobs add up to %d, want the %d finished", total, r.Finished)
	}
	if small == 0 || want == 0 {
		t.Fatalf("%d tenants under %d jobs, worst ratio %g: the slice tests nothing", small, sim.MinTenantJobs, want)
	}
	if r.WorstTenantWaitRatio != want {
		t.Errorf("worst tenant's wait ratio %g, want %g", r.WorstTenantWaitRatio, want)
	}
}

func mustFleet(t *testing.T, spec string) *cluster.Fleet {
	t.Helper()
	f, err := datasets.ReadFleet(spec)
	if err != nil {
		t.Fatal(err)
	}
	return f
}
