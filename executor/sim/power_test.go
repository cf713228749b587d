package sim_test

import (
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/cluster/clustertest"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/executor/park"
	"github.com/prescient-sched/prescient/executor/policies"
	"github.com/prescient-sched/prescient/executor/sim"
	"github.com/prescient-sched/prescient/internal/testenv"
)

// TestLoadFractionsMatchZeus recomputes each load fraction from the Zeus
// power summaries: the median average power at the largest power limit
// over the limit.
func TestLoadFractionsMatchZeus(t *testing.T) {
	files := map[string]string{"V100": "summary_power_v100.csv", "P100": "summary_power_p100.csv",
		"A40": "summary_power_a40.csv", "RTX6000": "summary_power_rtx6000.csv"}
	for model, file := range files {
		col, rows := testenv.DatasetCSV(t, "zeus", file)
		maxLimit := 0.0
		for _, r := range rows {
			maxLimit = math.Max(maxLimit, num(t, r[col["power_limit"]]))
		}
		var fr []float64
		for _, r := range rows {
			if num(t, r[col["power_limit"]]) == maxLimit {
				fr = append(fr, num(t, r[col["average_power"]])/maxLimit)
			}
		}
		median := testenv.Median(fr)
		if got := sim.LoadFraction[model]; math.Abs(got-median) > 0.001 {
			t.Errorf("%s: load fraction %.3f, Zeus median %.4f", model, got, median)
		}
	}
}

func num(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestDefaultPowerStandsInForUnknownModels(t *testing.T) {
	v100 := sim.DefaultPower(cluster.NewGPU(0, "V100M32"))
	if math.Abs(v100.BusyW-0.708*300) > 1e-9 || math.Abs(v100.IdleW-45) > 1e-9 {
		t.Errorf("V100M32: %+v, want busy 0.708×300 W (Zeus), idle 15%% of 300 W", v100)
	}
	a100 := sim.DefaultPower(cluster.NewGPU(0, "A100-SXM4-80GB"))
	if a100.BusyW != sim.LoadFraction[sim.StandInModel]*400 {
		t.Errorf("A100: busy %g W, want the V100 stand-in fraction of 400 W", a100.BusyW)
	}
	if np := sim.DefaultNodePower(clustertest.Node("n").GPUs(8, "V100").Obj()); np.BaseW != 600 || np.ParkedW != 10 {
		t.Errorf("8-GPU node: %+v, want 600 W base, 10 W parked", np)
	}
}

// oneGPUJob runs d from submit (hours after Epoch).
func oneGPUJob(id string, submitH float64, d time.Duration) cluster.Job {
	j := clustertest.Job(id).GPUs(1).Submitted(clustertest.Epoch.Add(time.Duration(submitH * float64(time.Hour)))).Obj()
	j.Outcome.RunTime = d
	return j
}

func TestParkingIdleNodes(t *testing.T) {
	// Per node: 250 W base (200 + 50 per GPU), one V100 at 45 W idle and
	// 212.4 W busy, 10 W parked; a boot takes 5 minutes, the node up and
	// the job's GPU counted busy.
	const on, busy, parked = 250.0 + 45, 250.0 + 212.4, 10.0
	tests := []struct {
		name        string
		nodes       int
		jobs        []cluster.Job
		park        time.Duration
		wantJ       float64
		wantParkedS float64
	}{
		{"an empty node parks after 10 minutes", 2, []cluster.Job{oneGPUJob("j1", 0, 2*time.Hour)}, 10 * time.Minute,
			busy*7200 + on*600 + parked*6600, 6600},
		{"without parking an empty node idles", 2, []cluster.Job{oneGPUJob("j1", 0, 2*time.Hour)}, 0,
			busy*7200 + on*7200, 0},
		// j2 holds its GPU through the 5-minute boot, then works its hour.
		{"a job wakes a parked node and pays its boot", 1, []cluster.Job{oneGPUJob("j1", 0, time.Hour), oneGPUJob("j2", 3, time.Hour)}, 10 * time.Minute,
			busy*7500 + on*600 + parked*6600, 6600},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var nodes []cluster.Node
			for i := range tt.nodes {
				nodes = append(nodes, clustertest.Node("n"+strconv.Itoa(i)).GPUs(1, "V100").Obj())
			}
			r := replay(t, "fifo", clustertest.Fleet(nodes...), tt.jobs, func(c *sim.Config) { c.ParkIdleAfter, c.CheckpointCost = tt.park, 0 })
			if math.Abs(r.EnergyKWh*3.6e6-tt.wantJ) > 1 || math.Abs(r.ParkedNodeS-tt.wantParkedS) > 1e-6 {
				t.Fatalf("energy %.0f J, parked %.0f s; want %.0f J, %.0f s", r.EnergyKWh*3.6e6, r.ParkedNodeS, tt.wantJ, tt.wantParkedS)
			}
			if tt.wantParkedS > 0 && len(tt.jobs) == 2 && r.AvgJCTS != (3600+3900)/2 {
				t.Errorf("avg JCT %.0fs, want 3750s: the woken job waits 5 minutes for the boot", r.AvgJCTS)
			}
		})
	}
}

