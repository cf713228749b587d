// Package datasetstest loads the real traces in shared/datasets for the tests
// of other packages.
package datasetstest

import (
	"testing"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/datasets"
	"github.com/prescient-sched/prescient/internal/testenv"
)

// Philly returns the jobs of the shared Philly table, sorted by submit time.
// A missing file or a read error fails the test.
func Philly(t testing.TB) []cluster.Job {
	t.Helper()
	res, err := datasets.ReadTrace("philly:"+testenv.Dataset(t, "philly", "philly_jobs.csv"), datasets.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return res.Jobs
}
