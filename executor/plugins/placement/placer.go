package placement

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
)

// PlacerArgs configure the planner's placer.
type PlacerArgs struct {
	// HalfLife is the half-life of the decayed histogram of requests the
	// fragmentation score is measured against (default DefaultHalfLife).
	HalfLife time.Duration
	// AllowCrossTenantSharing lets jobs of different tenants share a GPU
	// without MIG (the fleet file's allow_cross_tenant_sharing); off, they
	// share only MIG-enabled GPUs, whose instances are isolated in hardware.
	AllowCrossTenantSharing bool
	// EnergyLevelsPerHour weighs energy in the prescient placement: every
	// hour a placement keeps a node on beyond what its running jobs
	// already do (by P90 ends; the whole job for an idle node) costs this
	// many fragmentation score levels. Zero means DefaultEnergyLevelsPerHour;
	// negative turns the energy term off.
	EnergyLevelsPerHour float64
	// LocalityLevels weighs data locality in the prescient placement of
	// shares and of jobs within one node: a node holding a warm copy of the
	// job's dataset (cluster.JobSpec.Data) gains this many fragmentation
	// score levels, a node in a rack holding one half as many (the tasks of
	// a job over several nodes prefer warm nodes, then warm racks, within
	// the topology's rules; see placeTasks). Zero means
	// DefaultLocalityLevels; negative turns it off.
	LocalityLevels float64
}

// DefaultLocalityLevels is the default weight of data locality: a fifth of
// the score's 0-100 range. It outweighs packing ties and small differences
// in fragmentation, so a job opens an empty warm node rather than a cold
// used one unless that fragments much more.
const DefaultLocalityLevels = 20

// DefaultEnergyLevelsPerHour is the default weight of the energy term.
const DefaultEnergyLevelsPerHour = 16

// DefaultHalfLife is the half-life of the request histogram.
const DefaultHalfLife = 24 * time.Hour

// Validate rejects a negative half-life.
func (a PlacerArgs) Validate() error {
	if a.HalfLife < 0 {
		return fmt.Errorf("placement: half-life %s is negative", a.HalfLife)
	}
	return nil
}

// Placer is the planner's placement plugin for any of the scorers: the
// steps are filter (GPU model, free share, sharing rules), score (the
// scorer, after topology for whole GPUs) and pick the best, ties to the
// first node in the capacity index's order (the planner is deterministic).
//
// Whole-GPU jobs that fit one node prefer GPUs of one NVLink domain, then
// one node over PCIe; among equals the scorer decides. Larger jobs and gangs
// are split into tasks placed within one network leaf when any leaf has
// room (packed onto the fullest nodes that fit), across leaves only when
// none has. A share of a GPU goes where the scorer says, only on GPUs it
// may share: free, or used by the same tenant (any tenant on MIG-enabled
// GPUs, or everywhere when AllowCrossTenantSharing), and only when the
// forecast P90 memory footprints of all the jobs on the GPU fit its memory.
type Placer struct {
	name   string
	scorer Scorer
	args   PlacerArgs
}

var (
	_ executor.Placer        = (*Placer)(nil)
	_ executor.CyclePlacer   = (*Placer)(nil)
	_ executor.KeepingPlacer = (*Placer)(nil)
)

// NewPlacer returns the named placement as a planner plugin.
func NewPlacer(name string, a PlacerArgs) (*Placer, error) {
	if err := a.Validate(); err != nil {
		return nil, err
	}
	s, err := New(name)
	if err != nil {
		return nil, err
	}
	if a.HalfLife == 0 {
		a.HalfLife = DefaultHalfLife
	}
	if a.EnergyLevelsPerHour == 0 {
		a.EnergyLevelsPerHour = DefaultEnergyLevelsPerHour
	}
	if name != PrescientName || a.EnergyLevelsPerHour < 0 {
		a.EnergyLevelsPerHour = 0
	}
	if a.LocalityLevels == 0 {
		a.LocalityLevels = DefaultLocalityLevels
	}
	if name != PrescientName || a.LocalityLevels < 0 {
		a.LocalityLevels = 0
	}
	return &Placer{name: name, scorer: s, args: a}, nil
}

// Name implements executor.Placer.
func (p *Placer) Name() string { return p.name }