// A node parked when the replay starts (a live plane's parked node in a
// what-if) makes a job placed on it wait for its boot; an awake one does
// not.
func TestANodeParkedAtTheStartMakesItsFirstJobWaitForTheBoot(t *testing.T) {
	for _, tt := range []struct {
		parked  []string
		wantJCT float64
	}{{nil, 3600}, {[]string{"n0"}, 3900}} {
		fleet := clustertest.Fleet(clustertest.Node("n0").GPUs(1, "V100").Obj())
		r := replay(t, "fifo", fleet, []cluster.Job{oneGPUJob("j1", 0, time.Hour)}, func(c *sim.Config) {
			c.ParkIdleAfter, c.ParkedAtStart, c.CheckpointCost = 10*time.Minute, tt.parked, 0
		})
		if r.AvgJCTS != tt.wantJCT {
			t.Errorf("parked at the start %v: JCT %.0f s, want %.0f", tt.parked, r.AvgJCTS, tt.wantJCT)
		}
	}
	// Without ParkIdleAfter the node parked at the start is the only one
	// parked: it waits to be woken, the other never parks.
	fleet := clustertest.Fleet(clustertest.Node("n0").GPUs(1, "V100").Obj(), clustertest.Node("n1").GPUs(1, "V100").Obj())
	jobs := []cluster.Job{oneGPUJob("j1", 0, time.Hour), oneGPUJob("j2", 0, time.Hour), oneGPUJob("j3", 5, time.Hour)}
	r := replay(t, "fifo", fleet, jobs, func(c *sim.Config) { c.ParkedAtStart, c.CheckpointCost, c.Outcomes = []string{"n0"}, 0, true })
	if r.AvgJCTS != (3900+3600+3600)/3.0 {
		t.Errorf("avg JCT %.0f s, want one job a boot late (the first on n0) and the others on time", r.AvgJCTS)
	}
	if r.ParkedNodeS > 1e-6 {
		t.Errorf("parked %g node-seconds, want none: n0 was woken at once, n1 never parked", r.ParkedNodeS)
	}
	var late int
	for _, o := range r.Outcomes {
		if d := o.Start.Sub(clustertest.Epoch); d == sim.DefaultWakeTime {
			late++
		}
	}
	if late != 1 {
		t.Errorf("outcomes %+v: want one job starting to work a boot after its start", r.Outcomes)
	}
}

// With WakeLast a parked node takes only what the awake ones leave
// waiting, as the control plane wakes nodes.
func TestWakeLastPlacesOnAParkedNodeOnlyWhatTheAwakeOnesCannotTake(t *testing.T) {
	for _, tt := range []struct {
		wakeLast bool
		jobs     int
		wantJCT  float64
	}{
		{false, 1, 3900}, // the placer takes the emptiest node first: the parked one
		{true, 1, 3600},
		{true, 2, (3600 + 3900) / 2.0}, // the second wakes it
	} {
		fleet := clustertest.Fleet(clustertest.Node("n0").GPUs(1, "V100").Obj(), clustertest.Node("n1").GPUs(1, "V100").Obj())
		var jobs []cluster.Job
		for i := range tt.jobs {
			jobs = append(jobs, oneGPUJob("j"+strconv.Itoa(i), 0, time.Hour))
		}
		r := replay(t, "fifo", fleet, jobs, func(c *sim.Config) {
			c.ParkedAtStart, c.WakeLast, c.CheckpointCost = []string{"n0"}, tt.wakeLast, 0
		})
		if r.AvgJCTS != tt.wantJCT {
			t.Errorf("WakeLast %v, %d jobs: avg JCT %.0f s, want %.0f", tt.wakeLast, tt.jobs, r.AvgJCTS, tt.wantJCT)
		}
	}
}

