package datasets

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"time"

	"github.com/prescient-sched/prescient/cluster"
)

// Bounds on GenerateConfig.
const (
	MaxGenerateJobs    = 5_000_000
	MaxGenerateTenants = 10_000
)

// GenerateConfig describes a synthetic workload.
type GenerateConfig struct {
	// Seed makes the workload: the same config gives the same jobs.
	Seed int64
	// Jobs is how many jobs to generate, 1..MaxGenerateJobs.
	Jobs int
	// Start is when arrivals begin; hour-of-day and weekday patterns follow
	// its UTC clock.
	Start time.Time
	// Tenants is the number of tenants, 1..MaxGenerateTenants, named
	// tenant-01, tenant-02, ... with a Philly-like skew (tenant-01 busiest).
	Tenants int
	// DeadlineFraction is the share of jobs with a deadline, 0..1.
	DeadlineFraction float64
	// TierMix weighs the priority tiers (weights need not sum to 1); nil
	// means DefaultTierMix().
	TierMix map[cluster.Tier]float64
	// LabelMemory fills Outcome.PeakGPUMemoryBytes and Outcome.EnergyJ
	// with plausible values that depend on the job's model and batch size
	// labels. Without it they stay zero (unknown, as in Philly); nothing
	// else changes.
	LabelMemory bool
}

// DefaultGenerateConfig returns a config for 10,000 jobs from Monday
// 2024-01-01 00:00 UTC over 11 tenants (Philly's busy virtual clusters),
// 20% of them with deadlines, the default tier mix and memory labels.
func DefaultGenerateConfig() GenerateConfig {
	return GenerateConfig{
		Seed: 1, Jobs: 10000, Start: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC),
		Tenants: phillyTenants, DeadlineFraction: 0.2, LabelMemory: true,
	}
}

// DefaultTierMix returns the tier weights used when GenerateConfig.TierMix
// is nil: production 0.10, standard 0.50, batch 0.25, opportunistic 0.15.
// Philly has no tiers; the mix is an assumption.
func DefaultTierMix() map[cluster.Tier]float64 { return maps.Clone(defaultTierMix) }

// Validate reports every field no generator could honour, each by name.
func (c GenerateConfig) Validate() error {
	var errs []error
	if c.Jobs < 1 || c.Jobs > MaxGenerateJobs {
		errs = append(errs, fmt.Errorf("jobs: %d is outside 1..%d", c.Jobs, MaxGenerateJobs))
	}
	if c.Start.IsZero() {
		errs = append(errs, errors.New("start: missing"))
	}
	if c.Tenants < 1 || c.Tenants > MaxGenerateTenants {
		errs = append(errs, fmt.Errorf("tenants: %d is outside 1..%d", c.Tenants, MaxGenerateTenants))
	}
	if !(c.DeadlineFraction >= 0 && c.DeadlineFraction <= 1) {
		errs = append(errs, fmt.Errorf("deadline_fraction: %g is outside 0..1", c.DeadlineFraction))
	}
	if c.TierMix != nil {
		errs = append(errs, validateTierMix(c.TierMix))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("generate: %w", err)
	}
	return nil
}

func validateTierMix(mix map[cluster.Tier]float64) error {
	var errs []error
	sum := 0.0
	for t, w := range mix {
		if !t.Valid() {
			errs = append(errs, fmt.Errorf("tier_mix: %s is not a tier", t))
		}
		if math.IsNaN(w) || math.IsInf(w, 0) || w < 0 {
			errs = append(errs, fmt.Errorf("tier_mix: weight %g of %s is not a finite non-negative number", w, t))
		}
		sum += w
	}
	if !(sum > 0) || math.IsInf(sum, 0) {
		errs = append(errs, fmt.Errorf("tier_mix: the weights sum to %g, want a positive finite sum", sum))
	}
	return errors.Join(errs...)
}

// Generate returns a synthetic job history calibrated to the Philly trace
// (see calibration.go): arrivals by hour of day and weekday, GPU counts, run
// times by GPU count, tenant skew, outcomes and queueing delays. The jobs
// are finished (succeeded, failed or cancelled) with start, end and run
// times, sorted by submit time, and valid. The same config gives the same
// jobs.
func Generate(cfg GenerateConfig) ([]cluster.Job, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	g := newGenerator(cfg)
	jobs := make([]cluster.Job, cfg.Jobs)
	for i := range jobs {
		jobs[i] = g.job(g.draw(), i)
	}
	sortJobs(jobs)
	return jobs, nil
}

type generator struct {
	cfg       GenerateConfig
	rng       *rand.Rand
	clock     arrivalClock
	gpus      weighted[int]
	tenants   weighted[string]
	users     weighted[int]
	tiers     weighted[cluster.Tier]
	workloads weighted[workload]
	states    weighted[cluster.JobState]
	idWidth   int
}

// seedStream is PCG's second seed word; the config's Seed is the first.
const seedStream = 0x9e3779b97f4a7c15

