package sim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/executor/park"
)

// Config is one replay.
type Config struct {
	Fleet *cluster.Fleet
	// Jobs are the trace: each job's Outcome.RunTime is its true duration;
	// every job enters queued at its submit time. Its state and times are
	// ignored but for a job the trace shows withdrawn, cancelled before it
	// started (WithdrawnAt): it leaves the queue then unless it has
	// started, and no job metric counts it, since the trace holds no run
	// time for it.
	Jobs       []cluster.Job
	Planner    executor.Planner
	Forecaster executor.Forecaster
	// Order, when the planner's queue order is static (FIFO, SJF, SRTF,
	// Tiresias), lets the simulator keep the queue sorted as jobs come and
	// go, so planning does not sort it each cycle. Optional.
	Order executor.QueueOrder
	// Preemptive makes the simulator plan on every arrival, even when no
	// GPU is free (a new job may displace a running one). Tenants that
	// lend quota (executor.Reclaims) make it so whatever it says.
	Preemptive bool
	// NodeMTBF is each node's mean time between failures (exponential);
	// zero means no failures. A failed node is back after NodeRepair.
	NodeMTBF   time.Duration
	NodeRepair time.Duration
	// CheckpointCost is given to jobs that do not say theirs; such jobs are
	// made checkpointable. Zero leaves jobs as they are.
	CheckpointCost time.Duration
	// UsageHalfLife is the half-life of tenants' usage for fair share.
	UsageHalfLife time.Duration
	// WaitHalfLife is the half-life of tenants' waits for wait fairness
	// (default executor.DefaultWaitHalfLife).
	WaitHalfLife time.Duration
	// Usage and Waits are the tenants' decayed usage and waits at Start (a
	// replay from a live state); nil starts every tenant from zero. With
	// Waits, jobs submitted before Start are taken as counted in it and do
	// not arrive again.
	Usage map[string]time.Duration
	Waits map[string]executor.TenantWaits
	// Speed is a GPU model's training speed against the one the trace's
	// durations were measured on (executor.Speed: a V100); a job runs at
	// its slowest GPU's. Nil: every model at 1.
	Speed func(job *cluster.Job, model string) float64
	Seed  uint64
	// Power gives each GPU's idle and busy power; nil means DefaultPower.
	Power func(cluster.GPU) PowerModel
	// NodePower gives each node's base and parked power; nil means
	// DefaultNodePower.
	NodePower func(cluster.Node) NodePower
	// ParkIdleAfter parks a node that ran nothing for that long (zero:
	// never); WakeTime is the boot a parked node needs: jobs placed on it
	// start working that much later, the node drawing its base power
	// meanwhile (zero means DefaultWakeTime).
	ParkIdleAfter, WakeTime time.Duration
	// ParkForecast (with ParkIdleAfter) parks a node that runs nothing
	// before ParkIdleAfter, at the first look (each step of the replay, at
	// least every ParkReview while one is left up) after which, by
	// the forecasts, it will not be needed over the next ParkLookahead
	// (zero means park.DefaultLookahead): the other awake nodes' GPUs, free
	// now or freed by then by the running jobs' expected ends, cover the
	// queued GPUs, the recent arrival rate over the lookahead and a node's
	// worth more; after ParkIdleAfter only if those nodes cover the demand
	// without it. When the nodes up fall short of the demand, parked nodes
	// are woken ahead of it (as the control plane parks and wakes).
	ParkForecast  bool
	ParkLookahead time.Duration
	// Arrivals are the jobs that arrived before the replay (the trace's
	// before its start, or a live plane's), the arrival rate forecast
	// parking starts from; the zero value has seen none.
	Arrivals park.Arrivals
	// ParkedAtStart are nodes already parked when the replay starts: a
	// job placed on one starts working WakeTime later. Without
	// ParkIdleAfter they are the only nodes ever parked.
	ParkedAtStart []string
	// WakeLast keeps the parked and booting nodes out of the plan and
	// wakes the parked nodes the jobs the awake ones leave waiting need
	// (park.Needed), as the control plane does: a woken node takes jobs
	// once its boot is over, counts as empty from then, and the nodes the
	// waiting jobs were planned on are not parked meanwhile. Otherwise the
	// planner takes a parked node as it takes any, and a job placed there
	// starts working when its boot ends.
	WakeLast bool
	// DataCacheBytes is each node's local dataset cache: an attempt that
	// starts on a node leaves a warm copy of its dataset (JobSpec.Data)
	// there, the least recently used copies making room, and the queued
	// jobs naming that dataset see the node warm. Zero: caches do not warm
	// (only the copies the jobs name count).
	DataCacheBytes int64
	// Lending, when set, lends an inference pool's idle nodes to training
	// (lending.go). Nil: the fleet is training's alone.
	Lending *Lending
	// Carbon is the grid's carbon intensity over time; with it the replay
	// reports kgco2. Nil means none.
	Carbon *CarbonSeries
	// Progress, when set, is called now and then with jobs done and total.
	Progress func(done, total int)
	// Start, when set, is when the clock starts (the live state's now for a
	// what-if); jobs submitted before it enter the queue at Start. Zero
	// starts at the earliest submission.
	Start time.Time
	// Until, when set, ends the replay at that time even if jobs are left.
	Until time.Time
	// StopBy, when set, is a budget in wall-clock time: once it has
	// passed the replay ends after the step under way, where its clock
	// is (Result.Horizon says where). For answers that must come in
	// bounded time (what-if); a replay cut so depends on the machine.
	StopBy time.Time
	// Running are jobs that hold GPUs at Start (which they need): each keeps
	// its allocations and the work it has done (live.go).
	Running []Placed
	// Outcomes makes the Result list every job's start and end.
	Outcomes bool
	// Check verifies the simulator's invariants after every step (slow;
	// for tests): capacity never exceeded, no GPU given twice, the index in
	// step with the snapshot, every job in exactly one place.
	Check  bool
	Logger *slog.Logger
}