// With WakeLast a job waiting for a preempted job's GPUs wakes no parked
// node, though another arrival plans again while the victim checkpoints.
func TestWakeLastWakesNothingForAJobWaitingForAVictimsGPUs(t *testing.T) {
	at := func(d time.Duration) time.Time { return clustertest.Epoch.Add(d) }
	job := func(id string, tier cluster.Tier, submit, run time.Duration) cluster.Job {
		j := clustertest.Job(id).GPUs(1).Tier(tier).Submitted(at(submit)).Checkpointable(time.Minute).Obj()
		j.Outcome.RunTime = run
		return j
	}
	jobs := []cluster.Job{
		job("victim", cluster.TierOpportunistic, 0, 10*time.Hour),
		job("prod", cluster.TierProduction, time.Hour, time.Hour),
		job("later", cluster.TierOpportunistic, time.Hour+10*time.Second, time.Hour),
	}
	fleet := clustertest.Fleet(clustertest.Node("n0").GPUs(1, "V100").Obj(), clustertest.Node("n1").GPUs(1, "V100").Obj())
	r := replay(t, "prescient", fleet, jobs, func(c *sim.Config) {
		c.ParkedAtStart, c.WakeLast, c.Outcomes, c.CheckpointCost = []string{"n1"}, true, true, time.Minute
	})
	for _, o := range r.Outcomes {
		if o.Job == "prod" && (o.Start.Before(at(time.Hour)) || !o.Start.Before(at(time.Hour+sim.DefaultWakeTime))) {
			t.Errorf("prod started to work at %s; want within the victim's checkpoint after %s, not a boot later", o.Start, at(time.Hour))
		}
	}
}

// With WakeLast the awake node a gang was planned on with parked ones
// stays up while they boot, as the control plane keeps up the nodes the
// waiting jobs were planned on: else it parks meanwhile, its waking
// leaves the others time to park again, and the gang never starts.
func TestWakeLastKeepsUpTheNodesAGangWaitsWith(t *testing.T) {
	var ns []cluster.Node
	for _, name := range []string{"n0", "n1", "n2"} {
		ns = append(ns, clustertest.Node(name).GPUs(1, "V100").Obj())
	}
	submit := clustertest.Epoch.Add(30 * time.Second) // n0 up, empty for less than ParkIdleAfter
	gang := clustertest.Job("gang").GPUs(3).Gang(3).Submitted(submit).Obj()
	gang.Outcome.RunTime = time.Hour
	r := replay(t, "fifo", clustertest.Fleet(ns...), []cluster.Job{gang}, func(c *sim.Config) {
		c.ParkIdleAfter, c.ParkedAtStart, c.WakeLast, c.Outcomes = time.Minute, []string{"n1", "n2"}, true, true
		c.Until = clustertest.Epoch.Add(24 * time.Hour)
	})
	if want := submit.Add(sim.DefaultWakeTime); r.Finished != 1 || !r.Outcomes[0].Start.Equal(want) {
		t.Errorf("%d of 1 jobs finished, outcomes %+v; want the gang working at %s, once n1 and n2 are up", r.Finished, r.Outcomes, want)
	}
}

// With WakeLast a job held for cleaner power while every node is parked
// wakes one when the hold ends: the replay plans again when the plan on
// the parked nodes asks to, as the control plane's cycles would.
func TestWakeLastWakesForAJobHeldWhileAllNodesAreParked(t *testing.T) {
	t0 := clustertest.Epoch
	pol, err := policies.New("fifo", policies.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if pol.Hold, err = executor.NewCarbonHold([]cluster.Tier{cluster.TierBatch}, 6*time.Hour, 0.2); err != nil {
		t.Fatal(err)
	}
	carbon, err := sim.NewCarbonSeries([]time.Time{t0, t0.Add(4 * time.Hour)}, []float64{500, 150})
	if err != nil {
		t.Fatal(err)
	}
	j := clustertest.Job("held").GPUs(1).Tier(cluster.TierBatch).Submitted(t0.Add(time.Minute)).Obj()
	j.Outcome.RunTime = time.Hour
	fleet := clustertest.Fleet(clustertest.Node("n0").GPUs(1, "V100").Obj())
	r := replayPolicy(t, pol, fleet, []cluster.Job{j}, func(c *sim.Config) {
		c.ParkIdleAfter, c.ParkedAtStart, c.WakeLast, c.Carbon, c.Outcomes = time.Minute, []string{"n0"}, true, carbon, true
		c.Until = t0.Add(24 * time.Hour)
	})
	if want := t0.Add(4*time.Hour + sim.DefaultWakeTime); r.Finished != 1 || !r.Outcomes[0].Start.Equal(want) {
		t.Errorf("%d of 1 jobs finished, outcomes %+v; want the job working at %s, a boot after the cleaner hours begin", r.Finished, r.Outcomes, want)
	}
}

func TestCarbonSeriesIntegral(t *testing.T) {
	t0 := clustertest.Epoch
	c, err := sim.NewCarbonSeries([]time.Time{t0, t0.Add(time.Hour)}, []float64{100, 400})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		a, b time.Duration
		want float64
	}{
		{-time.Hour, 0, 100 * 3600},                      // before the first point: the first value
		{30 * time.Minute, 90 * time.Minute, 250 * 3600}, // half at 100, half at 400
		{2 * time.Hour, 3 * time.Hour, 400 * 3600},       // after the last: the last value
		{time.Hour, time.Hour, 0},
	}
	for _, tt := range tests {
		if got := c.Integral(t0.Add(tt.a), t0.Add(tt.b)); math.Abs(got-tt.want) > 1e-6 {
			t.Errorf("∫ over [%s, %s] = %g, want %g", tt.a, tt.b, got, tt.want)
		}
	}
	if _, err := sim.NewCarbonSeries([]time.Time{t0, t0}, []float64{1, 2}); err == nil {
		t.Error("a series with a repeated time was accepted")
	}
}