func newGenerator(cfg GenerateConfig) *generator {
	g := &generator{
		cfg:     cfg,
		rng:     rand.New(rand.NewPCG(uint64(cfg.Seed), seedStream)),
		clock:   arrivalClock{now: cfg.Start.UTC()},
		idWidth: len(strconv.Itoa(cfg.Jobs)),
	}
	for _, c := range phillyGPUCounts {
		g.gpus.add(c.gpus, float64(c.jobs))
	}
	g.tenants = tenantWeights(cfg.Tenants)
	for u := 1; u <= usersPerTenant; u++ {
		g.users.add(u, 1/float64(u))
	}
	g.tiers = tierWeights(cfg.TierMix)
	for _, w := range workloads {
		g.workloads.add(w, w.share)
	}
	g.states.add(cluster.StateSucceeded, phillySucceededShare)
	g.states.add(cluster.StateFailed, phillyFailedShare)
	g.states.add(cluster.StateCancelled, phillyCancelledShare)
	return g
}

// tenantWeights names n tenants tenant-01, ... and weighs them with
// Philly's skew: the tenant of rank r gets 1/r^phillyTenantZipf.
func tenantWeights(n int) weighted[string] {
	var w weighted[string]
	width := max(2, len(strconv.Itoa(n)))
	for r := 1; r <= n; r++ {
		w.add(fmt.Sprintf("tenant-%0*d", width, r), math.Pow(float64(r), -phillyTenantZipf))
	}
	return w
}

// tierWeights weighs the tiers by mix, defaultTierMix when nil. Tiers go in
// a fixed order so that map iteration cannot change a seed's workload.
func tierWeights(mix map[cluster.Tier]float64) weighted[cluster.Tier] {
	if mix == nil {
		mix = defaultTierMix
	}
	var w weighted[cluster.Tier]
	for _, t := range cluster.Tiers() {
		w.add(t, mix[t])
	}
	return w
}

// draws are the random choices behind one job.
type draws struct {
	submit         time.Time
	gpus           int
	run            time.Duration
	tenant         string
	user           int
	tier           cluster.Tier
	work           workload
	batch          int
	state          cluster.JobState
	queue          time.Duration
	hasDeadline    bool
	deadlineAfter  time.Duration // from submit
	memBytes       int64
	powerW         float64
	checkpointable bool
	checkpointCost time.Duration
}

// draw makes one job's choices. Every value is drawn whether the config
// uses it or not, and always in this order, so that LabelMemory and
// DeadlineFraction change only what they name; changing the order changes
// every seed's workload.
func (g *generator) draw() draws {
	r := g.rng
	d := draws{submit: g.clock.next(r)}
	d.gpus = g.gpus.draw(r)
	d.run = drawRunTime(r, d.gpus)
	d.tenant, d.user, d.tier = g.tenants.draw(r), g.users.draw(r), g.tiers.draw(r)
	d.work = g.workloads.draw(r)
	d.batch = d.work.batchSizes[r.IntN(len(d.work.batchSizes))]
	d.state = g.states.draw(r)
	d.queue = drawQueueDelay(r)
	d.hasDeadline = r.Float64() < g.cfg.DeadlineFraction
	d.deadlineAfter = drawDeadline(r, d.run)
	d.memBytes = drawPeakMemory(r, d.work, d.batch)
	d.powerW = drawPower(r, d.work)
	d.checkpointable = r.Float64() < checkpointableShare
	d.checkpointCost = drawCheckpointCost(r, d.memBytes)
	return d
}

// job builds the i-th job (0-based) from its draws.
func (g *generator) job(d draws, i int) cluster.Job {
	id := cluster.JobID(fmt.Sprintf("gen-%0*d", g.idWidth, i+1))
	j := cluster.NewJob(id, g.spec(d), d.submit)
	j.State, j.Attempts = d.state, 1
	j.StartTime = d.submit.Add(d.queue)
	j.EndTime = j.StartTime.Add(d.run)
	j.Outcome = cluster.Outcome{RunTime: d.run, ExitCode: exitCode(d.state)}
	if g.cfg.LabelMemory {
		j.Outcome.PeakGPUMemoryBytes = d.memBytes
		j.Outcome.EnergyJ = math.Round(d.powerW * d.run.Seconds() * float64(d.gpus))
	}
	j.LastCheckpoint = lastCheckpoint(id, d, j.StartTime)
	return j
}

func (g *generator) spec(d draws) cluster.JobSpec {
	s := cluster.JobSpec{
		Name: d.work.model, Tenant: d.tenant, User: fmt.Sprintf("%s-u%d", d.tenant, d.user), Tier: d.tier,
		GPUs: d.gpus, GPUMilli: cluster.MilliGPU, Checkpointable: d.checkpointable,
		Labels: map[string]string{
			cluster.LabelFramework: d.work.framework,
			cluster.LabelModel:     d.work.model,
			cluster.LabelBatchSize: strconv.Itoa(d.batch),
		},
	}
	if d.checkpointable {
		s.CheckpointCost = d.checkpointCost
	}
	if d.gpus > gangGPUsPerTask {
		s.GangSize = (d.gpus + gangGPUsPerTask - 1) / gangGPUsPerTask
	}
	if d.hasDeadline {
		s.Deadline = d.submit.Add(d.deadlineAfter)
	}
	return s
}

