package policies

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/executor/plugins/byorder"
	"github.com/prescient-sched/prescient/executor/plugins/easybackfill"
	"github.com/prescient-sched/prescient/executor/plugins/fifo"
	"github.com/prescient-sched/prescient/executor/plugins/firstfit"
	"github.com/prescient-sched/prescient/executor/plugins/fixedinterval"
	"github.com/prescient-sched/prescient/executor/plugins/headstart"
	"github.com/prescient-sched/prescient/executor/plugins/leastlostwork"
	"github.com/prescient-sched/prescient/executor/plugins/placement"
	"github.com/prescient-sched/prescient/executor/plugins/prescient"
	"github.com/prescient-sched/prescient/executor/plugins/sjf"
	"github.com/prescient-sched/prescient/executor/plugins/srtf"
	"github.com/prescient-sched/prescient/executor/plugins/tiresias"
	"github.com/prescient-sched/prescient/executor/plugins/youngdaly"
)

// Options are what a policy takes from the command line.
type Options struct {
	// Checkpoint is "" (the policy's own default), "none", "young-daly",
	// "young-daly:MAXLOSS" or "fixed:DURATION".
	Checkpoint string
	// Grace is how long a preempted job may take to checkpoint.
	Grace time.Duration
	// PreemptMinRun is how long a job runs before the prescient policy may
	// preempt it; 0 keeps the policy's DefaultPreemptMinRun. The other
	// policies' preemptors spare no job for its age.
	PreemptMinRun time.Duration
}

// DefaultPreemptMinRun is how long the prescient policy lets a job run
// before it may be preempted, so that every attempt makes some progress;
// it doubles with each earlier attempt of the job.
const DefaultPreemptMinRun = 10 * time.Minute

// DefaultGrace is the grace period of a preemption when Options leave it 0.
const DefaultGrace = 5 * time.Minute

// PrescientCheckpoint is the prescient policy's checkpoint timer: Young/Daly
// on the job's interruption rate, but at least every 20 minutes, so that one
// node failure sets a job back by at most 20 minutes of progress
// (Young/Daly alone minimises the expected sum of checkpoint and lost time,
// and lets a job lose hours at the failure rates of real fleets).
const PrescientCheckpoint = youngdaly.Name + ":20m"

// ErrUnknownPolicy is returned (wrapped) for a name the registry lacks.
var ErrUnknownPolicy = errors.New("unknown policy")

type entry struct {
	doc        string
	forecasts  bool   // uses forecasts beyond an exact oracle
	checkpoint string // default for Options.Checkpoint
	build      func(p *executor.Policy, o Options) error
}

func registry() map[string]entry {
	return map[string]entry{
		"fifo":          {doc: "first come, first served; a job that does not fit is passed over; no preemption", checkpoint: "none", build: buildFIFO},
		"fifo-strict":   {doc: "first come, first served; nothing passes a job that does not fit; no preemption", checkpoint: "none", build: buildStrictFIFO},
		"sjf-oracle":    {doc: "shortest job first by true duration; no preemption", checkpoint: "none", build: buildSJF},
		"srtf-oracle":   {doc: "shortest remaining true time first; preemptive", checkpoint: "none", build: buildSRTF},
		"tiresias":      {doc: "2D least attained service, discretized queues, starvation promotion; preemptive; no forecasts", checkpoint: "none", build: buildTiresias},
		"easy-backfill": {doc: "FIFO with EASY backfilling on P90 estimates", checkpoint: "none", forecasts: true, build: buildEASY},
		"headstart-backfill": {doc: "EASY backfilling on P90 estimates, the queue ordered by submit time plus estimate (nearly the order prescient slurm --order-partitions sets through Nice)",
			checkpoint: "none", forecasts: true, build: buildHeadStart},
		"prescient": {doc: "tiers, fair share of GPUs and of waiting, deadlines with reservations and backfill, Gittins order on the forecast's spread with checkpoint-first least-lost-work preemption, Young/Daly checkpoints losing at most 20m, the prescient placement", checkpoint: PrescientCheckpoint, forecasts: true, build: buildPrescient},
	}
}

