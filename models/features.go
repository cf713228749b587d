package models

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prescient-sched/prescient/cluster"
)

// DefaultWindow is how many of a group's most recent outcomes its
// aggregates cover.
const DefaultWindow = 64

// minComparable is how many outcomes a group needs before the "comparable
// jobs" features use it rather than the next coarser group.
const minComparable = 3

// FeatureConfig fixes the feature pipeline. It travels inside every
// artifact, so that the predictor computes exactly the features the model
// was trained on: training and serving share this one pipeline.
type FeatureConfig struct {
	Target Target
	// Window is how many of a group's most recent outcomes its aggregates
	// (quantiles, mean) cover; 0 means DefaultWindow.
	Window int
	// Relative gives every aggregate of outcomes but the comparable jobs'
	// quantiles as its difference from comparable_q50 (the column named
	// with the suffix "_rel"). Learners then see how a group differs from
	// the comparable jobs, not how long its jobs are: with absolute levels
	// they learned that long levels revert, and when a tenant's jobs grew
	// longer for good (Philly's 6214e9 after 2017-11-20) they kept
	// predicting the old level. Artifacts trained before it have false.
	Relative bool
	// Limits adds the user's time limit (JobSpec.TimeLimit) to the row: its
	// log, its log less comparable_q50, and groups of jobs that asked for
	// the same limit (the user's and everyone's). With it, the comparable
	// jobs are the user's with the same limit where there are enough. On
	// HPC logs the request is the strongest single feature: users repeat
	// jobs, and a job's limit says which. Set it only for histories that
	// carry limits (DefaultFeatureConfigFor).
	Limits bool
}

// DefaultFeatureConfig returns the pipeline for target.
func DefaultFeatureConfig(t Target) FeatureConfig {
	return FeatureConfig{Target: t, Window: DefaultWindow, Relative: true}
}

// DefaultFeatureConfigFor is DefaultFeatureConfig with Limits set when
// any job of the history carries a time limit.
func DefaultFeatureConfigFor(t Target, jobs []cluster.Job) FeatureConfig {
	c := DefaultFeatureConfig(t)
	for i := range jobs {
		if jobs[i].Spec.TimeLimit > 0 {
			c.Limits = true
			break
		}
	}
	return c
}

// Validate rejects a config no pipeline could run.
func (c FeatureConfig) Validate() error {
	if _, err := ParseTarget(string(c.Target)); err != nil {
		return fmt.Errorf("feature config: %w", err)
	}
	if c.Window < 0 || c.Window > 1<<16 {
		return fmt.Errorf("feature config: window %d is outside 0..65536", c.Window)
	}
	return nil
}

func (c FeatureConfig) window() int {
	if c.Window == 0 {
		return DefaultWindow
	}
	return c.Window
}

// A level groups comparable jobs: those with the same key. key appends the
// job's key to dst; appending nothing means the job has no group at this
// level (e.g. no user in the trace). Keys are built in a reused buffer so
// that looking a group up allocates nothing.
type level struct {
	name string
	key  func(dst []byte, s *cluster.JobSpec) []byte
}

// levels are the groups of comparable jobs, finest first. The "comparable"
// features and the rolling-median baseline use the first of tenantGPUs,
// tenant with enough outcomes, else all jobs.
var levels = []level{
	{"tenant_gpus", func(d []byte, s *cluster.JobSpec) []byte { return withInt(d, s.Tenant, s.GPUs) }},
	{"tenant", func(d []byte, s *cluster.JobSpec) []byte { return append(d, s.Tenant...) }},
	{"gpus", func(d []byte, s *cluster.JobSpec) []byte {
		return strconv.AppendInt(append(strconv.AppendInt(d, int64(s.GPUs), 10), '/'), int64(s.GPUMilli), 10)
	}},
	{"user_gpus", func(d []byte, s *cluster.JobSpec) []byte { return withInt(d, s.User, s.GPUs) }},
	{"name", func(d []byte, s *cluster.JobSpec) []byte { return append(d, s.Name...) }},
	{"model", func(d []byte, s *cluster.JobSpec) []byte { return append(d, s.Labels[cluster.LabelModel]...) }},
	{"model_batch", func(d []byte, s *cluster.JobSpec) []byte {
		m := s.Labels[cluster.LabelModel]
		if m == "" {
			return d
		}
		return append(append(append(d, m...), 0), s.Labels[cluster.LabelBatchSize]...)
	}},
}