// ErrInvariant is returned (wrapped) when Check finds a broken invariant.
var ErrInvariant = errors.New("simulator invariant broken")

// Validate checks the configuration.
func (c *Config) Validate() error {
	var errs []error
	if c.Fleet == nil || len(c.Fleet.Nodes) == 0 {
		errs = append(errs, errors.New("sim: no fleet"))
	}
	if c.Planner == nil {
		errs = append(errs, errors.New("sim: no planner"))
	}
	if c.Forecaster == nil {
		errs = append(errs, errors.New("sim: no forecaster"))
	}
	if c.NodeMTBF < 0 || c.NodeRepair < 0 || c.CheckpointCost < 0 || c.UsageHalfLife < 0 || c.WaitHalfLife < 0 || c.ParkIdleAfter < 0 || c.WakeTime < 0 || c.ParkLookahead < 0 {
		errs = append(errs, errors.New("sim: negative duration"))
	}
	if c.DataCacheBytes < 0 {
		errs = append(errs, fmt.Errorf("sim: data cache of %d bytes is negative", c.DataCacheBytes))
	}
	if len(c.Running) > 0 && c.Start.IsZero() {
		errs = append(errs, errors.New("sim: running jobs need a start time"))
	}
	if c.Lending != nil && c.Fleet != nil {
		errs = append(errs, c.Lending.validate(c.Fleet, c.Running))
	}
	if c.NodeMTBF > 0 && c.NodeRepair == 0 {
		errs = append(errs, errors.New("sim: node failures need a repair time"))
	}
	return errors.Join(errs...)
}