// Place implements executor.Placer outside a planning cycle: no request
// history beyond the job, no knowledge of who shares a used GPU (so a used
// GPU is shared only where any tenant may share it).
func (p *Placer) Place(job *cluster.Job, c *executor.Capacity) ([]cluster.Allocation, bool, string) {
	return p.ForCycle(&executor.PlanInput{}).Place(job, c)
}

// ForCycle implements executor.CyclePlacer: it reads the requests of the
// queued and running jobs (weighted by 2^(−age/HalfLife) since submission)
// into the typical distribution, who holds each shared GPU with what
// forecast memory, and the queued jobs' forecast footprints, when the cycle
// first places a job.
func (p *Placer) ForCycle(in *executor.PlanInput) executor.Placer {
	cp := &cyclePlacer{Placer: p, quiet: in.Unexplained, now: in.Now, in: in}
	if k, ok := in.Kept.(*keeper); ok && k.placer == p {
		cp.kept = k
	}
	return cp
}

// read reads the cycle's input (ForCycle) on the first placement, so that
// a cycle that places nothing (the fleet is full) pays nothing for it.
func (cp *cyclePlacer) read() {
	in := cp.in
	if in == nil {
		return
	}
	cp.in = nil
	cp.running = in.Running
	if cp.kept == nil {
		cp.queued = make(map[cluster.JobID]*executor.JobView, len(in.Queue))
	}
	var hist *histogram
	if NeedsTypical(cp.name) && cp.kept == nil {
		hist = newHistogram()
	}
	add := func(v *executor.JobView) {
		if hist == nil {
			return
		}
		r := RequestOf(&v.Job.Spec)
		hist.add(&r, requestWeight(in.Now, v.Job.SubmitTime, cp.args.HalfLife.Seconds()))
	}
	if cp.kept == nil {
		for _, v := range in.Queue {
			add(v)
			cp.queued[v.Job.ID] = v
		}
	}
	if hist != nil {
		for _, r := range in.Running {
			add(&r.JobView)
		}
	}
	switch {
	case cp.kept != nil:
		cp.typical = cp.kept.typical()
	case hist != nil:
		cp.typical, _ = hist.typical(DefaultPopularity) // nil without a request of any weight: Place uses the job's own
	}
}

// requestWeight is how much a job submitted at submit weighs in the typical
// distribution at now: 2^(−age/halfLife), halfLife in seconds (the keeper
// weighs by a common factor more).
func requestWeight(now, submit time.Time, halfLife float64) float64 {
	return math.Exp2(-max(now.Sub(submit), 0).Seconds() / halfLife)
}

// occupancy is what the planner knows of the jobs sharing one GPU.
type occupancy struct {
	tenant  string
	mixed   bool  // more than one tenant
	milli   int   // share held by the known jobs
	memory  int64 // their forecast P90 memory, where forecast
	noForec int   // share of the known jobs without a memory forecast
	sizes   []int // their MIG instance sizes, in memory slices
}

func (o occupancy) with(tenant string, milli int, mem int64) occupancy {
	o.sizes = append(slices.Clip(o.sizes), migSizeOf(milli))
	if o.milli > 0 && o.tenant != tenant {
		o.mixed = true
	}
	o.tenant = tenant
	o.milli += milli
	if mem > 0 {
		o.memory += mem
	} else {
		o.noForec += milli
	}
	return o
}