// Names lists the policies, sorted.
func Names() []string {
	var out []string
	for n := range registry() {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Doc describes a policy in one line.
func Doc(name string) string { return registry()[name].doc }

// UsesForecasts reports whether a policy reads duration forecasts (other
// than the exact oracle that the -oracle policies are defined on).
func UsesForecasts(name string) bool { return registry()[name].forecasts }

// New assembles the named policy.
func New(name string, o Options) (executor.Policy, error) {
	e, ok := registry()[name]
	if !ok {
		return executor.Policy{}, fmt.Errorf("%w %q (want one of %s)", ErrUnknownPolicy, name, strings.Join(Names(), ", "))
	}
	if o.PreemptMinRun < 0 {
		return executor.Policy{}, fmt.Errorf("policy %s: preempt min run %s is negative", name, o.PreemptMinRun)
	}
	p := executor.Policy{Name: name, Placer: firstfit.New(), Grace: o.Grace}
	if p.Grace == 0 {
		p.Grace = DefaultGrace
	}
	if err := e.build(&p, o); err != nil {
		return executor.Policy{}, fmt.Errorf("policy %s: %w", name, err)
	}
	ck := o.Checkpoint
	if ck == "" {
		ck = e.checkpoint
	}
	timer, err := CheckpointTimer(ck)
	if err != nil {
		return executor.Policy{}, fmt.Errorf("policy %s: %w", name, err)
	}
	p.Checkpoint = timer
	return p, p.Validate()
}

// MinCheckpointInterval is the shortest interval a checkpoint spec may ask
// for: about what one checkpoint takes, so a job is not all checkpoints.
const MinCheckpointInterval = time.Minute

// CheckpointTimer parses "none", "young-daly", "young-daly:MAXLOSS" (the
// Young/Daly interval, at most MAXLOSS) or "fixed:DURATION"; MAXLOSS and
// DURATION are at least MinCheckpointInterval.
func CheckpointTimer(spec string) (executor.CheckpointTimer, error) {
	interval := func(arg string) (time.Duration, error) {
		d, err := time.ParseDuration(arg)
		if err != nil {
			return 0, fmt.Errorf("checkpoint %q: %w", spec, err)
		}
		if d < MinCheckpointInterval {
			return 0, fmt.Errorf("checkpoint %q: interval %s is under %s", spec, d, MinCheckpointInterval)
		}
		return d, nil
	}
	switch kind, arg, hasArg := strings.Cut(spec, ":"); kind {
	case "none":
		if hasArg {
			break
		}
		return nil, nil
	case youngdaly.Name:
		a := youngdaly.DefaultArgs()
		if hasArg {
			d, err := interval(arg)
			if err != nil {
				return nil, err
			}
			a.Max = d
			a.Min = min(a.Min, d)
		}
		t, err := youngdaly.New(a)
		if err != nil {
			return nil, fmt.Errorf("checkpoint %q: %w", spec, err)
		}
		return t, nil
	case fixedinterval.Name:
		d, err := interval(arg)
		if err != nil {
			return nil, err
		}
		return fixedinterval.New(fixedinterval.Args{Every: d})
	}
	return nil, fmt.Errorf("checkpoint %q: want none, young-daly, young-daly:MAXLOSS or fixed:DURATION", spec)
}

func buildFIFO(p *executor.Policy, _ Options) error {
	p.Order, p.Blocking = fifo.New(), executor.Skip
	return nil
}

func buildStrictFIFO(p *executor.Policy, _ Options) error {
	p.Order, p.Blocking = fifo.New(), executor.HeadOfLine
	return nil
}

func buildSJF(p *executor.Policy, _ Options) error {
	p.Order, p.Blocking, p.NeedsOracle = sjf.New(), executor.Skip, true
	return nil
}

func buildSRTF(p *executor.Policy, _ Options) error {
	pre, err := byorder.New(byorder.Args{Margin: 300})
	p.Order, p.Blocking, p.Preemptor, p.NeedsOracle = srtf.New(), executor.Skip, pre, true
	return err
}

func buildTiresias(p *executor.Policy, _ Options) error {
	ord, err := tiresias.New(tiresias.DefaultArgs())
	if err != nil {
		return err
	}
	pre, err := byorder.New(byorder.Args{Margin: 0.5})
	p.Order, p.Blocking, p.Preemptor = ord, executor.Skip, pre
	return err
}

func buildEASY(p *executor.Policy, _ Options) error {
	p.Order, p.Blocking, p.Reserver = fifo.New(), executor.Reserve, easybackfill.New()
	return nil
}

func buildHeadStart(p *executor.Policy, _ Options) error {
	p.Order, p.Blocking, p.Reserver = headstart.New(), executor.Reserve, easybackfill.New()
	return nil
}

func buildPrescient(p *executor.Policy, o Options) error {
	a := prescient.DefaultArgs()
	ord, err := prescient.NewOrder(a)
	if err != nil {
		return err
	}
	res, err := prescient.NewReserver(a)
	if err != nil {
		return err
	}
	minRun := o.PreemptMinRun
	if minRun == 0 {
		minRun = DefaultPreemptMinRun
	}
	pre, err := leastlostwork.New(leastlostwork.Args{UrgencyWindow: a.UrgencyWindow, MinRun: minRun, BackOff: true, ShorterBy: 2, Margin: 600, ByClass: true})
	if err != nil {
		return err
	}
	// The full policy packs with its own placement (fragmentation-aware,
	// topology- and energy-scored) rather than the baselines' first fit:
	// multi-GPU jobs find whole nodes, which fairness between tenants needs.
	place, err := placement.NewPlacer(placement.PrescientName, placement.PlacerArgs{})
	p.Order, p.Blocking, p.Reserver, p.Preemptor, p.Placer = ord, executor.Reserve, res, pre, place
	return err
}