// limitLevels are the groups FeatureConfig.Limits adds after levels.
var limitLevels = []level{
	{"user_limit", func(d []byte, s *cluster.JobSpec) []byte {
		if s.TimeLimit <= 0 {
			return d
		}
		return withInt(d, limitOwner(s), int(s.TimeLimit/time.Second))
	}},
	{"limit", func(d []byte, s *cluster.JobSpec) []byte {
		if s.TimeLimit <= 0 {
			return d
		}
		return strconv.AppendInt(d, int64(s.TimeLimit/time.Second), 10)
	}},
}

// allLevels is levels followed by limitLevels: a config's levels are
// its first c.numLevels().
var allLevels = append(slices.Clip(levels), limitLevels...)

func (c FeatureConfig) numLevels() int {
	if c.Limits {
		return len(allLevels)
	}
	return len(levels)
}

// withInt appends "s\x00n", or nothing when s is empty.
func withInt(d []byte, s string, n int) []byte {
	if s == "" {
		return d
	}
	return strconv.AppendInt(append(append(d, s...), 0), int64(n), 10)
}

// comparableLevels are the indexes in allLevels that "comparable jobs"
// falls back through, finest first, before all jobs; with Limits, the
// user's jobs with the same limit come first.
var (
	comparableLevels      = []int{0, 1}
	comparableLevelsLimit = []int{len(levels), 0, 1}
)

func (c FeatureConfig) comparableLevels() []int {
	if c.Limits {
		return comparableLevelsLimit
	}
	return comparableLevels
}

// Per-group aggregates, in this order for every level.
var groupStats = []string{"count_log", "q10", "q50", "q90", "mean", "last", "age_log", "recent_q50", "recent_max"}

// recentN is how many of the latest outcomes the recent_* aggregates cover.
const recentN = 8

// levelStats are the groupStats that are outcomes (log values), which
// FeatureConfig.Relative gives relative to comparable_q50.
var levelStats = map[string]bool{"q10": true, "q50": true, "q90": true, "mean": true, "last": true, "recent_q50": true, "recent_max": true}

// relativeSuffix marks the columns FeatureConfig.Relative makes relative.
const relativeSuffix = "_rel"

// Names of the columns the baselines read.
const (
	FeatureComparableQ10 = "comparable_q10"
	FeatureComparableQ50 = "comparable_q50"
	FeatureComparableQ90 = "comparable_q90"
)

// FeatureNames lists the columns of a feature row, in order.
func (c FeatureConfig) FeatureNames() []string {
	rel := func(n string) string {
		if c.Relative {
			return n + relativeSuffix
		}
		return n
	}
	names := []string{
		"gpus_log2", "gpu_share", "tier", "gang_size", "cpu_cores_log", "host_memory_log",
		"checkpointable", "deadline_slack_log", "batch_size_log",
		"hour_sin", "hour_cos", "weekday_sin", "weekday_cos", "weekend",
		"all_count_log", rel("all_q10"), rel("all_q50"), rel("all_q90"), rel("all_mean"),
		FeatureComparableQ10, FeatureComparableQ50, FeatureComparableQ90, "comparable_level",
	}
	if c.Limits {
		names = append(names, "time_limit_log", "time_limit_rel")
	}
	for _, l := range allLevels[:c.numLevels()] {
		for _, s := range groupStats {
			if levelStats[s] {
				names = append(names, rel(l.name+"_"+s))
			} else {
				names = append(names, l.name+"_"+s)
			}
		}
	}
	return names
}