// simJob is the simulator's record of one job.
type simJob struct {
	job   cluster.Job
	view  executor.JobView
	run   executor.RunningJob
	truth time.Duration
	seg   segment
	gpus  int

	epoch       int
	qpos, rpos  int
	stopAt      time.Time     // preemption: when it stops
	stopLands   bool          // the checkpoint lands before the grace runs out
	stopProg    time.Duration // progress when it was told to stop
	stopLost    time.Duration // work lost if it does not land
	stopBooting bool          // preempted while its node booted: stops at once, losing nothing
	held        time.Duration // time holding GPUs, over all attempts
	feasible    bool          // deadline at least submit + true duration
	unplaceable bool
	withdrawn   bool      // the trace shows it cancelled before it started (WithdrawnAt)
	withdrawAt  time.Time // when it leaves the queue if it has not started
	preplaced   bool      // held GPUs at Config.Start; never arrives
	firstStart  time.Time // when it first held GPUs
	firstWork   time.Time // when it first worked: later when its nodes had to boot
	capPower    float64   // busy draw over the uncapped one in this attempt (0: uncapped)
}

// Simulator replays a trace. Use Run.
type Simulator struct {
	cfg     Config
	log     *slog.Logger
	snap    *cluster.Snapshot
	free    *executor.Capacity
	now     time.Time
	ev      events
	rng     *rand.Rand
	jobs    []*simJob
	byID    map[cluster.JobID]*simJob
	queue   []*executor.JobView
	parts   []executor.QueuedPart // parts[i] is queue[i]'s (PlanInput.QueueParts); nil unless parted
	parted  executor.PartedOrder
	index   executor.QueueIndex   // the order's index of queue (PlanInput.QueueIndex); nil unless indexed
	sorted  *executor.SortedQueue // nil unless Config.Order is static
	running []*executor.RunningJob
	runJobs []*simJob // runJobs[i] is the job of running[i]
	// runParts[i] is running[i]'s part (PlanInput.RunningParts); nil unless
	// the order is a RunningPartedOrder.
	runParts  []any
	runParted executor.RunningPartedOrder
	usage     map[string]time.Duration
	held      map[string]int
	peak      map[string]int                  // the most each tenant held at once
	waits     map[string]executor.TenantWaits // tenants' decayed queueing
	queuedN   map[string]int                  // tenants' jobs in the queue
	facts     executor.QueueFactsKeeper       // the queue's facts, for the planner (PlanInput.Facts)
	kept      executor.JobKeeper              // the placer's, for the planner (PlanInput.Kept); nil if none
	acct      accounting
	caches    dataCaches
	// arrivals are the jobs that arrived (forecast parking's rate).
	arrivals park.Arrivals
	dirty    bool
	wakeAt   time.Time
	cut      Cut // why the replay ended with jobs left
	down     []bool
	lend     *lending // nil without Config.Lending
}

// Run replays cfg.Jobs on cfg.Fleet and returns the metrics.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	s, err := newSimulator(cfg)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	if err := s.loop(ctx); err != nil {
		return nil, err
	}
	return s.result(time.Since(start)), nil
}

