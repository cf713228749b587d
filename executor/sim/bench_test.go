package sim_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster/clustertest"
	"github.com/prescient-sched/prescient/datasets"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/executor/lend"
	"github.com/prescient-sched/prescient/executor/policies"
	"github.com/prescient-sched/prescient/executor/sim"
	"github.com/prescient-sched/prescient/internal/testenv"
	"github.com/prescient-sched/prescient/training"
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

// BenchmarkReplayPhillyLending replays Philly from 2017-11-10 (15,396
// jobs) on uniform:30x8 beside the 97 GenAI containers as an inference
// pool of 13 nodes, lent by the oracle and by the reactive rule: the
// lending ticks' cost on top of the replay.
func BenchmarkReplayPhillyLending(b *testing.B) {
	res, err := datasets.ReadTrace("philly:"+testenv.Dataset(b, "philly", "philly_jobs.csv"), datasets.ReadOptions{})
	if err != nil {
		b.Fatal(err)
	}
	_, jobs := datasets.SplitByTime(res.Jobs, time.Date(2017, 11, 10, 0, 0, 0, 0, time.UTC))
	fleet, err := datasets.ReadFleet("uniform:30x8:V100")
	if err != nil {
		b.Fatal(err)
	}
	series, err := datasets.ReadSeries("genai:" + testenv.Dataset(b, "alibaba-genai", "pod_gpu_duty_cycle_anon.csv.gz"))
	if err != nil {
		b.Fatal(err)
	}
	grids, err := training.DeviceGrids(series, 5, time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	replicas := make([][]float64, len(grids))
	for i, g := range grids {
		replicas[i] = g.Idle
	}
	var nodes []string
	for k := range 13 {
		name := fmt.Sprintf("inference-%02d", k)
		fleet.Nodes = append(fleet.Nodes, clustertest.Node(name).GPUs(8, "V100").Obj())
		nodes = append(nodes, name)
	}
	for name, l := range map[string]lend.Lender{"oracle": lend.Oracle{}, "recent-30m": lend.Recent{Window: 30 * time.Minute}} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				r := replay(b, "prescient", fleet, jobs, func(c *sim.Config) {
					c.Lending = &sim.Lending{Nodes: nodes, Replicas: replicas, Lender: l}
				})
				b.ReportMetric(r.Lending.LentGPUS/3600, "lent-gpu-h/op")
				b.ReportMetric(r.Lending.InferenceShortGPUS/3600, "short-gpu-h/op")
				b.ReportMetric(r.AvgJCTS, "avg-jct-s/op")
			}
		})
	}
}

// BenchmarkReplayCurie replays the 3,000 Curie jobs submitted from
// 2012-08-01 on its own machine (5,544 nodes of 16 processors) with
// easy-backfill planning by the users' limits: jobs of up to 80,000
// processors, whose placement and reservation were cubic in their tasks.
func BenchmarkReplayCurie(b *testing.B) {
	path := "swf:" + testenv.Dataset(b, "swf", "CEA-Curie-2011-2.1-cln.first75.swf.gz")
	res, err := datasets.ReadTrace(path, datasets.ReadOptions{})
	if err != nil {
		b.Fatal(err)
	}
	_, jobs := datasets.SplitByTime(res.Jobs, time.Date(2012, 8, 1, 0, 0, 0, 0, time.UTC))
	jobs = jobs[:3000]
	fleet, err := datasets.ReadFleet(path)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		r := replay(b, "easy-backfill", fleet, jobs, func(c *sim.Config) { c.Forecaster = executor.UserEstimates{} })
		b.ReportMetric(float64(r.PlanCycles), "cycles/op")
	}
}
