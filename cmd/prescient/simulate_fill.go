package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/spf13/pflag"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/datasets"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/executor/plugins/placement"
	"github.com/prescient-sched/prescient/executor/sim"
)

// The experiments of prescient simulate.
const (
	experimentReplay = "replay"
	experimentFill   = "fill"
)

func addPlacementFlags(f *pflag.FlagSet, o *simulateOptions) {
	f.StringVar(&o.experiment, "experiment", experimentReplay,
		"replay (the trace through the planner over time) or fill (the FGD protocol: pods arrive and never leave until --tune × capacity has arrived)")
	f.StringVar(&o.placement, "placement", "", "placement policy: "+strings.Join(placement.Names(), ", ")+
		" (replay default: the policy's own first-fit; required for fill)")
	f.Float64Var(&o.tune, "tune", sim.DefaultTune, "fill: stop arrivals once the GPU demand that arrived is this multiple of capacity")
	f.DurationVar(&o.parkIdleAfter, "park-idle-after", 0, "replay: park a node that ran nothing this long (0: never); see parked_node_s")
	f.StringVar(&o.powerModel, "power-model", "", "replay: a power model measured on a fleet (train --target power --out FILE): its GPU models draw what was measured, the others the Zeus-seeded defaults")
	f.StringVar(&o.dataCache, "data-cache", "", "replay: each node's local dataset cache (e.g. 2TB): a job's start leaves a warm copy of its data there, least recently used copies making room; empty: caches do not warm")
	f.BoolVar(&o.parkWakeLast, "park-wake-last", true, "replay, with --park-idle-after: wake a parked node only for the jobs the awake nodes leave waiting and keep it out of the plan while it boots, as serve does (park.Needed); =false lets the planner take a parked node as any other")
	f.BoolVar(&o.parkForecast, "park-forecast", false, "replay, with --park-idle-after: park an empty node before then, at the first look (each arrival and event, at least every minute) after which the running jobs' forecast ends and the other awake nodes' free GPUs cover the queue, the recent arrival rate and a node more over the next 30 minutes; after --park-idle-after only if they cover the demand without it; parked nodes are woken when the nodes up fall short of it")
	f.Float64Var(&o.powerCapPrice, "power-cap-price", 0, "replay: cap GPU power per job where (GPUs × power + PRICE) × slowdown is least on the Zeus V100 curve, PRICE in uncapped busy GPUs a job's time is worth (0: no caps); deadline jobs keep their P90 end")
	f.StringVar(&o.speeds, "speeds", "", "replay: gavel makes a job's run time depend on its GPU model (executor.GavelSpeeds, against the V100 the trace's durations are taken to be from); empty: every model alike")
	f.BoolVar(&o.fastestFirst, "fastest-first", false, "replay: offer each job the fastest GPU model with room first (for fleets of mixed models)")
	f.StringVar(&o.carbon, "carbon", "", "replay: CSV of time,gco2_per_kwh (the grid's carbon intensity); adds kgco2")
	f.DurationVar(&o.carbonWait, "carbon-wait", 0, "replay, with --carbon: opportunistic-tier jobs wait up to this long after they were queued for power at least 20% cleaner than now (0: never)")
}

// carbonSeries reads --carbon; nil without it.
func (o *simulateOptions) carbonSeries() (*sim.CarbonSeries, error) {
	if o.carbon == "" {
		return nil, nil
	}
	return readCarbonSeries(o.carbon)
}

// validatePlacement checks --experiment and --placement for a replay.
func (o *simulateOptions) validatePlacement() []error {
	var errs []error
	if o.experiment != experimentReplay && o.experiment != experimentFill {
		errs = append(errs, fmt.Errorf("--experiment %q: want %s or %s", o.experiment, experimentReplay, experimentFill))
	}
	if o.placement != "" {
		if _, err := placement.New(o.placement); err != nil {
			errs = append(errs, fmt.Errorf("--placement: %w", err))
		}
	}
	if !(o.powerCapPrice >= 0) || math.IsInf(o.powerCapPrice, 0) {
		errs = append(errs, fmt.Errorf("--power-cap-price %g: want a finite number ≥ 0", o.powerCapPrice))
	}
	if o.carbonWait < 0 || (o.carbonWait > 0 && o.carbon == "") {
		errs = append(errs, fmt.Errorf("--carbon-wait %s: want a positive duration, with --carbon", o.carbonWait))
	}
	if o.speeds != "" && o.speeds != speedsGavel {
		errs = append(errs, fmt.Errorf("--speeds %q: want %s or nothing", o.speeds, speedsGavel))
	}
	if o.parkIdleAfter < 0 {
		errs = append(errs, fmt.Errorf("--park-idle-after %s is negative", o.parkIdleAfter))
	}
	if o.dataCache != "" {
		if b, err := cluster.ParseBytes(o.dataCache); err != nil || b <= 0 {
			errs = append(errs, fmt.Errorf("--data-cache %q: want a positive size such as 2TB or 500GiB", o.dataCache))
		}
	}
	if o.parkForecast && o.parkIdleAfter == 0 {
		errs = append(errs, errors.New("--park-forecast needs --park-idle-after (the delay when the forecast says the node may be needed)"))
	}
	return errs
}