func newSimulator(cfg Config) (*Simulator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.UsageHalfLife == 0 {
		cfg.UsageHalfLife = 24 * time.Hour
	}
	if cfg.WaitHalfLife == 0 {
		cfg.WaitHalfLife = executor.DefaultWaitHalfLife
	}
	if executor.Reclaims(cfg.Fleet.Tenants) {
		cfg.Preemptive = true
	}
	if cfg.Power == nil {
		cfg.Power = DefaultPower
	}
	if cfg.NodePower == nil {
		cfg.NodePower = DefaultNodePower
	}
	if cfg.WakeTime == 0 {
		cfg.WakeTime = DefaultWakeTime
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	fleet := *cfg.Fleet
	fleet.Nodes = slices.Clone(cfg.Fleet.Nodes) // node states change here, not in the caller's fleet
	s := &Simulator{cfg: cfg, log: cfg.Logger.With("component", "sim"), rng: rand.New(rand.NewPCG(cfg.Seed, 0x5eed)),
		byID: make(map[cluster.JobID]*simJob, len(cfg.Jobs)), usage: map[string]time.Duration{}, held: map[string]int{}, peak: map[string]int{},
		waits: map[string]executor.TenantWaits{}, queuedN: map[string]int{}, arrivals: cfg.Arrivals}
	if cfg.Usage != nil {
		s.usage = maps.Clone(cfg.Usage)
	}
	if cfg.Waits != nil {
		s.waits = maps.Clone(cfg.Waits)
	}
	switch {
	case !cfg.Start.IsZero():
		s.now = cfg.Start
	case len(cfg.Jobs) > 0: // the clock starts at the earliest submission, whatever the jobs' order
		s.now = slices.MinFunc(cfg.Jobs, func(a, b cluster.Job) int { return a.SubmitTime.Compare(b.SubmitTime) }).SubmitTime
	}
	s.snap = cluster.NewSnapshot(&fleet, s.now)
	s.free = executor.NewCapacity(s.snap)
	s.down = make([]bool, len(fleet.Nodes))
	if cfg.Order != nil {
		s.sorted, _ = executor.NewSortedQueue(cfg.Order)
	}
	if po, ok := cfg.Order.(executor.PartedOrder); ok && s.sorted == nil {
		s.parted, s.parts = po, []executor.QueuedPart{}
		if io, ok := po.(executor.IndexedOrder); ok {
			s.index = io.NewQueueIndex()
		}
	}
	if ro, ok := cfg.Order.(executor.RunningPartedOrder); ok {
		s.runParted, s.runParts = ro, []any{}
	}
	if k, ok := cfg.Planner.(interface{ NewKeeper() executor.JobKeeper }); ok { // executor.Framework
		s.kept = k.NewKeeper()
	}
	s.acct.init(s)
	s.caches.init(s)
	if cfg.Lending != nil {
		s.initLending()
	}
	if err := s.loadJobs(); err != nil {
		return nil, err
	}
	return s, s.placeRunning()
}

// WithdrawnAt is when a trace's job was withdrawn: cancelled while it
// waited, never started (an SWF job of status 5 with no processors, a
// sacct CANCELLED job with no start). Its users gave up on it then; the
// replay keeps it queued until that time, no later.
func WithdrawnAt(j *cluster.Job) (time.Time, bool) {
	if j.State != cluster.StateCancelled || !j.StartTime.IsZero() || j.EndTime.IsZero() {
		return time.Time{}, false
	}
	if j.EndTime.Before(j.SubmitTime) {
		return j.SubmitTime, true
	}
	return j.EndTime, true
}

// loadJobs turns the trace into queued-to-be jobs sorted by submit time.
func (s *Simulator) loadJobs() error {
	fleetGPUs := s.free.FreeGPUs()
	seen := make(map[cluster.JobID]bool, len(s.cfg.Jobs))
	// The jobs lie in one array in submit order, so that a cycle's walks
	// over the queue read memory in order rather than chase pointers.
	order := make([]int, len(s.cfg.Jobs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return s.cfg.Jobs[a].SubmitTime.Compare(s.cfg.Jobs[b].SubmitTime) })
	all := make([]simJob, len(s.cfg.Jobs))
	for k, i := range order {
		src := &s.cfg.Jobs[i]
		if seen[src.ID] {
			return fmt.Errorf("sim: job %s appears twice", src.ID)
		}
		seen[src.ID] = true
		j := &all[k]
		*j = simJob{truth: src.Outcome.RunTime, gpus: src.Spec.GPUs, qpos: -1, rpos: -1}
		j.job = cluster.NewJob(src.ID, src.Clone().Spec, src.SubmitTime)
		if s.cfg.CheckpointCost > 0 && j.job.Spec.CheckpointCost == 0 {
			j.job.Spec.Checkpointable, j.job.Spec.CheckpointCost = true, s.cfg.CheckpointCost
		}
		j.view.Job, j.run.Allocations = &j.job, nil
		j.withdrawAt, j.withdrawn = WithdrawnAt(src)
		j.feasible = j.job.Spec.HasDeadline() && !j.job.Spec.Deadline.Before(j.job.SubmitTime.Add(j.truth))
		j.unplaceable = j.gpus > fleetGPUs
		s.jobs = append(s.jobs, j)
		s.byID[src.ID] = j
	}
	return nil
}