func TestReplayReportsCarbon(t *testing.T) {
	// A constant 500 gCO2/kWh: kgco2 is half the energy in kWh, parking or not.
	c, err := sim.NewCarbonSeries([]time.Time{clustertest.Epoch}, []float64{500})
	if err != nil {
		t.Fatal(err)
	}
	nodes := []cluster.Node{clustertest.Node("n0").GPUs(1, "V100").Obj(), clustertest.Node("n1").GPUs(1, "V100").Obj()}
	jobs := []cluster.Job{oneGPUJob("j1", 0, time.Hour), oneGPUJob("j2", 3, time.Hour)}
	for _, park := range []time.Duration{0, 10 * time.Minute} {
		r := replay(t, "fifo", clustertest.Fleet(nodes...), jobs, func(cfg *sim.Config) { cfg.Carbon, cfg.ParkIdleAfter = c, park })
		if math.Abs(r.KgCO2-r.EnergyKWh*0.5) > 1e-9 || r.KgCO2 == 0 {
			t.Errorf("park after %s: %.6f kgCO2 for %.6f kWh, want half", park, r.KgCO2, r.EnergyKWh)
		}
	}
}

// TestZeusV100Caps recomputes executor.ZeusV100Caps from Zeus's V100
// summary: per power limit, the median over workloads (dataset, network,
// batch size, optimizer) measured there and at 250 W of the epoch-time
// ratio, and the median draw over the limit's median draw at 250 W.
func TestZeusV100Caps(t *testing.T) {
	col, rows := testenv.DatasetCSV(t, "zeus", "summary_power_v100.csv")
	type point struct{ time, power float64 }
	work := map[string]map[float64]point{}
	for _, r := range rows {
		k := r[col["dataset"]] + "/" + r[col["network"]] + "/" + r[col["batch_size"]] + "/" + r[col["optimizer"]]
		if work[k] == nil {
			work[k] = map[float64]point{}
		}
		work[k][num(t, r[col["power_limit"]])] = point{num(t, r[col["time_per_epoch"]]), num(t, r[col["average_power"]])}
	}
	median := testenv.Median
	const top = 250.0
	var full []float64
	for _, w := range work {
		if p, ok := w[top]; ok {
			full = append(full, p.power/top)
		}
	}
	fullDraw := median(full)
	for _, c := range executor.ZeusV100Caps {
		limit := c.Fraction * top
		var times, draws []float64
		for _, w := range work {
			p, ok1 := w[limit]
			q, ok2 := w[top]
			if ok1 && ok2 {
				times = append(times, p.time/q.time)
				draws = append(draws, p.power/top)
			}
		}
		if len(times) == 0 {
			t.Fatalf("no Zeus workload measured at %.0f W", limit)
		}
		slow, power := median(times), median(draws)/fullDraw
		if math.Abs(slow-c.Slowdown) > 0.001 || math.Abs(power-c.Power) > 0.001 {
			t.Errorf("%.0f W: curve %.3f slower at %.3f of the draw; Zeus %.4f and %.4f", limit, c.Slowdown, c.Power, slow, power)
		}
	}
}

