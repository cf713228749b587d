package idle

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
)

// GPUState is what the executor and the telemetry say about one GPU now.
type GPUState struct {
	Ref cluster.GPURef
	// Pool names the pool the GPU belongs to (a virtual cluster); empty
	// means its node.
	Pool string
	// Job holds the GPU; empty when it is unallocated. RemainingP50 and
	// RemainingP90 are the job's forecast remaining run time (the duration
	// model's P50 and P90 less what it has run).
	Job                        cluster.JobID
	RemainingP50, RemainingP90 time.Duration
	// IdleFor is how long its utilization has been below the idle
	// threshold; 0 when it is busy now.
	IdleFor time.Duration
}

// PoolState is a pool's queued demand and, when the telemetry has it, its
// idle-count history (ending at the forecast's Now).
type PoolState struct {
	ID         string
	QueuedGPUs float64
	History    *Pool
}

// Input is what a forecast is made from.
type Input struct {
	Now   time.Time
	GPUs  []GPUState
	Pools []PoolState
	// Horizon and Step: lead times Step, 2·Step, ... up to Horizon.
	Horizon, Step time.Duration
	// MinWindow is the shortest idle window reported, and how long a job's
	// GPUs must have been idle for the job to be reported.
	MinWindow time.Duration
	// MinProbability is the chance of being idle a step needs to be part
	// of a window.
	MinProbability float64
	// TelemetryWeight is how much the telemetry model's pool count counts
	// against the executor's expected count (0 to 1).
	TelemetryWeight float64
}

// DefaultInput returns an Input with the default horizon (2 h in 5-minute
// steps), 15-minute windows, probability 0.5 and equal weights.
func DefaultInput(now time.Time) Input {
	return Input{Now: now, Horizon: 2 * time.Hour, Step: 5 * time.Minute, MinWindow: 15 * time.Minute, MinProbability: 0.5, TelemetryWeight: 0.5}
}

// Validate rejects an input no forecast can be made from.
func (in Input) Validate() error {
	switch {
	case in.Step <= 0 || in.Horizon < in.Step:
		return fmt.Errorf("idle forecast: step %s and horizon %s: want 0 < step <= horizon", in.Step, in.Horizon)
	case in.MinWindow < 0 || !(in.MinProbability > 0 && in.MinProbability <= 1) || !(in.TelemetryWeight >= 0 && in.TelemetryWeight <= 1):
		return fmt.Errorf("idle forecast: window %s, probability %g, telemetry weight %g out of range", in.MinWindow, in.MinProbability, in.TelemetryWeight)
	}
	for i := range in.GPUs {
		g := &in.GPUs[i]
		if g.Job != "" && (g.RemainingP50 <= 0 || g.RemainingP90 < g.RemainingP50) {
			return fmt.Errorf("idle forecast: GPU %s: job %s remaining P50 %s, P90 %s: want 0 < P50 <= P90", g.Ref, g.Job, g.RemainingP50, g.RemainingP90)
		}
	}
	return nil
}

// z90 is the standard normal's 90th percentile.
const z90 = 1.2815515655446004

// Window is a span in which a GPU is forecast idle; Probability is the
// lowest per-step chance of being idle inside it.
type Window struct {
	Start       time.Time `json:"start"`
	End         time.Time `json:"end"`
	Probability float64   `json:"probability"`
}

// GPUForecast is one GPU's chance of being idle at each lead time, and its
// idle windows of at least MinWindow.
type GPUForecast struct {
	Ref         cluster.GPURef `json:"-"`
	Node        string         `json:"node"`
	Index       int            `json:"index"`
	Pool        string         `json:"pool"`
	Probability []float64      `json:"probability"`
	Windows     []Window       `json:"windows"`
}

// CountForecast is how many GPUs of a pool or node are expected idle at
// each lead time; for pools with telemetry, the model's P10 and P90 too,
// at the lead times up to the model's horizon (2 h by default).
type CountForecast struct {
	ID       string    `json:"id"`
	GPUs     int       `json:"gpus"`
	Expected []float64 `json:"expected"`
	P10      []float64 `json:"p10,omitempty"`
	P90      []float64 `json:"p90,omitempty"`
}

// IdleJob is a job whose every GPU has been idle for at least MinWindow:
// it holds GPUs it does not use.
type IdleJob struct {
	Job      cluster.JobID `json:"job_id"`
	GPUs     int           `json:"gpus"`
	IdleForS float64       `json:"idle_for_s"`
}

// Forecast is the answer: per GPU, per pool, per node, and the idle jobs.
type Forecast struct {
	Now      time.Time       `json:"now"`
	LeadsS   []float64       `json:"leads_s"`
	GPUs     []GPUForecast   `json:"gpus"`
	Pools    []CountForecast `json:"pools"`
	Nodes    []CountForecast `json:"nodes"`
	IdleJobs []IdleJob       `json:"idle_jobs"`
}

// Forecaster combines the executor's knowledge with the telemetry model.
// Model may be nil: then only the executor's knowledge counts, and
// allocated GPUs count as busy until their job ends.
type Forecaster struct {
	Model *Model
}