// cyclePlacer is the placer of one planning cycle. It is used by one
// goroutine and thrown away with the cycle.
type cyclePlacer struct {
	*Placer
	// in is the cycle's input until the first placement reads it (read).
	in *executor.PlanInput
	// kept is the replay's typical distribution (PlanInput.Kept), if any.
	kept *keeper
	// quiet leaves out the reasons of placements (PlanInput.Unexplained).
	quiet   bool
	typical *Typical
	// req and ctx are the request and context of the job being placed,
	// kept here so that each placement does not allocate them.
	req     Request
	ctx     Context
	running []*executor.RunningJob              // the cycle's (read): who shares a GPU (occupancyOf), nodes' ends (nodeEnds)
	queued  map[cluster.JobID]*executor.JobView // the cycle's queue (memP90, remaining)
	view    Node
	buf     []int
	memo    map[memoKey]memoVal
	// byNode is what the running jobs sharing a GPU hold, indexed by node
	// position and GPU (built on first use: every capacity of one cycle
	// indexes nodes alike).
	byNode    [][]occupancy
	unshared  occupancy        // the occupancy of a GPU no running job shares; never written
	models    map[string]int32 // GPU models numbered, for memo keys
	nodeModel []int32          // node i's model number + 1; 0 unknown
	domains   [][]int8         // node i's NVLink domain number per GPU, -1 none
	// failed remembers shares that fit nowhere, per capacity, tenant and
	// allowed models: a larger share with a larger footprint cannot fit
	// either until the capacity grows.
	failed map[failKey]failVal
	// now, remaining (queued jobs' P90 time left) and nodeEnd (nodeEnds: the latest
	// P90 end of the jobs on each node, this cycle's placements included)
	// drive the energy term.
	now        time.Time
	nodeEnd    []int64
	placedEnds []placedEnd // placements before nodeEnd is read
	// proposed are the shares this placer handed out in the cycle, by GPU:
	// they explain shares of used GPUs that the running set does not.
	proposed map[cluster.GPURef][]proposal
	// withRoom lists, per capacity, the ready nodes that had some GPU share
	// free when it last grew: shares only shrink until it grows again, so
	// the list stays a superset of the nodes a share can go to.
	withRoom map[*executor.Capacity]*roomList
}

// occupancyOf is what is known of GPU g of node i (read only).
func (cp *cyclePlacer) occupancyOf(c *executor.Capacity, i, g int) *occupancy {
	if cp.byNode == nil {
		cp.byNode = make([][]occupancy, 0)
		for _, r := range cp.running {
			for _, a := range r.Allocations {
				if a.Milli >= cluster.MilliGPU {
					continue
				}
				k, ok := c.NodeIndex(a.GPU.Node)
				if !ok || a.GPU.Index >= len(c.Node(k).GPUs) {
					continue
				}
				for len(cp.byNode) <= k {
					cp.byNode = append(cp.byNode, nil)
				}
				if cp.byNode[k] == nil {
					cp.byNode[k] = make([]occupancy, len(c.Node(k).GPUs))
				}
				o := &cp.byNode[k][a.GPU.Index]
				*o = o.with(r.Job.Spec.Tenant, a.Milli, r.Forecast.MemoryP90Bytes)
			}
		}
	}
	if i < len(cp.byNode) && cp.byNode[i] != nil {
		return &cp.byNode[i][g]
	}
	return &cp.unshared
}

// Place implements executor.Placer.
func (cp *cyclePlacer) Place(job *cluster.Job, c *executor.Capacity) ([]cluster.Allocation, bool, string) {
	cp.read()
	spec := &job.Spec
	cp.req = RequestOf(spec)
	req := &cp.req
	// Host CPU and memory are not in the capacity index: the planner
	// places by GPUs (the fill experiment checks them).
	req.CPUMilli, req.MemoryBytes = 0, 0
	cp.ctx = Context{Typical: cp.typical}
	ctx := &cp.ctx
	if ctx.Typical == nil && NeedsTypical(cp.name) {
		ctx.Typical, _ = NewTypical([]Request{*req}, 1) // one request: no error
	}
	switch {
	case spec.GPUs == 0:
		return nil, true, "needs no GPU"
	case spec.Fractional():
		allocs, ok, why := cp.placeShareRemembering(job, req, c, ctx)
		if ok {
			cp.placed(job, allocs, c)
		}
		return allocs, ok, why
	case c.FreeGPUs() < spec.GPUs:
		return nil, false, "not enough GPUs free"
	}
	var buf [8]int // most jobs are a few tasks: no allocation per try
	tasks, ok := spec.AppendTasks(buf[:0], c.MaxNodeGPUs())
	if !ok {
		return nil, false, "gang cannot be split evenly onto nodes"
	}
	var allocs []cluster.Allocation
	var why string
	if len(tasks) == 1 {
		allocs, ok, why = cp.placeOnNode(job, req, c, ctx)
	} else {
		allocs, ok, why = cp.placeTasks(job, tasks, c)
	}
	if ok {
		cp.placed(job, allocs, c)
	}
	return allocs, ok, why
}