// applyPlacement replaces the policy's placer with --placement's; the
// fleet says whether tenants may share GPUs without MIG.
func (o *simulateOptions) applyPlacement(p *executor.Policy, fleet *cluster.Fleet) error {
	name := o.placement
	if own, ok := p.Placer.(*placement.Placer); ok && name == "" {
		name = own.Name() // the policy's own placement, told the fleet's sharing rule
	}
	if name == "" {
		return nil
	}
	pl, err := placement.NewPlacer(name, placement.PlacerArgs{AllowCrossTenantSharing: fleet.AllowCrossTenantSharing})
	if err != nil {
		return fmt.Errorf("--placement: %w", err)
	}
	p.Placer = pl
	return nil
}

func (o *simulateOptions) validateFill() error {
	var errs []error
	if o.trace == "" {
		errs = append(errs, errors.New("--trace is required (the pod list, e.g. openb:openb_pod_list_default.csv)"))
	}
	if o.fleet == "" {
		errs = append(errs, errors.New("--fleet is required"))
	}
	if o.placement == "" {
		errs = append(errs, fmt.Errorf("--experiment fill needs --placement (one of %s)", strings.Join(placement.Names(), ", ")))
	} else if _, err := placement.New(o.placement); err != nil {
		errs = append(errs, fmt.Errorf("--placement: %w", err))
	}
	if !(o.tune > 0 && o.tune <= 100) {
		errs = append(errs, fmt.Errorf("--tune %g: want a multiple of capacity in (0, 100]", o.tune))
	}
	return errors.Join(errs...)
}

// runFill runs the fill experiment and prints its figures.
func runFill(ctx context.Context, g *globals, o *simulateOptions, stdout, stderr io.Writer) error {
	if err := o.validateFill(); err != nil {
		return err
	}
	fleet, err := datasets.ReadFleet(o.fleet)
	if err != nil {
		return fmt.Errorf("--fleet: %w", err)
	}
	res, err := datasets.ReadTrace(o.trace, datasets.ReadOptions{})
	if err != nil {
		return fmt.Errorf("--trace: %w", err)
	}
	for _, m := range res.Missing {
		g.logger.Warn("the pod list lacks a column: the figures leave it out", "component", "simulate", "trace", o.trace, "missing", m)
	}
	bar := newProgress(stderr, g)
	r, err := sim.Fill(ctx, sim.FillConfig{Fleet: fleet, Pods: res.Jobs, Placement: o.placement, Tune: o.tune, Seed: o.seed,
		Progress: func(done, total int) { bar.update(o.placement, done, total) }})
	bar.done()
	if err != nil {
		return err
	}
	g.logger.Info("fill done", "component", "simulate", "placement", o.placement, "pods", r.Pods,
		"gpu_alloc_pct", r.GPUAllocPct, "sim_wall_s", r.SimWallS)
	return g.print(stdout, fillReport{r})
}

// fillReport prints a fill result: the object itself in JSON.
type fillReport struct{ *sim.FillResult }

func (r fillReport) writeTable(w io.Writer) error {
	t := newTable(w)
	t.row("PLACEMENT", "PODS", "FAILED", "ARRIVED", "GPU ALLOC", "WHOLE GPUS ALLOC", "UNALLOCATED GPUS", "WALL")
	t.row(r.Placement, r.Pods, r.FailedPods, fmt.Sprintf("%.1f%%", r.ArrivedPct), fmt.Sprintf("%.2f%%", r.GPUAllocPct),
		fmt.Sprintf("%.1f%%", r.GPUWholeAllocPct), fmt.Sprintf("%.1f", r.UnallocatedGPUs), fmt.Sprintf("%.2fs", r.SimWallS))
	return t.flush()
}
