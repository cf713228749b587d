package executor_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/cluster/clustertest"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/executor/plugins/firstfit"
	"github.com/prescient-sched/prescient/executor/policies"
	"github.com/prescient-sched/prescient/internal/testenv"
)

// TestGavelSpeeds recomputes executor.GavelSpeeds: per GPU model, the
// median over job types of the isolated one-GPU throughput against the
// V100's.
func TestGavelSpeeds(t *testing.T) {
	col, rows := testenv.DatasetCSV(t, "gavel", "simulation_throughputs_flat.csv")
	tput := map[string]map[string]float64{} // job type → GPU type → steps/s
	for _, r := range rows {
		if r[col["colocated_job_type"]] != "" || r[col["scale_factor"]] != "1" {
			continue
		}
		v, err := strconv.ParseFloat(r[col["throughput"]], 64)
		if err != nil {
			t.Fatal(err)
		}
		if tput[r[col["job_type"]]] == nil {
			tput[r[col["job_type"]]] = map[string]float64{}
		}
		tput[r[col["job_type"]]][r[col["gpu_type"]]] = v
	}
	for model, want := range executor.GavelSpeeds {
		var ratios []float64
		for _, byGPU := range tput {
			if a, b := byGPU[map[string]string{"K80": "k80", "P100": "p100", "V100": "v100"}[model]], byGPU["v100"]; a > 0 && b > 0 {
				ratios = append(ratios, a/b)
			}
		}
		median := testenv.Median(ratios)
		if d := median - want; d > 0.001 || d < -0.001 {
			t.Errorf("%s: speed %.3f, Gavel median %.4f over %d job types", model, want, median, len(ratios))
		}
	}
	if executor.Speed("V100M32") != 1 || executor.Speed("P100-12GB") != executor.GavelSpeeds["P100"] || executor.Speed("H100") != 1 {
		t.Error("Speed does not match families or stand in with the V100's")
	}
	// Per job type: every type Gavel measured, to three decimals.
	if len(executor.GavelJobSpeeds) != len(tput) {
		t.Errorf("%d job types, Gavel has %d", len(executor.GavelJobSpeeds), len(tput))
	}
	for jt, byGPU := range tput {
		got, ok := executor.GavelJobSpeeds[jt]
		if !ok {
			t.Errorf("job type %q is missing", jt)
			continue
		}
		for model, gpu := range map[string]string{"K80": "k80", "P100": "p100", "V100": "v100"} {
			if d := got[model] - byGPU[gpu]/byGPU["v100"]; d > 0.0006 || d < -0.0006 {
				t.Errorf("%s on %s: %.3f, Gavel %.4f", jt, model, got[model], byGPU[gpu]/byGPU["v100"])
			}
		}
	}
	typed := clustertest.Job("j").GPUs(1).Submitted(clustertest.Epoch).Obj()
	typed.Spec.Labels = map[string]string{executor.JobTypeLabel: "Recommendation (batch size 1024)"}
	if s := executor.JobSpeed(&typed, "K80"); s != executor.GavelJobSpeeds["Recommendation (batch size 1024)"]["K80"] || s <= 1 {
		t.Errorf("a recommendation job on a K80: speed %g, want its type's (above 1)", s)
	}
	untyped := clustertest.Job("u").GPUs(1).Submitted(clustertest.Epoch).Obj()
	if executor.JobSpeed(&untyped, "K80") != executor.GavelSpeeds["K80"] || executor.JobSpeed(&typed, "H100") != 1 {
		t.Error("JobSpeed without a known type, or on a model Gavel did not measure, is not Speed's")
	}
}