// fillView loads node i's free GPUs into the scratch view; mask, when set,
// says which GPUs the job may use (the others count as taken).
func (cp *cyclePlacer) fillView(c *executor.Capacity, i int, mask func(g, free int) bool) *Node {
	n := c.Node(i)
	v := &cp.view
	v.Index, v.Name, v.Model, v.mig = i, n.Name, "", false
	if len(n.GPUs) > 0 {
		v.Model = n.GPUs[0].Model
	}
	v.CPUMilliLeft, v.CPUMilliCap, v.MemoryLeft = Unlimited, Unlimited, Unlimited
	v.MilliLeft = v.MilliLeft[:0]
	for g := range n.GPUs {
		free := c.FreeMilli(i, g)
		if mask != nil && free > 0 && !mask(g, free) {
			free = 0
		}
		v.MilliLeft = append(v.MilliLeft, free)
	}
	return v
}

// memoKey identifies a node state for the scores of one request: nodes in
// the same state (most often: wholly free, of one model) score alike.
type memoKey struct {
	model int32
	n     int32
	mig   bool
	left  [8]int16
	// the request: scores are a pure function of node state and request
	// within a cycle (the typical distribution is fixed), so the memo
	// lives as long as the cycle.
	gpus, milli int32
}

type memoVal struct {
	score float64
	gpu   int
}

func (cp *cyclePlacer) keyOf(v *Node, req *Request) (memoKey, bool) {
	if len(v.MilliLeft) > 8 {
		return memoKey{}, false
	}
	k := memoKey{model: cp.modelID(v.Index, v.Model), n: int32(len(v.MilliLeft)), mig: v.mig, gpus: int32(req.GPUs), milli: int32(req.Milli)}
	for g, m := range v.MilliLeft {
		k.left[g] = int16(m)
	}
	return k, true
}

// modelID numbers node i's GPU model, remembered by node.
func (cp *cyclePlacer) modelID(i int, model string) int32 {
	if i < len(cp.nodeModel) && cp.nodeModel[i] > 0 {
		return cp.nodeModel[i] - 1
	}
	id, ok := cp.models[model]
	if !ok {
		id = int32(len(cp.models))
		cp.models[model] = id
	}
	for len(cp.nodeModel) <= i {
		cp.nodeModel = append(cp.nodeModel, 0)
	}
	cp.nodeModel[i] = id + 1
	return id
}

func (cp *cyclePlacer) resetMemo() {
	if cp.memo == nil {
		cp.memo = map[memoKey]memoVal{}
		cp.models = map[string]int32{}
	}
}

// score is the scorer's verdict on the view, memoised by node state.
func (cp *cyclePlacer) score(v *Node, req *Request, ctx *Context) memoVal {
	key, memoable := cp.keyOf(v, req)
	if mv, hit := cp.memo[key]; memoable && hit {
		return mv
	}
	s, gpus := cp.scorer.Score(v, req, ctx, cp.buf)
	cp.buf = gpus
	mv := memoVal{score: s, gpu: -1}
	if len(gpus) > 0 {
		mv.gpu = gpus[0]
	}
	if memoable {
		cp.memo[key] = mv
	}
	return mv
}

// queuedView is a queued job's view; nil for a job not queued (with a keeper,
// one not known to it: the keeper holds running jobs' queue views too, but
// only the job being placed, which is queued, is asked for).
func (cp *cyclePlacer) queuedView(id cluster.JobID) *executor.JobView {
	if cp.kept != nil {
		return cp.kept.jobs[id].view
	}
	return cp.queued[id]
}

// memP90 is a queued job's forecast P90 GPU memory; false without one.
func (cp *cyclePlacer) memP90(id cluster.JobID) (int64, bool) {
	if v := cp.queuedView(id); v != nil && v.Forecast.MemoryP90Bytes > 0 {
		return v.Forecast.MemoryP90Bytes, true
	}
	return 0, false
}

// remaining is a queued job's P90 time left; zero for a job not queued.
func (cp *cyclePlacer) remaining(id cluster.JobID) time.Duration {
	if v := cp.queuedView(id); v != nil {
		return v.RemainingP90()
	}
	return 0
}

// memP90Bytes is memP90 without its flag (zero without a forecast).
func (cp *cyclePlacer) memP90Bytes(id cluster.JobID) int64 {
	m, _ := cp.memP90(id)
	return m
}