// relativeColumns are the indexes of a row's outcome aggregates other
// than the comparable quantiles: those FeatureConfig.Relative makes
// relative, without and with Limits. A row's layout is fixed by its
// config, so they are computed once.
var relativeColumns = [2][]int{relativeColumnsOf(false), relativeColumnsOf(true)}

func relativeColumnsOf(limits bool) []int {
	var out []int
	for i, n := range (FeatureConfig{Relative: true, Limits: limits}).FeatureNames() {
		if strings.HasSuffix(n, relativeSuffix) && n != "time_limit_rel" {
			out = append(out, i)
		}
	}
	return out
}

// History holds what is known about finished jobs: for every group of
// comparable jobs, a window of its most recent outcomes (in log space).
// It is the causal state of the pipeline: Features sees only what was
// Observed. Fields are exported for encoding; use the methods.
type History struct {
	Config FeatureConfig
	All    *Window
	Groups map[string]*Window // by level name + "\x00" + key
}

// NewHistory returns an empty history for c.
func NewHistory(c FeatureConfig) *History {
	return &History{Config: c, All: newWindow(c.window()), Groups: map[string]*Window{}}
}

// Observe adds a finished job's outcome. Jobs whose target is unknown are
// ignored; it reports whether the job counted.
func (h *History) Observe(j *cluster.Job) bool {
	v, ok := h.Config.Target.Label(j)
	if !ok {
		return false
	}
	end := EndTime(j).Unix()
	lv := Log(v)
	h.All.add(lv, end)
	var buf [128]byte
	for i := range h.Config.numLevels() {
		if w := h.group(buf[:0], i, &j.Spec, true); w != nil {
			w.add(lv, end)
		}
	}
	return true
}

// Observed is how many outcomes the history has seen.
func (h *History) Observed() int64 { return h.All.Count }

// group finds the job's window at level lvl, building its key in buf;
// nil when the job has no group there or (without create) none is known.
func (h *History) group(buf []byte, lvl int, s *cluster.JobSpec, create bool) *Window {
	id := append(buf, allLevels[lvl].name...)
	id = append(id, 0)
	n := len(id)
	if id = allLevels[lvl].key(id, s); len(id) == n {
		return nil
	}
	w := h.Groups[string(id)] // no allocation: the compiler looks up without copying
	if w == nil && create {
		w = newWindow(h.Config.window())
		h.Groups[string(id)] = w
	}
	return w
}

// NumFeatures is the length of a feature row.
func (c FeatureConfig) NumFeatures() int {
	n := 23 + c.numLevels()*len(groupStats)
	if c.Limits {
		n += 2
	}
	return n
}