// A job of a type that runs faster on K80s than on V100s is offered the
// K80s first.
func TestFastestFirstFollowsTheJobsOwnSpeeds(t *testing.T) {
	fleet := clustertest.Fleet(clustertest.Node("k").GPUs(4, "K80").Obj(), clustertest.Node("v").GPUs(4, "V100").Obj())
	snap := cluster.NewSnapshot(fleet, clustertest.Epoch)
	ff := (&executor.FastestFirst{Inner: firstfit.New()}).ForCycle(&executor.PlanInput{Now: clustertest.Epoch, Cluster: snap})
	for jt, want := range map[string]string{"Recommendation (batch size 1024)": "k", "ResNet-50 (batch size 64)": "v"} {
		job := clustertest.Job("j").GPUs(2).Submitted(clustertest.Epoch).Obj()
		job.Spec.Labels = map[string]string{executor.JobTypeLabel: jt}
		allocs, ok, why := ff.Place(&job, executor.NewCapacity(snap))
		if !ok || allocs[0].GPU.Node != want {
			t.Errorf("%s: placed on %v (%s), want node %s", jt, allocs, why, want)
		}
	}
}

func TestFastestFirstPrefersTheFasterModel(t *testing.T) {
	fleet := clustertest.Fleet(clustertest.Node("k").GPUs(4, "K80").Obj(), clustertest.Node("v").GPUs(4, "V100").Obj())
	snap := cluster.NewSnapshot(fleet, clustertest.Epoch)
	ff := (&executor.FastestFirst{Inner: firstfit.New()}).ForCycle(&executor.PlanInput{Now: clustertest.Epoch, Cluster: snap})
	c := executor.NewCapacity(snap)
	job := clustertest.Job("j").GPUs(2).Submitted(clustertest.Epoch).Obj()
	for i, want := range []string{"v", "v", "k"} {
		allocs, ok, why := ff.Place(&job, c)
		if !ok {
			t.Fatalf("placement %d failed: %s", i, why)
		}
		if allocs[0].GPU.Node != want {
			t.Errorf("placement %d on %s, want %s", i, allocs[0].GPU.Node, want)
		}
		if err := c.Allocate(allocs); err != nil {
			t.Fatal(err)
		}
	}
	// A job that names a model keeps it.
	pinned := clustertest.Job("p").GPUs(1).Models("K80").Submitted(clustertest.Epoch.Add(time.Minute)).Obj()
	if allocs, ok, _ := ff.Place(&pinned, c); !ok || allocs[0].GPU.Node != "k" {
		t.Errorf("a K80 job was placed on %v (ok %v)", allocs, ok)
	}
}

// With Policy.Speed the planner expects a job placed on a K80 to end its
// forecast over the K80's speed later: a wider job queued behind it gets
// its reservation from then, not from the V100 time.
func TestPlannerScalesAPlacedJobsEndByItsGPUsSpeed(t *testing.T) {
	fleet := clustertest.Fleet(clustertest.Node("k").GPUs(2, "K80").Obj())
	snap := cluster.NewSnapshot(fleet, clustertest.Epoch)
	first := clustertest.Job("first").GPUs(1).Submitted(clustertest.Epoch).Obj()
	wide := clustertest.Job("wide").GPUs(2).Submitted(clustertest.Epoch.Add(time.Second)).Obj()
	fc := func(j *cluster.Job) executor.Forecast {
		return executor.Forecast{Job: j.ID, DurationP50: time.Hour, DurationP90: time.Hour}
	}
	for _, speeds := range []bool{false, true} {
		pol, err := policies.New("easy-backfill", policies.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if speeds {
			pol.Speed = executor.JobSpeed
		}
		f, err := executor.New(pol)
		if err != nil {
			t.Fatal(err)
		}
		in := executor.PlanInput{Now: clustertest.Epoch, Cluster: snap, Queue: []*executor.JobView{
			{Job: &first, Forecast: fc(&first), QueuedSince: clustertest.Epoch}, {Job: &wide, Forecast: fc(&wide), QueuedSince: clustertest.Epoch}}}
		plan, err := f.Plan(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		want := clustertest.Epoch.Add(time.Hour)
		if speeds {
			want = clustertest.Epoch.Add(time.Duration(float64(time.Hour) / executor.GavelSpeeds["K80"]))
		}
		var why string
		for _, d := range plan.Waiting {
			if d.Job == "wide" {
				why = d.Reason
			}
		}
		if len(plan.Placements) != 1 || !strings.Contains(why, "reserved from "+want.Format(time.RFC3339)) {
			t.Errorf("speeds %v: %d placed, the wide job waits: %q; want its reservation from %s", speeds, len(plan.Placements), why,
				want.Format(time.RFC3339))
		}
	}
}