func exitCode(s cluster.JobState) int {
	switch s {
	case cluster.StateFailed:
		return exitFailed
	case cluster.StateCancelled:
		return exitCancelled
	}
	return 0
}

// lastCheckpoint is the newest of the checkpoints a checkpointable job wrote
// every checkpointInterval while it ran; nil if it wrote none.
func lastCheckpoint(id cluster.JobID, d draws, start time.Time) *cluster.Checkpoint {
	n := int64(d.run / (checkpointInterval * time.Second))
	if !d.checkpointable || n == 0 {
		return nil
	}
	step := n * checkpointSteps
	return &cluster.Checkpoint{
		Time: start.Add(time.Duration(n) * checkpointInterval * time.Second),
		Step: step,
		Path: fmt.Sprintf("ckpt/%s/step-%d", id, step),
	}
}

// arrivalClock draws submit times from a Poisson process whose rate is
// constant within each clock hour: phillyJobsPerHour times the hour-of-day
// and weekday factors.
type arrivalClock struct {
	now time.Time
}

// next returns the next arrival, truncated to the second.
func (c *arrivalClock) next(r *rand.Rand) time.Time {
	for {
		hourEnd := c.now.Truncate(time.Hour).Add(time.Hour)
		perHour := phillyJobsPerHour * phillyHourFactor[c.now.Hour()] * phillyWeekdayFactor[c.now.Weekday()]
		gap := time.Duration(r.ExpFloat64() / perHour * float64(time.Hour))
		if at := c.now.Add(gap); at.Before(hourEnd) {
			c.now = at
			return at.Truncate(time.Second)
		}
		c.now = hourEnd // no arrival left in this hour; the process is memoryless
	}
}

// drawRunTime draws a run time for a job of gpus GPUs from Philly's
// quantiles, log-linearly between them, in whole seconds (at least one).
func drawRunTime(r *rand.Rand, gpus int) time.Duration {
	row := phillyRunTimeQuantiles[runTimeRowFor(gpus)].runS
	s := logLinear(phillyQuantileLevels, row, r.Float64())
	return time.Duration(max(1, math.Round(s))) * time.Second
}

// logLinear is the inverse CDF through the points (levels[i], values[i]),
// interpolating log(value) linearly in the level.
func logLinear(levels, values []float64, u float64) float64 {
	i := sort.SearchFloat64s(levels, u)
	switch {
	case i == 0:
		return values[0]
	case i >= len(levels):
		return values[len(values)-1]
	}
	f := (u - levels[i-1]) / (levels[i] - levels[i-1])
	lo, hi := math.Log(values[i-1]), math.Log(values[i])
	return math.Exp(lo + f*(hi-lo))
}

// drawQueueDelay draws a lognormal queueing delay, in whole seconds.
func drawQueueDelay(r *rand.Rand) time.Duration {
	sigma := math.Sqrt(2 * math.Log(phillyQueueMeanS/phillyQueueMedianS))
	s := math.Min(maxQueueDelayS, phillyQueueMedianS*math.Exp(sigma*r.NormFloat64()))
	return time.Duration(math.Round(s)) * time.Second
}

// drawDeadline draws how long after submission a job's deadline falls.
func drawDeadline(r *rand.Rand, run time.Duration) time.Duration {
	slack := deadlineSlackMin + (deadlineSlackMax-deadlineSlackMin)*r.Float64()
	return time.Duration(math.Round(run.Seconds()*slack+deadlineGraceS)) * time.Second
}

func drawPeakMemory(r *rand.Rand, w workload, batch int) int64 {
	ref := w.batchSizes[len(w.batchSizes)/2]
	gib := w.memGiB * math.Pow(float64(batch)/float64(ref), memBatchExponent) * math.Exp(memNoiseSigma*r.NormFloat64())
	gib = min(maxJobMemGiB, max(minJobMemGiB, gib))
	return int64(math.Round(gib * (1 << 30)))
}

func drawPower(r *rand.Rand, w workload) float64 {
	return min(maxJobPowerW, max(minJobPowerW, w.powerW*math.Exp(powerNoiseSigma*r.NormFloat64())))
}

func drawCheckpointCost(r *rand.Rand, memBytes int64) time.Duration {
	gib := float64(memBytes) / (1 << 30)
	s := checkpointBaseCostS + gib*checkpointCostPerGiB*(0.5+r.Float64())
	return time.Duration(math.Round(s)) * time.Second
}

// weighted draws values in proportion to their weights.
type weighted[T any] struct {
	values []T
	cum    []float64 // running sum of the weights
}

func (w *weighted[T]) add(v T, weight float64) {
	total := 0.0
	if n := len(w.cum); n > 0 {
		total = w.cum[n-1]
	}
	w.values = append(w.values, v)
	w.cum = append(w.cum, total+weight)
}

func (w *weighted[T]) draw(r *rand.Rand) T {
	u := r.Float64() * w.cum[len(w.cum)-1]
	i := sort.Search(len(w.cum), func(i int) bool { return w.cum[i] > u })
	return w.values[min(i, len(w.values)-1)]
}