// Features appends the feature row of job to dst and returns it. It uses
// only the job's spec and submit time and what the history has observed.
func (h *History) Features(dst []float64, j *cluster.Job) []float64 {
	s := &j.Spec
	dst = append(dst,
		math.Log2(1+float64(s.GPUs)), float64(s.GPUMilli)/cluster.MilliGPU, float64(s.Tier), float64(s.GangSize),
		math.Log1p(float64(s.CPUMilli)/1000), math.Log1p(float64(s.MemoryBytes)), b2f(s.Checkpointable),
		deadlineSlack(j), batchSize(s))
	t := j.SubmitTime.UTC()
	hour := (float64(t.Hour()) + float64(t.Minute())/60) / 24 * 2 * math.Pi
	day := float64(t.Weekday()) / 7 * 2 * math.Pi
	dst = append(dst, math.Sin(hour), math.Cos(hour), math.Sin(day), math.Cos(day),
		b2f(t.Weekday() == 0 || t.Weekday() == 6))

	all := h.All
	gq10, gq50, gq90 := all.quantile(0.1), all.quantile(0.5), all.quantile(0.9)
	dst = append(dst, math.Log1p(float64(all.Count)), gq10, gq50, gq90, all.mean(gq50))

	// Comparable jobs: the finest of the comparable levels with enough outcomes.
	cq10, cq50, cq90, clvl := gq10, gq50, gq90, float64(len(h.Config.comparableLevels()))
	var buf [128]byte
	for n, i := range h.Config.comparableLevels() {
		if w := h.group(buf[:0], i, s, false); w != nil && w.Count >= minComparable {
			cq10, cq50, cq90, clvl = w.quantile(0.1), w.quantile(0.5), w.quantile(0.9), float64(n)
			break
		}
	}
	dst = append(dst, cq10, cq50, cq90, clvl)
	if h.Config.Limits {
		if s.TimeLimit > 0 {
			l := Log(s.TimeLimit.Seconds())
			dst = append(dst, l, l-cq50)
		} else {
			dst = append(dst, -1, 0)
		}
	}

	now := j.SubmitTime.Unix()
	for i := range h.Config.numLevels() {
		w := h.group(buf[:0], i, s, false)
		if w == nil || w.Count == 0 {
			dst = append(dst, 0, gq10, gq50, gq90, gq50, gq50, noAge, gq50, gq90)
			continue
		}
		age := math.Log1p(math.Max(0, float64(now-w.LastEndUnix)))
		dst = append(dst, math.Log1p(float64(w.Count)), w.quantile(0.1), w.quantile(0.5), w.quantile(0.9),
			w.mean(gq50), w.LastVal, age, w.RecentQ50, w.RecentMax)
	}
	if h.Config.Relative {
		row := dst[len(dst)-h.Config.NumFeatures():]
		for _, c := range relativeColumns[b2i(h.Config.Limits)] {
			row[c] -= cq50
		}
	}
	return dst
}

// noAge stands for "never": log1p of about 115 days.
var noAge = math.Log1p(1e7)

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// batchSize is log1p of the batch_size label; -1 without one.
func batchSize(s *cluster.JobSpec) float64 {
	v, err := strconv.ParseFloat(s.Labels[cluster.LabelBatchSize], 64)
	if err != nil || !(v >= 0) || math.IsInf(v, 0) {
		return -1
	}
	return math.Log1p(v)
}

func deadlineSlack(j *cluster.Job) float64 {
	if !j.Spec.HasDeadline() {
		return -1
	}
	return math.Log1p(math.Max(0, j.Spec.Deadline.Sub(j.SubmitTime).Seconds()))
}

// Rows computes the feature row of every query job, causally: the row of a
// job submitted at t sees only the history jobs whose outcome was known
// before t (EndTime(j) < t). history and queries may be the same slice and
// need not be sorted. Rows come back in the order of queries, sharing one
// backing array. It takes O((n+m) log(n+m)) plus O(window) per job.
func (c FeatureConfig) Rows(history, queries []cluster.Job) [][]float64 {
	return c.stream(history, queries, nil).Rows
}

// Stream is serving replayed over a window: the rows of the query jobs as
// each was forecast when submitted (Rows), and the outcomes that arrived
// meanwhile, in the order they did, each with its row as the history
// stood when it arrived (before its own outcome): what Blend learns from.
type Stream struct {
	Config  FeatureConfig // the pipeline that computed the rows
	Queries []cluster.Job
	Rows    [][]float64 // by query
	// Observed are the labelled history jobs that ended at or after the
	// stream's start, in end order.
	Observed []Observation
	// Heard[i] is how many of Observed had arrived when query i was
	// submitted.
	Heard []int
}

// Observation is a finished job as Stream heard of it.
type Observation struct {
	Job *cluster.Job
	Row []float64
	Y   float64 // the outcome, in log space
}