// TestPowerCapsSaveEnergyAndTakeLonger: one 8-GPU job of an hour on an
// 8-GPU node under a cost capper that caps it: it ends Slowdown later and
// its GPUs draw Power of their busy power.
func TestPowerCapsSaveEnergyAndTakeLonger(t *testing.T) {
	fleet := clustertest.Fleet(clustertest.Node("n1").GPUs(8, "V100").Obj())
	j := clustertest.Job("wide").GPUs(8).Submitted(clustertest.Epoch).Obj()
	j.Outcome.RunTime = time.Hour
	jobs := []cluster.Job{j}
	run := func(price float64) *sim.Result {
		pol, err := policies.New("fifo", policies.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if price > 0 {
			if pol.PowerCap, err = executor.NewCostCapper(price, executor.ZeusV100Caps); err != nil {
				t.Fatal(err)
			}
		}
		return replayPolicy(t, pol, fleet, jobs, nil)
	}
	plain, capped := run(0), run(1)
	if capped.PowerCappedStarts != 1 || plain.PowerCappedStarts != 0 {
		t.Fatalf("capped starts %d and %d, want 1 and 0", capped.PowerCappedStarts, plain.PowerCappedStarts)
	}
	// The cap where (8 × Power + 1) × Slowdown is least: 50% of the limit.
	want := executor.ZeusV100Caps[0]
	for _, c := range executor.ZeusV100Caps {
		if (8*c.Power+1)*c.Slowdown < (8*want.Power+1)*want.Slowdown {
			want = c
		}
	}
	if want.Fraction != 0.5 {
		t.Fatalf("the cheapest cap is %.0f%%; the curve changed", want.Fraction*100)
	}
	if got, w := capped.AvgJCTS, time.Hour.Seconds()*want.Slowdown; math.Abs(got-w) > 1 {
		t.Errorf("capped JCT %.0fs, want %.0fs", got, w)
	}
	pm := sim.DefaultPower(fleet.Nodes[0].GPUs[0])
	np := sim.DefaultNodePower(fleet.Nodes[0])
	hours := want.Slowdown
	wantKWh := (8*pm.BusyW*want.Power + np.BaseW) * hours / 1000
	if math.Abs(capped.EnergyKWh-wantKWh) > 0.01 {
		t.Errorf("capped energy %.3f kWh, want %.3f", capped.EnergyKWh, wantKWh)
	}
	if !(capped.EnergyKWh < plain.EnergyKWh) {
		t.Errorf("capped energy %.3f kWh is not below uncapped %.3f", capped.EnergyKWh, plain.EnergyKWh)
	}
}

// TestOpportunisticJobsWaitForCleanerPower: the grid is at 500 gCO2/kWh
// for 3 hours, then 200. With a 4-hour carbon wait the opportunistic job
// (1 hour) starts at 3h and the standard one (5 hours, so the node is on
// either way) at once, and the replay emits less; with a 2-hour wait (the
// cleaner hours come too late) both start at once.
func TestOpportunisticJobsWaitForCleanerPower(t *testing.T) {
	c, err := sim.NewCarbonSeries([]time.Time{clustertest.Epoch, clustertest.Epoch.Add(3 * time.Hour)}, []float64{500, 200})
	if err != nil {
		t.Fatal(err)
	}
	if at, g := c.Cleanest(clustertest.Epoch, clustertest.Epoch.Add(2*time.Hour)); !at.Equal(clustertest.Epoch) || g != 500 {
		t.Errorf("cleanest of the first 2h: %s at %g, want the start at 500", at, g)
	}
	if at, g := c.Cleanest(clustertest.Epoch.Add(time.Hour), clustertest.Epoch.Add(5*time.Hour)); !at.Equal(clustertest.Epoch.Add(3*time.Hour)) || g != 200 {
		t.Errorf("cleanest of 1h-5h: %s at %g, want 3h at 200", at, g)
	}
	fleet := clustertest.Fleet(clustertest.Node("n0").GPUs(2, "V100").Obj())
	opp := oneGPUJob("opp", 0, time.Hour)
	opp.Spec.Tier = cluster.TierOpportunistic
	std := oneGPUJob("std", 0, 5*time.Hour)
	jobs := []cluster.Job{opp, std}
	run := func(wait time.Duration) *sim.Result {
		pol, err := policies.New("fifo", policies.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if pol.Hold, err = executor.NewCarbonHold([]cluster.Tier{cluster.TierOpportunistic}, wait, 0.2); err != nil {
			t.Fatal(err)
		}
		return replayPolicy(t, pol, fleet, jobs, func(cfg *sim.Config) { cfg.Carbon, cfg.Outcomes = c, true })
	}
	starts := func(r *sim.Result) map[string]time.Duration {
		out := map[string]time.Duration{}
		for _, o := range r.Outcomes {
			out[string(o.Job)] = o.Start.Sub(clustertest.Epoch)
		}
		return out
	}
	long, short := run(4*time.Hour), run(2*time.Hour)
	if s := starts(long); s["opp"] != 3*time.Hour || s["std"] != 0 {
		t.Errorf("4h wait: starts %v, want opp at 3h and std at 0", s)
	}
	if s := starts(short); s["opp"] != 0 || s["std"] != 0 {
		t.Errorf("2h wait: starts %v, want both at 0", s)
	}
	if !(long.KgCO2 < short.KgCO2) {
		t.Errorf("waiting for cleaner power emitted %.3f kgCO2, not less than %.3f", long.KgCO2, short.KgCO2)
	}
}

// TestSlowerModelsTakeLonger: with Gavel speeds an hour's job (V100 time)
// takes 1/0.247 hours on a K80; the planner sees the running job's
// slowdown.
func TestSlowerModelsTakeLonger(t *testing.T) {
	fleet := clustertest.Fleet(clustertest.Node("k").GPUs(1, "K80").Obj())
	jobs := []cluster.Job{oneGPUJob("j", 0, time.Hour)}
	plain := replay(t, "fifo", fleet, jobs, nil)
	slow := replay(t, "fifo", fleet, jobs, func(c *sim.Config) { c.Speed = executor.JobSpeed })
	if plain.AvgJCTS != 3600 {
		t.Errorf("without speeds: JCT %.0fs, want 3600s", plain.AvgJCTS)
	}
	if want := 3600 / executor.GavelSpeeds["K80"]; math.Abs(slow.AvgJCTS-want) > 1 {
		t.Errorf("on a K80: JCT %.0fs, want %.0fs", slow.AvgJCTS, want)
	}
	// A job of a type Gavel measured runs at its type's speed: a
	// recommendation model faster on a K80 than on the trace's V100, a
	// ResNet-50 slower than the median job.
	for jt, speed := range map[string]float64{"Recommendation (batch size 1024)": 1.509, "ResNet-50 (batch size 64)": 0.141} {
		typed := []cluster.Job{oneGPUJob("j", 0, time.Hour)}
		typed[0].Spec.Labels = map[string]string{executor.JobTypeLabel: jt}
		r := replay(t, "fifo", fleet, typed, func(c *sim.Config) { c.Speed = executor.JobSpeed })
		if want := 3600 / speed; math.Abs(r.AvgJCTS-want) > 1 {
			t.Errorf("%s on a K80: JCT %.0fs, want %.0fs", jt, r.AvgJCTS, want)
		}
	}
}

// TestEveryJobOnABootingNodeWaitsForTheBoot: two jobs placed together on a
// parked node, and one placed there two minutes into its boot, all start
// working when the boot ends.
func TestEveryJobOnABootingNodeWaitsForTheBoot(t *testing.T) {
	fleet := clustertest.Fleet(clustertest.Node("n0").GPUs(4, "V100").Obj())
	late := oneGPUJob("c", 1, time.Hour)
	late.SubmitTime = late.SubmitTime.Add(2 * time.Minute)
	// z runs the first 10 minutes; the node parks at 20 minutes.
	jobs := []cluster.Job{oneGPUJob("z", 0, 10*time.Minute), oneGPUJob("a", 1, time.Hour), oneGPUJob("b", 1, time.Hour), late}
	r := replay(t, "fifo", fleet, jobs, func(c *sim.Config) { c.ParkIdleAfter, c.CheckpointCost, c.Outcomes = 10*time.Minute, 0, true })
	for _, o := range r.Outcomes {
		if o.Job == "z" {
			continue
		}
		if got, want := o.End.Sub(clustertest.Epoch), time.Hour+5*time.Minute+time.Hour; got != want {
			t.Errorf("%s ends at %s, want %s (the boot ends at 1h05m)", o.Job, got, want)
		}
	}
}

// TestAPreemptionDuringTheBootCostsNothing: a long job placed on a parked
// node is displaced (srtf-oracle) by a short one before the node booted: it
// stops at once, writes no checkpoint and loses nothing, and the short job
// starts working when the boot ends.
func TestAPreemptionDuringTheBootCostsNothing(t *testing.T) {
	fleet := clustertest.Fleet(clustertest.Node("n0").GPUs(1, "V100").Obj())
	short := oneGPUJob("b", 1, 30*time.Minute)
	short.SubmitTime = short.SubmitTime.Add(2 * time.Minute)
	jobs := []cluster.Job{oneGPUJob("z", 0, 10*time.Minute), oneGPUJob("a", 1, 5*time.Hour), short}
	r := replay(t, "srtf-oracle", fleet, jobs, func(c *sim.Config) { c.ParkIdleAfter, c.Outcomes = 10*time.Minute, true })
	if r.Preemptions != 1 || r.CheckpointGPUS != 0 || r.LostGPUS != 0 {
		t.Errorf("%d preemptions, %.0f checkpoint GPU-s, %.0f lost GPU-s; want 1, 0, 0", r.Preemptions, r.CheckpointGPUS, r.LostGPUS)
	}
	for _, o := range r.Outcomes {
		if o.Job == "b" && o.End.Sub(clustertest.Epoch) != time.Hour+35*time.Minute {
			t.Errorf("b ends at %s, want 1h35m (the boot ends at 1h05m)", o.End.Sub(clustertest.Epoch))
		}
	}
}

// TestTransferSavedBytes counts the dataset bytes of attempts placed next
// to a warm copy: the job reading a dataset cached on the only node, not
// the one whose copy sits elsewhere.
func TestTransferSavedBytes(t *testing.T) {
	fleet := clustertest.Fleet(clustertest.Node("n0").GPUs(2, "V100").Obj())
	warm, cold := oneGPUJob("warm", 0, time.Hour), oneGPUJob("cold", 0, time.Hour)
	warm.Spec.Data = &cluster.DataSource{Name: "imagenet", Bytes: 150 << 30, Nodes: []string{"n0"}}
	cold.Spec.Data = &cluster.DataSource{Name: "laion", Bytes: 1 << 40, Nodes: []string{"elsewhere"}}
	r := replay(t, "fifo", fleet, []cluster.Job{warm, cold}, nil)
	if r.TransferSavedBytes != 150<<30 {
		t.Errorf("transfer_saved_bytes %d, want %d", r.TransferSavedBytes, int64(150<<30))
	}
}

func TestForecastParking(t *testing.T) {
	nodes := func(n int) *cluster.Fleet {
		var out []cluster.Node
		for i := range n {
			out = append(out, clustertest.Node("n"+strconv.Itoa(i)).GPUs(1, "V100").Obj())
		}
		return clustertest.Fleet(out...)
	}
	run := func(fleet *cluster.Fleet, jobs []cluster.Job, park time.Duration, forecast bool, mod ...func(*sim.Config)) *sim.Result {
		return replay(t, "fifo", fleet, jobs, func(c *sim.Config) {
			c.ParkIdleAfter, c.ParkForecast, c.CheckpointCost = park, forecast, 0
			for _, m := range mod {
				m(c)
			}
		})
	}
	// One 2-hour job on four nodes: the three empty ones park after 10
	// minutes.
	one := []cluster.Job{oneGPUJob("j1", 0, 2*time.Hour)}
	if r := run(nodes(4), one, 10*time.Minute, false); r.ParkedNodeS != 3*6600 {
		t.Errorf("fixed: parked %.0f node-s, want %d", r.ParkedNodeS, 3*6600)
	}
	// With the forecast, after the first job is placed: its arrival
	// foresees half a GPU over the next 30 minutes, so the first empty
	// node parks at once (the two others cover it and a node more). After
	// 10 minutes the second parks too, the third covering the demand (0.42
	// GPUs by then) without it. The replay looks again every minute: the
	// third parks at 56 minutes, when the job's chance of ending within 30
	// minutes (0.20) covers the decayed demand (0.197).
	if r := run(nodes(4), one, 10*time.Minute, true); r.ParkedNodeS != 7200+6600+3840 || r.AvgJCTS != 7200 {
		t.Errorf("forecast: parked %.0f node-s, avg JCT %.0f s; want %d, 7200 s", r.ParkedNodeS, r.AvgJCTS, 7200+6600+3840)
	}
	// Arrivals before the replay count: 4 GPUs submitted 10 minutes
	// before it foresee 2.2 GPUs over the next 30 minutes, and no node
	// parks at once; after 10 minutes (1.9 GPUs) one parks, two covering
	// the demand without it; the others at 40 minutes and at 1h53m, as the
	// demand decays and the job's end nears.
	var before park.Arrivals
	before.Add(clustertest.Epoch, clustertest.Epoch.Add(-10*time.Minute), 4)
	if r := run(nodes(4), one, 10*time.Minute, true, func(c *sim.Config) { c.Arrivals = before }); r.ParkedNodeS != 6600+4800+420 {
		t.Errorf("forecast after arrivals: parked %.0f node-s, want %d", r.ParkedNodeS, 6600+4800+420)
	}
	// The forecast is taken again while nodes are left up, not only when
	// a node empties: with a 30-minute and a 4-hour job and 3 hours of
	// ParkIdleAfter, one empty node parks at 16 minutes, once the short
	// job's likely end covers the demand and a node; the other at 2h12m,
	// by the long job's; the short job's node, empty from 30 minutes, at
	// 3h30m (ParkIdleAfter, the demand covered without it). Deciding only
	// when a node empties, none would park before 3 hours.
	steps := []cluster.Job{oneGPUJob("short", 0, 30*time.Minute), oneGPUJob("long", 0, 4*time.Hour)}
	if r := run(nodes(4), steps, 3*time.Hour, true); r.ParkedNodeS != 13440+6480+1800 {
		t.Errorf("forecast at a later step: parked %.0f node-s, want %d", r.ParkedNodeS, 13440+6480+1800)
	}
	// Parked nodes are woken ahead of the demand. A 4-hour job leaves
	// three nodes empty: one parks at once, one after 10 minutes, the last
	// stays up. Another 4-hour job at 30 minutes takes it, and the
	// arrivals (0.8 GPUs over the next 30 minutes) wake the node parked
	// first, no job waiting for it; it parks again at 2h04m, the jobs'
	// likely ends covering the decayed demand. The first job's node parks
	// 10 minutes after it ends, 20 minutes before the replay does.
	ahead := []cluster.Job{oneGPUJob("a", 0, 4*time.Hour), oneGPUJob("b", 0.5, 4*time.Hour)}
	if r := run(nodes(4), ahead, 10*time.Minute, true); r.ParkedNodeS != 1800+8760+15600+1200 || r.AvgJCTS != 4*3600 {
		t.Errorf("waking ahead: parked %.0f node-s, avg JCT %.0f s; want %d, %d s", r.ParkedNodeS, r.AvgJCTS, 1800+8760+15600+1200, 4*3600)
	}
	// A 15-minute job every 20 minutes on one node: by the arrival rate
	// the node will be needed, so it is not parked early in the 5-minute
	// gaps (nor after ParkIdleAfter, which they never reach): no job waits
	// for a boot.
	var every []cluster.Job
	for i := range 6 {
		every = append(every, oneGPUJob("e"+strconv.Itoa(i), float64(i)/3, 15*time.Minute))
	}
	if r := run(nodes(1), every, 10*time.Minute, true); r.AvgJCTS != 900 || r.ParkedNodeS != 0 {
		t.Errorf("forecast with steady arrivals: avg JCT %.0f s, parked %.0f node-s; want 900 s and none", r.AvgJCTS, r.ParkedNodeS)
	}
}

func TestDataCachesWarmAsJobsRun(t *testing.T) {
	withData := func(j cluster.Job, name string) cluster.Job {
		j.Spec.Data = &cluster.DataSource{Name: name, Bytes: 100 << 30}
		return j
	}
	nodes := func(n int) *cluster.Fleet {
		var out []cluster.Node
		for i := range n {
			out = append(out, clustertest.Node("n"+strconv.Itoa(i)).GPUs(1, "V100").Obj())
		}
		return clustertest.Fleet(out...)
	}
	run := func(fleet *cluster.Fleet, jobs []cluster.Job, cache int64) *sim.Result {
		return replay(t, "prescient", fleet, jobs, func(c *sim.Config) { c.DataCacheBytes = cache })
	}
	// The second job on the same dataset finds the copy the first left,
	// and goes to that node: 100 GiB not fetched.
	again := []cluster.Job{withData(oneGPUJob("first", 0, time.Hour), "d"), withData(oneGPUJob("again", 2, time.Hour), "d")}
	if r := run(nodes(3), again, 0); r.TransferSavedBytes != 0 {
		t.Errorf("without caches: saved %d bytes, want 0", r.TransferSavedBytes)
	}
	if r := run(nodes(3), again, 1<<40); r.TransferSavedBytes != 100<<30 {
		t.Errorf("with 1 TiB caches: saved %d bytes, want %d", r.TransferSavedBytes, int64(100<<30))
	}
	// Least recently used copies make room: with room for one copy, d is
	// gone when it is read a third time after e; with room for two, it
	// stays.
	lru := []cluster.Job{withData(oneGPUJob("d1", 0, time.Hour), "d"), withData(oneGPUJob("e1", 2, time.Hour), "e"),
		withData(oneGPUJob("d2", 4, time.Hour), "d")}
	if r := run(nodes(1), lru, 150<<30); r.TransferSavedBytes != 0 {
		t.Errorf("room for one copy: saved %d bytes, want 0", r.TransferSavedBytes)
	}
	if r := run(nodes(1), lru, 250<<30); r.TransferSavedBytes != 100<<30 {
		t.Errorf("room for two copies: saved %d bytes, want %d", r.TransferSavedBytes, int64(100<<30))
	}
	// A dataset larger than the cache is never kept.
	if r := run(nodes(1), again, 50<<30); r.TransferSavedBytes != 0 {
		t.Errorf("cache smaller than the dataset: saved %d bytes, want 0", r.TransferSavedBytes)
	}
}
