package training

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/datasets"
	"github.com/prescient-sched/prescient/models"
	"github.com/prescient-sched/prescient/models/idle"
)

// DefaultHoldoutFraction is the share of the latest training jobs held out
// to evaluate, select and gate models.
const DefaultHoldoutFraction = 0.15

// Config says what to train.
type Config struct {
	Target models.Target
	// Until, when set, keeps only jobs submitted before it.
	Until time.Time
	// HoldoutFraction of the latest jobs is the evaluation window; 0 means
	// DefaultHoldoutFraction.
	HoldoutFraction float64
	// Learners to fit, by name; empty means every registered learner.
	Learners []string
	Seed     int64
	Logger   *slog.Logger
	// Progress, when set, hears how far each model's fit is.
	Progress func(model string, done, total int)
	// Now stamps the artifact; nil means time.Now.
	Now func() time.Time
	// NoRefit publishes the selected model as fitted before the holdout
	// window instead of fitting it again on every job (the default).
	NoRefit bool
	// GateWindows is how many consecutive windows of the latest jobs,
	// each the holdout's size and each scored by models fitted on the jobs
	// before it, the selection averages the gate metric over; 0 means
	// DefaultGateWindows, 1 the holdout alone. Every window but the
	// holdout costs each learner one more fit.
	GateWindows int
}

// DefaultGateWindows is the holdout and the window before it, so that a
// learner winning one window by a pattern that does not last loses the
// other. It costs every learner a second fit: the whole Philly table
// trains in 91 s at GOMAXPROCS=1 (79 s with the holdout alone), and the
// Philly backtest served the ensemble on every window either way (W1-W3
// mae_log 1.088, 0.915, 0.959 with two; 1.088, 0.912, 0.958 with one).
const DefaultGateWindows = 2

func (c Config) validate() error {
	if _, err := models.ParseTarget(string(c.Target)); err != nil {
		return err
	}
	if math.IsNaN(c.HoldoutFraction) || c.HoldoutFraction < 0 || c.HoldoutFraction >= 1 {
		return fmt.Errorf("holdout fraction %g is outside [0, 1)", c.HoldoutFraction)
	}
	if c.GateWindows < 0 || c.GateWindows > 5 {
		return fmt.Errorf("gate windows %d: want 1 to 5 (0: the default, %d)", c.GateWindows, DefaultGateWindows)
	}
	frac := cmp.Or(c.HoldoutFraction, DefaultHoldoutFraction)
	if w := cmp.Or(c.GateWindows, DefaultGateWindows); float64(w)*frac >= 0.9 {
		return fmt.Errorf("%d gate windows of %g of the jobs leave too few to fit on", w, frac)
	}
	for _, n := range c.Learners {
		if _, err := models.LookupLearner(n); err != nil {
			return err
		}
	}
	return nil
}

// Report is what a training run or an evaluation reports: one object with
// report keys (see Metrics.Map).
type Report struct {
	Target       models.Target                 `json:"target"`
	ModelVersion int                           `json:"model_version"`
	Rows         int                           `json:"rows"`
	Selected     string                        `json:"selected"`
	Models       map[string]map[string]float64 `json:"models"`
	Baselines    map[string]map[string]float64 `json:"baselines"`
	// EvaluatedFrom and EvaluatedUntil span the scored jobs' submit times.
	EvaluatedFrom  time.Time `json:"evaluated_from"`
	EvaluatedUntil time.Time `json:"evaluated_until"`
	EvaluatedRows  int       `json:"evaluated_rows"`
	// Published and Gate say what the registry did with a trained artifact.
	Published bool   `json:"published"`
	Gate      string `json:"gate,omitempty"`
}

// ErrNoData is returned when too few labelled jobs are left to train or
// to evaluate on.
var ErrNoData = errors.New("not enough labelled jobs")

// minRows is the fewest labelled jobs a fit or an evaluation needs.
const minRows = 20