// Stream computes Rows(history, queries) and, from from on, the outcomes
// that arrive as the queries are submitted (Stream.Observed).
func (c FeatureConfig) Stream(history, queries []cluster.Job, from time.Time) Stream {
	return c.stream(history, queries, &from)
}

func (c FeatureConfig) stream(history, queries []cluster.Job, from *time.Time) Stream {
	h := NewHistory(c)
	type ended struct {
		at  int64
		idx int
	}
	ends := make([]ended, 0, len(history))
	for i := range history {
		if _, ok := c.Target.Label(&history[i]); ok {
			ends = append(ends, ended{EndTime(&history[i]).UnixNano(), i})
		}
	}
	slices.SortFunc(ends, func(a, b ended) int { return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.idx, b.idx)) })
	order := make([]int, len(queries))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		return cmp.Or(queries[a].SubmitTime.Compare(queries[b].SubmitTime), cmp.Compare(a, b))
	})

	p := c.NumFeatures()
	backing := make([]float64, 0, p*len(queries))
	s := Stream{Config: c, Queries: queries, Rows: make([][]float64, len(queries))}
	if from != nil {
		s.Heard = make([]int, len(queries))
	}
	next := 0
	var obs []float64
	for _, qi := range order {
		t := queries[qi].SubmitTime.UnixNano()
		for ; next < len(ends) && ends[next].at < t; next++ {
			j := &history[ends[next].idx]
			if from != nil && ends[next].at >= from.UnixNano() {
				v, _ := c.Target.Label(j)
				start := len(obs)
				obs = h.Features(obs, j)
				s.Observed = append(s.Observed, Observation{Job: j, Row: obs[start:len(obs):len(obs)], Y: Log(v)})
			}
			h.Observe(j)
		}
		start := len(backing)
		backing = h.Features(backing, &queries[qi])
		s.Rows[qi] = backing[start:len(backing):len(backing)]
		if from != nil {
			s.Heard[qi] = len(s.Observed)
		}
	}
	return s
}

// Serve is what m would have served for the queries, at quantiles qs: its
// forecasts, and for a learned model (not a Baseline) each moved by a
// Blend that hears the outcomes as they arrived.
func (s Stream) Serve(m Model, qs []float64) ([][]float64, error) {
	q, err := m.PredictQuantiles(s.Rows, qs)
	if err != nil {
		return nil, err
	}
	return q, s.Blend(m, qs, q)
}

// Blend moves q, m's own forecasts of the queries at quantiles qs, to
// what m serves (see Serve), in place: nothing for a baseline or a stream
// without outcomes.
func (s Stream) Blend(m Model, qs []float64, q [][]float64) error {
	if !Blended(m) || s.Heard == nil {
		return nil // without outcomes, a Blend serves the forecasts as they are
	}
	b, err := NewBlend(s.Config.FeatureNames())
	if err != nil {
		return err
	}
	obsRows := make([][]float64, len(s.Observed))
	for i := range s.Observed {
		obsRows[i] = s.Observed[i].Row
	}
	var p50 [][]float64
	if len(obsRows) > 0 {
		if p50, err = m.PredictQuantiles(obsRows, []float64{0.5}); err != nil {
			return err
		}
	}
	order := make([]int, len(s.Queries))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(s.Heard[a], s.Heard[b]) })
	next := 0
	for _, qi := range order {
		for ; next < s.Heard[qi]; next++ {
			o := &s.Observed[next]
			b.Learn(o.Job.Spec.Tenant, o.Row, p50[next][0], o.Y)
		}
		b.Serve(s.Queries[qi].Spec.Tenant, s.Rows[qi], qs, q[qi])
	}
	return nil
}

// Window is a group's most recent outcomes (log values) with their sorted
// copy, the count of all outcomes ever seen and the last one.
type Window struct {
	Ring        []float64 // the last len(Ring) ≤ cap values, oldest at Head once full
	Head        int
	Cap         int
	Sorted      []float64
	Sum         float64 // of Ring
	Count       int64
	LastVal     float64
	LastEndUnix int64
	// RecentQ50 and RecentMax are the median and maximum of the latest
	// recentN values, kept up to date by add.
	RecentQ50, RecentMax float64
}

