package sim_test

import (
	"strings"
	"testing"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/cluster/clustertest"
	"github.com/prescient-sched/prescient/executor/sim"
)

func TestAssignDatasets(t *testing.T) {
	d, err := sim.ParseDatasetSpec("50:500GB")
	if err != nil || d.N != 50 || d.Bytes != 500e9 {
		t.Fatalf("ParseDatasetSpec = %+v, %v", d, err)
	}
	jobs := make([]cluster.Job, 2000)
	for i := range jobs {
		jobs[i] = clustertest.Job("j").GPUs(1).Submitted(clustertest.Epoch).Obj()
	}
	own := &cluster.DataSource{Name: "mine", Bytes: 7}
	jobs[0].Spec.Data = own
	sim.AssignDatasets(jobs, d, 1)
	count := map[string]int{}
	for _, j := range jobs[1:] {
		if j.Spec.Data == nil || j.Spec.Data.Bytes != 500e9 || len(j.Spec.Data.Nodes) != 0 {
			t.Fatalf("job got %+v", j.Spec.Data)
		}
		count[j.Spec.Data.Name]++
	}
	if jobs[0].Spec.Data != own {
		t.Errorf("a job's own dataset was replaced")
	}
	// Zipf popularity: the first dataset is the most read, and not all
	// 50 are equally likely.
	if len(count) > 50 || count["dataset-0"] < count["dataset-1"] || count["dataset-0"] < 2000/50*3 {
		t.Errorf("popularity %v", count)
	}
	again := make([]cluster.Job, len(jobs))
	for i := range again {
		again[i] = clustertest.Job("j").GPUs(1).Submitted(clustertest.Epoch).Obj()
	}
	again[0].Spec.Data = own
	sim.AssignDatasets(again, d, 1)
	for i := range jobs {
		if jobs[i].Spec.Data.Name != again[i].Spec.Data.Name {
			t.Fatalf("job %d: %s then %s with the same seed", i, jobs[i].Spec.Data.Name, again[i].Spec.Data.Name)
		}
	}
}

func FuzzParseSyntheticSpecs(f *testing.F) {
	for _, s := range []string{"200:500GB", "1:1", "0:5GB", "10:-1", "10", ":", "3:2TiB", "0.3:2", "1e400:1", "5:1e30TB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if d, err := sim.ParseDatasetSpec(s); err == nil && (d.N < 1 || d.Bytes <= 0) {
			t.Fatalf("ParseDatasetSpec(%q) = %+v without an error", s, d)
		} else if err != nil && !strings.Contains(err.Error(), "datasets") {
			t.Fatalf("ParseDatasetSpec(%q): error %q does not name the flag", s, err)
		}
		if d, err := sim.ParseDeadlineSpec(s); err == nil && !(d.Fraction >= 0 && d.Fraction <= 1 && d.Slack > 0) {
			t.Fatalf("ParseDeadlineSpec(%q) = %+v without an error", s, d)
		}
	})
}