// dataset is a time-ordered set of jobs and its labelled rows.
type dataset struct {
	jobs    []cluster.Job // all, sorted by submit time
	queries []cluster.Job // the labelled ones to fit on or score
	X       [][]float64
	y       []float64 // log labels
	// stream, in a dataset to score, replays serving over the queries,
	// so that learned models are scored as served (models.Blend).
	stream *models.Stream
}

// rowsFor computes causal rows for the labelled jobs among queries, with
// history as what may be known.
func rowsFor(fc models.FeatureConfig, history, queries []cluster.Job) dataset {
	labelled, y := labelledOf(fc.Target, queries)
	return dataset{jobs: history, queries: labelled, X: fc.Rows(history, labelled), y: y}
}

// scoredRows is rowsFor for a window to score (queries, sorted by submit
// time): it also replays the outcomes that arrive from the window's
// start on, as serving hears them.
func scoredRows(fc models.FeatureConfig, history, queries []cluster.Job) dataset {
	labelled, y := labelledOf(fc.Target, queries)
	var from time.Time
	if len(labelled) > 0 {
		from = labelled[0].SubmitTime
	}
	s := fc.Stream(history, labelled, from)
	return dataset{jobs: history, queries: labelled, X: s.Rows, y: y, stream: &s}
}

// labelledOf is the jobs among queries with a known target, and their log
// labels.
func labelledOf(t models.Target, queries []cluster.Job) ([]cluster.Job, []float64) {
	var labelled []cluster.Job
	var y []float64
	for i := range queries {
		if v, ok := t.Label(&queries[i]); ok {
			labelled = append(labelled, queries[i])
			y = append(y, models.Log(v))
		}
	}
	return labelled, y
}

// Rows are the causal feature rows of target t's labelled jobs among
// jobs, as training and evaluation compute them: each job's row sees the
// jobs that ended before its submit time. It returns those jobs, in submit
// order, their rows and their log labels.
func Rows(t models.Target, jobs []cluster.Job) ([]cluster.Job, [][]float64, []float64) {
	sorted := sortedBySubmit(jobs)
	d := rowsFor(models.DefaultFeatureConfigFor(t, sorted), sorted, sorted)
	return d.queries, d.X, d.y
}

// sortedBySubmit is a copy of jobs in submit order (stable: jobs
// submitted at the same time keep their order), as rowsFor wants them.
func sortedBySubmit(jobs []cluster.Job) []cluster.Job {
	sorted := slices.Clone(jobs)
	slices.SortStableFunc(sorted, func(a, b cluster.Job) int { return a.SubmitTime.Compare(b.SubmitTime) })
	return sorted
}

// Train fits every learner on the earlier part of jobs, scores each on the
// later holdout window, selects the one with the best gate metric and
// returns the artifact (unpublished, Version 0) with its report.
func Train(ctx context.Context, cfg Config, jobs []cluster.Job) (*models.Artifact, Report, error) {
	r, err := train(ctx, cfg, jobs)
	if err != nil {
		return nil, Report{}, err
	}
	return r.art, r.rep, nil
}

// trained is a training run's result with what the gate needs: the jobs
// before Until, sorted, and the selected model as fitted before the
// holdout window (the artifact may hold it fitted again on every job).
type trained struct {
	art      *models.Artifact
	rep      Report
	all      []cluster.Job
	selected models.Model
}