// ErrNoGPUs is returned for a forecast of no GPUs.
var ErrNoGPUs = errors.New("idle forecast: no GPUs")

// Forecast computes, step by step:
//
//  1. per GPU, the chance it is free: 1 when unallocated, else the chance
//     its job has ended (a log-normal through the job's remaining P50 and
//     P90);
//  2. per pool, the queued demand takes free GPUs first: each free
//     chance shrinks by the share of the expected free GPUs the demand
//     takes;
//  3. an allocated GPU idle for a while is idle with the survival table's
//     chance (when the model has one) unless its job ended;
//  4. where the pool has telemetry, the model's P50 count and the
//     executor's expected count are blended by TelemetryWeight and each
//     GPU's chance scaled to the blend (at most 1);
//  5. windows are runs of steps at MinProbability or more lasting
//     MinWindow; pools and nodes sum their GPUs' chances.
func (f Forecaster) Forecast(in Input) (Forecast, error) {
	if err := in.Validate(); err != nil {
		return Forecast{}, err
	}
	if len(in.GPUs) == 0 {
		return Forecast{}, ErrNoGPUs
	}
	nl := int(in.Horizon / in.Step)
	out := Forecast{Now: in.Now, LeadsS: make([]float64, nl)}
	for l := range nl {
		out.LeadsS[l] = (time.Duration(l+1) * in.Step).Seconds()
	}
	// Pools of the GPUs, in first-seen order.
	poolOf := make([]int, len(in.GPUs))
	poolIdx := map[string]int{}
	var poolIDs []string
	for i := range in.GPUs {
		id := in.GPUs[i].Pool
		if id == "" {
			id = in.GPUs[i].Ref.Node
		}
		k, ok := poolIdx[id]
		if !ok {
			k = len(poolIDs)
			poolIdx[id] = k
			poolIDs = append(poolIDs, id)
		}
		poolOf[i] = k
	}
	states := make([]PoolState, len(poolIDs))
	for _, ps := range in.Pools {
		if k, ok := poolIdx[ps.ID]; ok {
			states[k] = ps
		}
	}

	// 1. Free chances, one row of nl per GPU in one array.
	probs := make([]float64, len(in.GPUs)*nl)
	free := make([]float64, len(poolIDs)*nl)
	for i := range in.GPUs {
		g := &in.GPUs[i]
		row := probs[i*nl : (i+1)*nl]
		if g.Job == "" {
			for l := range row {
				row[l] = 1
			}
		} else {
			mu := math.Log(g.RemainingP50.Seconds())
			sigma := math.Max((math.Log(g.RemainingP90.Seconds())-mu)/z90, 1e-3)
			for l := range row {
				row[l] = 0.5 * math.Erfc(-(math.Log(out.LeadsS[l])-mu)/(sigma*math.Sqrt2))
			}
		}
		fp := free[poolOf[i]*nl : (poolOf[i]+1)*nl]
		for l, v := range row {
			fp[l] += v
		}
	}
	// 2. Queued demand takes free GPUs; 3. allocated but unused GPUs.
	var surv *Survival
	if f.Model != nil {
		surv = f.Model.Survival
	}
	for i := range in.GPUs {
		g := &in.GPUs[i]
		k := poolOf[i]
		row := probs[i*nl : (i+1)*nl]
		for l := range row {
			e := free[k*nl+l]
			taken := math.Min(states[k].QueuedGPUs, e)
			if e > 0 {
				row[l] *= 1 - taken/e
			}
		}
		if g.Job != "" && surv != nil && g.IdleFor > 0 {
			for l := range row {
				ended := row[l] // already discounted for demand
				row[l] = ended + (1-ended)*surv.IdleAt(g.IdleFor, time.Duration(out.LeadsS[l])*time.Second)
			}
		}
	}
	// 4. The telemetry model, per pool with history.
	counts := make([]CountForecast, len(poolIDs))
	for k, id := range poolIDs {
		counts[k] = CountForecast{ID: id, Expected: make([]float64, nl)}
	}
	for i := range in.GPUs {
		c := &counts[poolOf[i]]
		c.GPUs++
		for l, v := range probs[i*nl : (i+1)*nl] {
			c.Expected[l] += v
		}
	}
	if f.Model != nil && in.TelemetryWeight > 0 {
		if err := f.blend(in, states, counts, poolOf, probs, nl); err != nil {
			return Forecast{}, err
		}
	}
	// 5. Windows, nodes, idle jobs.
	out.GPUs = make([]GPUForecast, len(in.GPUs))
	minSteps := int(in.MinWindow / in.Step)
	nodeIdx := map[string]int{}
	jobIdle := map[cluster.JobID]*IdleJob{}
	var jobOrder []cluster.JobID
	for i := range in.GPUs {
		g := &in.GPUs[i]
		row := probs[i*nl : (i+1)*nl : (i+1)*nl]
		w := windows(in, row, minSteps)
		if w == nil {
			w = []Window{}
		}
		out.GPUs[i] = GPUForecast{Ref: g.Ref, Node: g.Ref.Node, Index: g.Ref.Index, Pool: poolIDs[poolOf[i]], Probability: row, Windows: w}
		n, ok := nodeIdx[g.Ref.Node]
		if !ok {
			n = len(out.Nodes)
			nodeIdx[g.Ref.Node] = n
			out.Nodes = append(out.Nodes, CountForecast{ID: g.Ref.Node, Expected: make([]float64, nl)})
		}
		out.Nodes[n].GPUs++
		for l, v := range row {
			out.Nodes[n].Expected[l] += v
		}
		if g.Job != "" {
			j, ok := jobIdle[g.Job]
			if !ok {
				j = &IdleJob{Job: g.Job, IdleForS: math.Inf(1)}
				jobIdle[g.Job] = j
				jobOrder = append(jobOrder, g.Job)
			}
			j.GPUs++
			j.IdleForS = math.Min(j.IdleForS, g.IdleFor.Seconds())
		}
	}
	for _, id := range jobOrder {
		if j := jobIdle[id]; j.IdleForS >= in.MinWindow.Seconds() && j.IdleForS > 0 {
			out.IdleJobs = append(out.IdleJobs, *j)
		}
	}
	out.Pools = counts
	return out, nil
}