func newWindow(capacity int) *Window { return &Window{Cap: capacity} }

func (w *Window) add(v float64, endUnix int64) {
	if len(w.Ring) < w.Cap {
		w.Ring = append(w.Ring, v)
	} else {
		old := w.Ring[w.Head]
		w.Ring[w.Head] = v
		w.Head = (w.Head + 1) % w.Cap
		w.Sum -= old
		i, _ := slices.BinarySearch(w.Sorted, old)
		w.Sorted = slices.Delete(w.Sorted, i, i+1)
	}
	w.Sum += v
	i, _ := slices.BinarySearch(w.Sorted, v)
	w.Sorted = slices.Insert(w.Sorted, i, v)
	w.Count++
	// Outcomes arrive in end order in Rows; a live history may see them out
	// of order, and "last" is the latest to end.
	if endUnix >= w.LastEndUnix || w.Count == 1 {
		w.LastVal, w.LastEndUnix = v, endUnix
	}
	w.RecentQ50, w.RecentMax = w.recent()
}

// recent returns the median and the maximum of the latest recentN values.
func (w *Window) recent() (median, maximum float64) {
	var buf [recentN]float64
	n := min(recentN, len(w.Ring))
	newest := len(w.Ring) - 1 // before the ring is full, values are in order
	if len(w.Ring) == w.Cap {
		newest = (w.Head - 1 + w.Cap) % w.Cap
	}
	for k := range n {
		buf[k] = w.Ring[(newest-k+len(w.Ring))%len(w.Ring)]
	}
	r := buf[:n]
	slices.Sort(r)
	return QuantileSorted(r, 0.5), r[n-1]
}

// quantile interpolates the q-quantile of the window; 0 when empty.
func (w *Window) quantile(q float64) float64 { return QuantileSorted(w.Sorted, q) }

func (w *Window) mean(ifEmpty float64) float64 {
	if len(w.Ring) == 0 {
		return ifEmpty
	}
	return w.Sum / float64(len(w.Ring))
}

// validate checks a decoded window's invariants.
func (w *Window) validate() error {
	if w.Cap < 1 || len(w.Ring) > w.Cap || len(w.Sorted) != len(w.Ring) || w.Head < 0 || (w.Head > 0 && w.Head >= len(w.Ring)) || w.Count < int64(len(w.Ring)) {
		return fmt.Errorf("history window: inconsistent sizes (cap %d, ring %d, sorted %d, head %d, count %d)", w.Cap, len(w.Ring), len(w.Sorted), w.Head, w.Count)
	}
	if !slices.IsSorted(w.Sorted) {
		return fmt.Errorf("history window: values not sorted")
	}
	return nil
}

// Validate checks a decoded history before it is used.
func (h *History) Validate() error {
	if err := h.Config.Validate(); err != nil {
		return err
	}
	if h.All == nil {
		return fmt.Errorf("history: missing")
	}
	if err := h.All.validate(); err != nil {
		return err
	}
	for k, w := range h.Groups {
		if w == nil {
			return fmt.Errorf("history: group %q is empty", k)
		}
		if err := w.validate(); err != nil {
			return fmt.Errorf("group %q: %w", k, err)
		}
	}
	return nil
}

// QuantileSorted interpolates the q-quantile of sorted values; 0 when
// there are none.
func QuantileSorted(sorted []float64, q float64) float64 {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	pos := q * float64(n-1)
	lo := int(math.Floor(pos))
	if lo < 0 {
		return sorted[0]
	}
	if lo >= n-1 {
		return sorted[n-1]
	}
	f := pos - float64(lo)
	return sorted[lo]*(1-f) + sorted[lo+1]*f
}