func train(ctx context.Context, cfg Config, jobs []cluster.Job) (*trained, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	log := logger(cfg.Logger)
	fc := models.DefaultFeatureConfigFor(cfg.Target, jobs)

	// 1. The jobs before Until, split in time into fit and holdout windows.
	all := jobs
	if !cfg.Until.IsZero() {
		all, _ = datasets.SplitByTime(jobs, cfg.Until)
	}
	all = sortedBySubmit(all)
	if len(all) < 2*minRows {
		return nil, fmt.Errorf("train: %w: %d jobs", ErrNoData, len(all))
	}
	frac := cmp.Or(cfg.HoldoutFraction, DefaultHoldoutFraction)
	fitJobs, holdJobs, holdFrom, err := datasets.SplitFraction(all, 1-frac)
	if err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}

	// 2. Causal features: fit rows see earlier fit jobs; holdout rows see all.
	t0 := time.Now()
	fit := rowsFor(fc, fitJobs, fitJobs)
	hold := scoredRows(fc, all, holdJobs)
	log.Info("features computed", "fit_rows", len(fit.y), "holdout_rows", len(hold.y), "features", fc.NumFeatures(), "took", time.Since(t0).Round(time.Millisecond))
	if len(fit.y) < minRows || len(hold.y) < minRows {
		return nil, fmt.Errorf("train: %w for target %s: %d to fit, %d to evaluate", ErrNoData, cfg.Target, len(fit.y), len(hold.y))
	}

	// 3. Fit and score every learner.
	art := &models.Artifact{
		Format: models.ArtifactFormat, Target: cfg.Target, CreatedAt: now(cfg).UTC(),
		DataFrom: all[0].SubmitTime, DataUntil: all[len(all)-1].SubmitTime, HoldoutFrom: holdFrom,
		Rows: len(fit.y), Features: fc, FeatureNames: fc.FeatureNames(),
		Models: map[string][]byte{}, Metrics: map[string]map[string]float64{},
	}
	rep := newReport(cfg.Target, hold)
	rep.Rows = len(fit.y)
	done := fitted{}
	for _, l := range learnersOf(cfg) {
		m, met, fitS, err := fitAndScore(ctx, cfg, l, art.FeatureNames, fit, hold, l.Name, done, log)
		if err != nil {
			return nil, fmt.Errorf("train: %w", err)
		}
		if art.Models[l.Name], err = m.MarshalBinary(); err != nil {
			return nil, fmt.Errorf("train: %s: %w", l.Name, err)
		}
		row := met.Map(cfg.Target)
		row["fit_s"] = fitS
		art.Metrics[l.Name] = row
		rep.add(l, row)
		log.Info("model fitted", "model", l.Name, "fit_s", round3(fitS), "mae_log", round3(met.MAELog), "spearman", round3(met.Spearman), "p90_coverage", round3(met.P90Coverage))
	}

	// 4. Select by the gate metric over the holdout and the windows before
	// it; explain with permutation importance.
	if err := earlierWindows(ctx, cfg, fc, fitJobs, len(holdJobs), art, log); err != nil {
		return nil, err
	}
	art.Selected = selectBest(cfg.Target, art.Metrics)
	rep.Selected = art.Selected
	art.Center, art.Scale = featureStats(fit.X)
	art.Importance = permutationImportance(done[art.Selected].m, hold, cfg.Seed)

	// 5. Fit the selected model again on every job, holdout included, so
	// that it has seen the latest weeks; its figures stay those of step 3.
	if !cfg.NoRefit {
		if err := refit(ctx, cfg, art, fc, all, log); err != nil {
			return nil, err
		}
	}

	// 6. The history the predictor starts from: every training job.
	art.History = models.NewHistory(fc)
	observeInEndOrder(art.History, all)
	rep.Rows = art.Rows
	return &trained{art: art, rep: rep, all: all, selected: done[art.Selected].m}, nil
}

func refit(ctx context.Context, cfg Config, art *models.Artifact, fc models.FeatureConfig, all []cluster.Job, log *slog.Logger) error {
	l, err := models.LookupLearner(art.Selected)
	if err != nil {
		return err
	}
	d := rowsFor(fc, all, all)
	opt := models.Options{Features: art.FeatureNames, Seed: cfg.Seed, Logger: log}
	if cfg.Progress != nil {
		opt.Progress = func(done, total int) { cfg.Progress(l.Name+" (refit)", done, total) }
	}
	m := l.New(opt)
	start := time.Now()
	if err := m.Fit(ctx, d.X, d.y); err != nil {
		return fmt.Errorf("train: refit %s: %w", l.Name, err)
	}
	if art.Models[l.Name], err = m.MarshalBinary(); err != nil {
		return fmt.Errorf("train: refit %s: %w", l.Name, err)
	}
	art.Metrics[l.Name]["refit_s"] = time.Since(start).Seconds()
	art.Rows = len(d.y)
	log.Info("selected model fitted again on every job", "model", l.Name, "rows", len(d.y), "refit_s", round3(time.Since(start).Seconds()))
	return nil
}