// blend moves each pool's GPU chances towards the telemetry model's count.
func (f Forecaster) blend(in Input, states []PoolState, counts []CountForecast, poolOf []int, probs []float64, all int) error {
	nl := all
	var queries []Query
	var which []int
	// The model answers up to its own horizon; later steps keep the
	// executor's count alone.
	nl = min(nl, int(f.Model.Config.Horizon/in.Step))
	if nl == 0 {
		return nil
	}
	for k, s := range states {
		h := s.History
		if h == nil || h.Len() == 0 {
			continue
		}
		leads := make([]int, nl)
		for l := range leads {
			leads[l] = steps(time.Duration(l+1)*in.Step, h.Step)
		}
		queries = append(queries, Query{Pool: h, I: h.Len() - 1, Leads: leads})
		which = append(which, k)
	}
	if len(queries) == 0 {
		return nil
	}
	pred, err := f.Model.Predict(queries, []float64{0.1, 0.5, 0.9})
	if err != nil {
		return err
	}
	scale := make([]float64, len(counts)*nl)
	for k := range scale {
		scale[k] = 1
	}
	w := in.TelemetryWeight
	for q, k := range which {
		if pred[q] == nil {
			continue
		}
		c := &counts[k]
		// The model counts the pool's history's units; the forecast is of
		// the GPUs given, which may be fewer: compare shares.
		capNow := queries[q].Pool.Capacity[queries[q].I]
		c.P10, c.P90 = make([]float64, nl), make([]float64, nl)
		for l := range nl {
			r := float64(c.GPUs) / capNow
			c.P10[l], c.P90[l] = pred[q][l][0]*r, pred[q][l][2]*r
			target := (1-w)*c.Expected[l] + w*pred[q][l][1]*r
			if c.Expected[l] > 0 {
				scale[k*nl+l] = target / c.Expected[l]
			}
			c.Expected[l] = 0
		}
	}
	for i := range poolOf {
		k := poolOf[i]
		if counts[k].P10 == nil {
			continue
		}
		row := probs[i*all : i*all+nl]
		for l := range row {
			row[l] = math.Min(row[l]*scale[k*nl+l], 1)
			counts[k].Expected[l] += row[l]
		}
	}
	return nil
}

// windows finds the runs of steps at MinProbability or more, at least
// minSteps long (one step when minSteps is 0).
func windows(in Input, row []float64, minSteps int) []Window {
	var out []Window
	start := -1
	lowest := 1.0
	for l := 0; l <= len(row); l++ {
		if l < len(row) && row[l] >= in.MinProbability {
			if start < 0 {
				start, lowest = l, row[l]
			}
			lowest = math.Min(lowest, row[l])
			continue
		}
		if start >= 0 && l-start >= max(minSteps, 1) {
			// Step l covers (Now + l·Step, Now + (l+1)·Step]; a run of
			// steps start..l-1 spans from start's beginning to l's.
			out = append(out, Window{Start: in.Now.Add(time.Duration(start) * in.Step), End: in.Now.Add(time.Duration(l) * in.Step),
				Probability: lowest})
		}
		start = -1
	}
	return slices.Clip(out)
}

// Remaining is a running job's remaining P50 and P90 once it has run for
// ran, when its whole run time is log-normal through p50 and p90
// (executor.DurationDist): the quantiles of what is left given that it has
// lasted so far, so that a job past its P50 is still expected to end
// later, not now. Both are at least a second.
func Remaining(p50, p90, ran time.Duration) (rp50, rp90 time.Duration) {
	d := executor.NewDurationDist(p50, p90)
	rp50, rp90 = d.Remaining(ran, 0.5), d.Remaining(ran, 0.9)
	return rp50, max(rp90, rp50)
}
