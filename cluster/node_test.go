package cluster_test

import (
	"fmt"
	"testing"

	"github.com/prescient-sched/prescient/cluster"
)

// TestFitsFleet: a job is refused for a model the fleet lacks (naming the
// ones it has) or more GPUs than it has of the models the job allows; an
// empty fleet refuses nothing; counting once gives the same answers.
func TestFitsFleet(t *testing.T) {
	node := func(name, model string, n int) cluster.Node {
		gs := make([]cluster.GPU, n)
		for i := range gs {
			gs[i] = cluster.GPU{Model: model}
		}
		return cluster.Node{Name: name, GPUs: gs}
	}
	nodes := []cluster.Node{node("a", "V100", 8), node("b", "A100", 4), node("c", "V100", 8)}
	for _, c := range []struct {
		spec cluster.JobSpec
		want string // "" fits
	}{
		{cluster.JobSpec{GPUs: 20}, ""},
		{cluster.JobSpec{GPUs: 21}, "gpus: 21 is more than the fleet's 20 GPUs it may use"},
		{cluster.JobSpec{GPUs: 16, GPUModels: []string{"V100"}}, ""},
		{cluster.JobSpec{GPUs: 5, GPUModels: []string{"A100"}}, "gpus: 5 is more than the fleet's 4 GPUs it may use"},
		{cluster.JobSpec{GPUs: 1, GPUModels: []string{"H100"}}, "gpu_models: the fleet has no GPU of H100 (it has A100, V100)"},
	} {
		for _, err := range []error{cluster.FitsFleet(nodes, c.spec), cluster.CountGPUs(nodes).Fits(c.spec)} {
			if got := fmt.Sprint(err); (c.want == "" && err != nil) || (c.want != "" && got != c.want) {
				t.Errorf("%+v: %v, want %q", c.spec, err, c.want)
			}
		}
	}
	if err := cluster.FitsFleet(nil, cluster.JobSpec{GPUs: 100, GPUModels: []string{"H100"}}); err != nil {
		t.Errorf("no nodes: %v", err)
	}
}

// BenchmarkFitsFleet is the check of one submission against a 10,000-GPU
// fleet of two models (control.Plane's submit path), and against the same
// fleet counted once (simulate's check of every job of a trace).
func BenchmarkFitsFleet(b *testing.B) {
	nodes := make([]cluster.Node, 1250)
	for i := range nodes {
		model := "H100"
		if i%5 == 0 {
			model = "A100"
		}
		gs := make([]cluster.GPU, 8)
		for g := range gs {
			gs[g] = cluster.GPU{Model: model}
		}
		nodes[i] = cluster.Node{Name: fmt.Sprint("n", i), GPUs: gs}
	}
	spec := cluster.JobSpec{GPUs: 8, GPUModels: []string{"H100"}}
	b.Run("each", func(b *testing.B) {
		for b.Loop() {
			if err := cluster.FitsFleet(nodes, spec); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("counted", func(b *testing.B) {
		gpus := cluster.CountGPUs(nodes)
		for b.Loop() {
			if err := gpus.Fits(spec); err != nil {
				b.Fatal(err)
			}
		}
	})
}