// learnersOf are the learners cfg asks for, by name, but the ensemble
// after its members (fitAndScore makes it of them).
func learnersOf(cfg Config) []models.Learner {
	var out []models.Learner
	for _, l := range models.Learners() {
		if len(cfg.Learners) == 0 || slices.Contains(cfg.Learners, l.Name) {
			out = append(out, l)
		}
	}
	slices.SortStableFunc(out, func(a, b models.Learner) int {
		return cmp.Compare(b2i(a.Name == models.EnsembleName), b2i(b.Name == models.EnsembleName))
	})
	return out
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// GateMetric is the metric that selects and gates models of target t
// (lower is better): mae_log for duration, the pinball loss at P90 for
// memory.
func GateMetric(t models.Target) string {
	if t == idle.Target {
		return "mae_3600s" // shown, not gated on: see TrainIdle
	}
	if t == models.TargetMemory {
		return "pinball_p90_log"
	}
	return "mae_log"
}

// gateScoreKey is the metrics key of a learner's gate metric averaged
// over the gate windows (set only with more than one), which selectBest
// reads where it is set.
const gateScoreKey = "gate_score"

// earlierWindows scores every learner on the GateWindows-1 windows of size
// jobs before the holdout (fitJobs' last ones), each fitted on the jobs
// before its window, and sets each learner's gate score: its gate metric
// averaged over those windows and the holdout.
func earlierWindows(ctx context.Context, cfg Config, fc models.FeatureConfig, fitJobs []cluster.Job, size int, art *models.Artifact, log *slog.Logger) error {
	windows := cmp.Or(cfg.GateWindows, DefaultGateWindows)
	key := GateMetric(cfg.Target)
	sums := map[string]float64{}
	for name, row := range art.Metrics {
		sums[name] = row[key]
	}
	scored := 1
	for w := 1; w < windows; w++ {
		end := len(fitJobs) - (w-1)*size
		start := end - size
		if start < 2*minRows {
			log.Warn("too few jobs for another gate window; selecting on fewer", "windows", scored)
			break
		}
		before, win := fitJobs[:start], fitJobs[start:end]
		fit := rowsFor(fc, before, before)
		hold := scoredRows(fc, fitJobs[:end], win)
		if len(fit.y) < minRows || len(hold.y) < minRows {
			break
		}
		done := fitted{}
		for _, l := range learnersOf(cfg) {
			_, met, _, err := fitAndScore(ctx, cfg, l, art.FeatureNames, fit, hold, fmt.Sprintf("%s (gate window %d)", l.Name, w+1), done, log)
			if err != nil {
				return fmt.Errorf("train: gate window %d: %w", w+1, err)
			}
			v := met.Map(cfg.Target)[key]
			sums[l.Name] += v
			art.Metrics[l.Name][fmt.Sprintf("%s_window_%d", key, w+1)] = v
		}
		scored++
	}
	if scored == 1 {
		return nil // the holdout alone: the gate metric itself selects
	}
	for name, row := range art.Metrics {
		row[gateScoreKey] = sums[name] / float64(scored)
	}
	return nil
}

// fitted are the models fitted on one set of rows, by learner, with the
// seconds each fit took.
type fitted map[string]fittedModel

type fittedModel struct {
	m    models.Model
	fitS float64
}

// fitAndScore fits a new model of learner l on fit, in fitS seconds, and
// scores it on hold; label names it to cfg.Progress. An ensemble whose
// members done has fitted on the same rows is made of them (in the
// seconds they took) rather than fitted again; done gains the new model.
func fitAndScore(ctx context.Context, cfg Config, l models.Learner, features []string, fit, hold dataset, label string,
	done fitted, log *slog.Logger) (m models.Model, met Metrics, fitS float64, err error) {
	opt := models.Options{Features: features, Seed: cfg.Seed, Logger: log}
	if cfg.Progress != nil {
		opt.Progress = func(done, total int) { cfg.Progress(label, done, total) }
	}
	if m, fitS = ensembleOfFitted(opt, l, done); m == nil {
		m = l.New(opt)
		start := time.Now()
		if err := m.Fit(ctx, fit.X, fit.y); err != nil {
			return nil, Metrics{}, 0, fmt.Errorf("%s: %w", l.Name, err)
		}
		fitS = time.Since(start).Seconds()
	}
	if met, err = scoreModel(m, hold); err != nil {
		return nil, Metrics{}, 0, fmt.Errorf("%s: %w", l.Name, err)
	}
	done[l.Name] = fittedModel{m, fitS}
	return m, met, fitS, nil
}

// ensembleOfFitted is the ensemble of the members in done, and the
// seconds they took; nil unless l is the ensemble and every member is
// there.
func ensembleOfFitted(opt models.Options, l models.Learner, done fitted) (models.Model, float64) {
	if l.Name != models.EnsembleName {
		return nil, 0
	}
	var members []models.Model
	secs := 0.0
	for _, name := range models.EnsembleMembers() {
		f, ok := done[name]
		if !ok {
			return nil, 0
		}
		members = append(members, f.m)
		secs += f.fitS
	}
	m, err := models.EnsembleOf(opt, members)
	if err != nil {
		return nil, 0
	}
	return m, secs
}

// selectBest is the learner with the lowest gate metric, leaving out
// those only compared (models.Learner.Compared) unless nothing else was
// fitted. Learners within selectionTolerance of the lowest are tied, and
// the first of them in servePreference serves.
func selectBest(t models.Target, metrics map[string]map[string]float64) string {
	key := GateMetric(t)
	for _, compared := range []bool{false, true} {
		var names []string
		for _, name := range slices.Sorted(maps.Keys(metrics)) {
			if l, err := models.LookupLearner(name); err != nil || l.Compared == compared {
				names = append(names, name)
			}
		}
		if len(names) == 0 {
			continue
		}
		best := names[0]
		for _, name := range names {
			if score(metrics[name], key) < score(metrics[best], key) {
				best = name
			}
		}
		limit := score(metrics[best], key) * (1 + selectionTolerance)
		for _, name := range servePreference {
			if slices.Contains(names, name) && score(metrics[name], key) <= limit {
				return name
			}
		}
		return best
	}
	return ""
}

// selectionTolerance is how far above the lowest gate score a learner
// still counts as tied with it. Learners that close trade places from one
// seed to the next (golearn's forest alone moved a window's mae_log by
// 0.03 between two trainings on the same data), so the choice among them
// would follow the seed rather than the data.
const selectionTolerance = 0.01

// servePreference orders tied learners: the ensemble first, as its median
// of three learners depends least on any one seed. (The learners only
// compared come in where nothing else was fitted.)
var servePreference = []string{models.EnsembleName, models.KNNName, models.ForestName, models.MLPName}

// score is a learner's gate score, or its gate metric key where it has
// none.
func score(row map[string]float64, key string) float64 {
	if v, ok := row[gateScoreKey]; ok {
		return v
	}
	return row[key]
}

// scoreModel scores m on d: as served (models.Stream.Blend) where d
// replays serving, with the model's own forecasts' mae_log beside as
// mae_log_unblended where serving moves them.
func scoreModel(m models.Model, d dataset) (Metrics, error) {
	qs := []float64{0.5, 0.9}
	q, err := m.PredictQuantiles(d.X, qs)
	if err != nil {
		return Metrics{}, err
	}
	met := scoreQuantiles(d.y, q)
	if d.stream == nil || !models.Blended(m) {
		return met, nil
	}
	served := make([][]float64, len(q))
	for i := range q {
		served[i] = slices.Clone(q[i])
	}
	if err := d.stream.Blend(m, qs, served); err != nil {
		return Metrics{}, err
	}
	out := scoreQuantiles(d.y, served)
	out.UnblendedMAELog = met.MAELog
	return out, nil
}

func scoreQuantiles(y []float64, q [][]float64) Metrics {
	p50, p90 := make([]float64, len(q)), make([]float64, len(q))
	for i := range q {
		p50[i], p90[i] = q[i][0], q[i][1]
	}
	return Score(y, p50, p90)
}

func newReport(t models.Target, d dataset) Report {
	r := Report{Target: t, Models: map[string]map[string]float64{}, Baselines: map[string]map[string]float64{}, EvaluatedRows: len(d.y)}
	if n := len(d.queries); n > 0 {
		r.EvaluatedFrom, r.EvaluatedUntil = d.queries[0].SubmitTime, d.queries[n-1].SubmitTime
	}
	return r
}

func (r *Report) add(l models.Learner, row map[string]float64) {
	if l.Baseline {
		r.Baselines[l.Name] = row
	} else {
		r.Models[l.Name] = row
	}
}

// observeInEndOrder adds the labelled jobs to h in the order they ended.
func observeInEndOrder(h *models.History, jobs []cluster.Job) {
	idx := make([]int, len(jobs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return models.EndTime(&jobs[a]).Compare(models.EndTime(&jobs[b])) })
	for _, i := range idx {
		h.Observe(&jobs[i])
	}
}

// featureStats returns each column's median and interquartile range (1
// where the range is 0).
func featureStats(X [][]float64) (center, scale []float64) {
	p := len(X[0])
	center, scale = make([]float64, p), make([]float64, p)
	col := make([]float64, len(X))
	for j := range p {
		for i, r := range X {
			col[i] = r[j]
		}
		slices.Sort(col)
		center[j] = models.QuantileSorted(col, 0.5)
		scale[j] = models.QuantileSorted(col, 0.75) - models.QuantileSorted(col, 0.25)
		if scale[j] <= 0 {
			scale[j] = 1
		}
	}
	return center, scale
}

// importanceRows bounds the rows permutation importance scores on.
const importanceRows = 2000

// permutationImportance is how much the P50's mean absolute log error
// grows when each feature's column is shuffled, normalised to sum to 1.
func permutationImportance(m models.Model, d dataset, seed int64) []float64 {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x1a9))
	n := min(len(d.X), importanceRows)
	rows := make([][]float64, n)
	y := make([]float64, n)
	for i, k := range rng.Perm(len(d.X))[:n] {
		rows[i], y[i] = slices.Clone(d.X[k]), d.y[k]
	}
	p := len(rows[0])
	imp := make([]float64, p)
	baseErr, err := maeLog(m, rows, y)
	if err != nil {
		return imp
	}
	col := make([]float64, n)
	for j := range p {
		for i := range rows {
			col[i] = rows[i][j]
		}
		perm := rng.Perm(n)
		for i := range rows {
			rows[i][j] = col[perm[i]]
		}
		if e, err := maeLog(m, rows, y); err == nil {
			imp[j] = math.Max(0, e-baseErr)
		}
		for i := range rows {
			rows[i][j] = col[i]
		}
	}
	total := 0.0
	for _, v := range imp {
		total += v
	}
	if total > 0 {
		for j := range imp {
			imp[j] /= total
		}
	}
	return imp
}

func maeLog(m models.Model, X [][]float64, y []float64) (float64, error) {
	q, err := m.PredictQuantiles(X, []float64{0.5})
	if err != nil {
		return 0, err
	}
	s := 0.0
	for i := range q {
		s += math.Abs(q[i][0] - y[i])
	}
	return s / float64(len(q)), nil
}

func logger(l *slog.Logger) *slog.Logger {
	if l == nil {
		l = slog.New(slog.DiscardHandler)
	}
	return l.With("component", "training")
}

func now(c Config) time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }
