package training

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"slices"
	"time"

	"github.com/prescient-sched/prescient/datasets"
	"github.com/prescient-sched/prescient/models"
	"github.com/prescient-sched/prescient/models/idle"
)

// IdleConfig says how to train and evaluate idle forecasts.
type IdleConfig struct {
	Model idle.Config
	// TestShare of the series is held out from training and scored; with
	// a single series, the last TestShare of its time is held out instead.
	// 0 trains on everything and scores nothing (for a model to be scored
	// on other series later).
	TestShare float64
	// Horizon is how far ahead the report scores (in the model's forecast
	// steps); MinWindow is the window length of the precision and recall.
	Horizon, MinWindow time.Duration
	// ClaimLevel is the quantile of the forecast count that a window claim
	// trusts ("at least this many GPUs idle throughout"); ClaimProbability
	// the chance of staying idle a device needs to be claimed idle.
	ClaimLevel, ClaimProbability float64
	// SeriesFormat is recorded in the artifact.
	SeriesFormat string
	Logger       *slog.Logger
	Progress     func(label string, done, total int)
}

// DefaultIdleConfig holds out a quarter of the series, scores 60 minutes
// ahead and windows of 15 minutes.
func DefaultIdleConfig() IdleConfig {
	return IdleConfig{Model: idle.DefaultConfig(), TestShare: 0.25, Horizon: time.Hour, MinWindow: 15 * time.Minute,
		ClaimLevel: 0.25, ClaimProbability: 0.5}
}

// ErrNoSeriesData is returned when the series leave nothing to fit or to
// score.
var ErrNoSeriesData = errors.New("not enough series data")

// IdleReport is the evaluation of idle forecasts on series (or times) the
// model did not see. MAE is in idle units (GPUs, nodes, containers) per
// pool.
type IdleReport struct {
	Target         string        `json:"target"`
	ModelVersion   int           `json:"model_version,omitempty"`
	Series         int           `json:"series"`
	ScoredSeries   []string      `json:"scored_series"`
	Pools          int           `json:"pools"`
	TrainingRows   int           `json:"training_rows,omitempty"`
	FitS           float64       `json:"fit_s,omitempty"`
	EvaluatedFrom  time.Time     `json:"evaluated_from"`
	EvaluatedUntil time.Time     `json:"evaluated_until"`
	Origins        int           `json:"origins"`
	Horizons       []IdleHorizon `json:"horizons"`
	Windows        IdleWindows   `json:"windows"`
	Published      *bool         `json:"published,omitempty"`
	// Gate, after TrainIdle, says how the new model compared with the
	// serving version on the same held-out series.
	Gate string `json:"gate,omitempty"`
}

// IdleHorizon is the error at one lead time.
type IdleHorizon struct {
	HorizonS       float64  `json:"horizon_s"`
	MAE            float64  `json:"mae"`
	MAEPersistence float64  `json:"mae_persistence"`
	MAESeasonal    *float64 `json:"mae_seasonal,omitempty"`
	// MAEMovingAverage replaces MAESeasonal on series shorter than two
	// days: the mean of the last hour.
	MAEMovingAverage *float64 `json:"mae_moving_average,omitempty"`
	N                int      `json:"n"`
}

// IdleWindows scores the claims "at least this many units will be idle for
// the whole window" (Precision, Recall: idle units claimed that were idle
// throughout over those claimed, and over those idle throughout) and, on
// per-device series, "this device will be idle for the whole window"
// (UnitPrecision, UnitRecall); the _persistence figures claim what is idle
// now.
type IdleWindows struct {
	MinLengthS             float64  `json:"min_length_s"`
	Precision              float64  `json:"precision"`
	Recall                 float64  `json:"recall"`
	PrecisionPersistence   float64  `json:"precision_persistence"`
	RecallPersistence      float64  `json:"recall_persistence"`
	UnitPrecision          *float64 `json:"unit_precision,omitempty"`
	UnitRecall             *float64 `json:"unit_recall,omitempty"`
	UnitPrecisionPersisted *float64 `json:"unit_precision_persistence,omitempty"`
	UnitRecallPersisted    *float64 `json:"unit_recall_persistence,omitempty"`
}

// idleData is what a set of series gives the model: pools, and the device
// grids when the series are per-device utilization.
type idleData struct {
	pools   []*idle.Pool
	devices []idle.Grid
	// until is when each pool's seen part ends (zero: none seen).
}

// isCounts says whether the series count idle units of pools (they carry
// a capacity) rather than measure one device each; mixing is an error.
func isCounts(series []datasets.Series) (bool, error) {
	counts := 0
	for _, s := range series {
		if s.Capacity != nil {
			counts++
		}
	}
	if counts != 0 && counts != len(series) {
		return false, fmt.Errorf("idle: %d of %d series are pool counts, the others device utilization: use one kind", counts, len(series))
	}
	return counts > 0, nil
}

// idlePools turns series into pools: count series one pool each,
// utilization series grouped into pools of cfg.PoolSize devices, in
// groupings different groupings.
func idlePools(cfg idle.Config, series []datasets.Series, groupings int) (idleData, error) {
	counts, err := isCounts(series)
	if err != nil {
		return idleData{}, err
	}
	var d idleData
	if counts {
		for _, s := range series {
			p, err := idle.NewPool(s.ID, s.Times, s.Values, s.Capacity, s.Demand, cfg.Step)
			if err != nil {
				return idleData{}, fmt.Errorf("idle: %w", err)
			}
			d.pools = append(d.pools, p)
		}
		return d, nil
	}
	if d.devices, err = DeviceGrids(series, cfg.ThresholdPct, cfg.Step); err != nil {
		return idleData{}, fmt.Errorf("idle: %w", err)
	}
	for g := range groupings {
		d.pools = append(d.pools, idle.PoolsFromGrids(d.devices, cfg.PoolSize, uint64(g))...)
	}
	return d, nil
}

// DeviceGrids puts utilization series, one device each, on one grid of
// step, idle below thresholdPct (idle.DeviceGrids).
func DeviceGrids(series []datasets.Series, thresholdPct float64, step time.Duration) ([]idle.Grid, error) {
	devs := make([]idle.Device, len(series))
	for i, s := range series {
		devs[i] = idle.Device{ID: s.ID, Times: s.Times, Values: s.Values}
	}
	return idle.DeviceGrids(devs, thresholdPct, step)
}

// cutPools keeps each pool's grid points before until (NaN after).
func cutPools(pools []*idle.Pool, until time.Time) {
	for _, p := range pools {
		for i := range p.Len() {
			if !p.Time(i).Before(until) {
				p.Idle[i], p.Capacity[i] = math.NaN(), math.NaN()
			}
		}
	}
}

func cutGrids(grids []idle.Grid, until time.Time) {
	for _, g := range grids {
		for i := range g.Idle {
			if !g.Start.Add(time.Duration(i) * g.Step).Before(until) {
				g.Idle[i] = math.NaN()
			}
		}
	}
}

// TrainIdle fits the idle model on the series not held out, scores it on
// the held-out ones and publishes it to the registry.
func TrainIdle(ctx context.Context, cfg IdleConfig, series []datasets.Series, reg Registry) (IdleReport, error) {
	if len(series) == 0 {
		return IdleReport{}, fmt.Errorf("idle: %w: no series", ErrNoSeriesData)
	}
	if !(cfg.TestShare >= 0 && cfg.TestShare < 1) {
		return IdleReport{}, fmt.Errorf("idle: held-out share %g: want [0, 1)", cfg.TestShare)
	}
	if _, err := isCounts(series); err != nil {
		return IdleReport{}, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// 1. Hold out series, or the end of a single one.
	ids := make([]string, len(series))
	for i, s := range series {
		ids[i] = s.ID
	}
	held := idle.HeldOut(ids, cfg.TestShare)
	var fit, test []datasets.Series
	for _, s := range series {
		if held[s.ID] {
			test = append(test, s)
		} else {
			fit = append(fit, s)
		}
	}
	art := &idle.Artifact{Format: idle.ArtifactFormat, CreatedAt: time.Now().UTC(), SeriesFormat: cfg.SeriesFormat,
		Features: slices.Clone(idle.FeatureNames)}
	from, to := seriesSpan(series)
	art.DataFrom, art.DataUntil = from, to
	evalFrom := from
	if len(test) == 0 && cfg.TestShare > 0 {
		art.TrainedUntil = to.Add(-time.Duration(cfg.TestShare * float64(to.Sub(from)))).Truncate(time.Minute)
		art.DataUntil = art.TrainedUntil
		evalFrom, test = art.TrainedUntil, fit
	}
	for _, s := range fit {
		art.Series = append(art.Series, s.ID)
	}
	// 2. Fit.
	d, err := idlePools(cfg.Model, fit, cfg.Model.Groupings)
	if err != nil {
		return IdleReport{}, err
	}
	if !art.TrainedUntil.IsZero() {
		cutPools(d.pools, art.TrainedUntil)
		cutGrids(d.devices, art.TrainedUntil)
	}
	var progress func(done, total int)
	if cfg.Progress != nil {
		progress = func(done, total int) { cfg.Progress("idle model", done, total) }
	}
	start := time.Now()
	m, err := idle.Fit(ctx, cfg.Model, d.pools, d.devices, progress)
	if err != nil {
		return IdleReport{}, err
	}
	fitS := time.Since(start).Seconds()
	art.Model = m
	log.Info("idle model fitted", "component", "training", "rows", m.Rows, "pools", len(d.pools), "fit_s", fitS)

	// 3. Score on what it did not see, and publish.
	rep := IdleReport{Target: string(idle.Target)}
	if cfg.TestShare > 0 {
		if rep, err = EvaluateIdle(ctx, cfg, art, test, evalFrom); err != nil {
			return IdleReport{}, err
		}
	}
	rep.TrainingRows, rep.FitS, rep.Series = m.Rows, fitS, len(series)
	art.Metrics = rep.metrics()
	published := true
	if cfg.TestShare > 0 {
		gate, ok, err := gateIdle(ctx, cfg, reg, art, rep, test, evalFrom)
		if err != nil {
			return IdleReport{}, err
		}
		rep.Gate, published = gate, ok
	} else {
		rep.Gate = "no held-out series: published without a gate"
	}
	rep.Published = &published
	if !published {
		log.Warn("idle model not published: the serving version scores better", "component", "training", "gate", rep.Gate)
		return rep, nil
	}
	v, err := reg.PublishIdle(art)
	if err != nil {
		return IdleReport{}, err
	}
	rep.ModelVersion = v
	return rep, nil
}

// gateIdle compares the new model with the serving version on the same
// held-out series and origins (those the serving version did not see
// either): the new one is published unless its MAE summed over the scored
// lead times is higher. Without a serving version, or one that does not
// load, counts idleness otherwise (threshold, pool size) or saw every
// held-out series, it is published.
func gateIdle(ctx context.Context, cfg IdleConfig, reg Registry, art *idle.Artifact, rep IdleReport, test []datasets.Series,
	from time.Time) (string, bool, error) {
	cur, err := reg.Current(idle.Target)
	switch {
	case errors.Is(err, ErrNoModel) || cur == 0:
		return "no serving model", true, nil
	case err != nil:
		return "", false, err
	}
	old, err := reg.LoadIdle(cur)
	if err != nil {
		return "serving model does not load: " + err.Error(), true, nil
	}
	oc, nc := old.Model.Config, art.Model.Config
	if oc.ThresholdPct != nc.ThresholdPct || oc.PoolSize != nc.PoolSize || oc.Step != nc.Step || !slices.Equal(old.Features, art.Features) {
		return fmt.Sprintf("serving version %d not comparable: another threshold, pool size, grid or feature list", cur), true, nil
	}
	oldRep, err := EvaluateIdle(ctx, cfg, old, test, from)
	if errors.Is(err, ErrNoSeriesData) {
		return fmt.Sprintf("serving version %d not comparable: it was trained on every held-out series", cur), true, nil
	}
	if err != nil {
		return "serving model does not score: " + err.Error(), true, nil
	}
	newRep := rep
	if !slices.Equal(oldRep.ScoredSeries, rep.ScoredSeries) || !oldRep.EvaluatedFrom.Equal(rep.EvaluatedFrom) {
		// The serving version saw some of them: score both on the rest.
		keep := map[string]bool{}
		for _, id := range oldRep.ScoredSeries {
			keep[id] = true
		}
		var same []datasets.Series
		for _, s := range test {
			if keep[s.ID] {
				same = append(same, s)
			}
		}
		if newRep, err = EvaluateIdle(ctx, cfg, art, same, oldRep.EvaluatedFrom); err != nil {
			return "", false, err
		}
	}
	sum := func(r IdleReport) float64 {
		t := 0.0
		for _, h := range r.Horizons {
			t += h.MAE
		}
		return t
	}
	verdict := fmt.Sprintf("MAE summed over %d lead times %.4f; version %d's %.4f, on %d series", len(newRep.Horizons), sum(newRep), cur,
		sum(oldRep), len(oldRep.ScoredSeries))
	if sum(newRep) > sum(oldRep) {
		return "refused: " + verdict, false, nil
	}
	return "passed: " + verdict, true, nil
}

func seriesSpan(series []datasets.Series) (from, to time.Time) {
	for _, s := range series {
		if len(s.Times) == 0 {
			continue
		}
		if from.IsZero() || s.Times[0].Before(from) {
			from = s.Times[0]
		}
		if l := s.Times[len(s.Times)-1]; l.After(to) {
			to = l
		}
	}
	return from, to
}

// metrics flattens the report's headline figures for the manifest.
func (r IdleReport) metrics() map[string]float64 {
	m := map[string]float64{"precision": r.Windows.Precision, "recall": r.Windows.Recall}
	for _, h := range r.Horizons {
		if h.HorizonS == 1800 || h.HorizonS == 3600 {
			m[fmt.Sprintf("mae_%.0fs", h.HorizonS)] = h.MAE
			m[fmt.Sprintf("mae_persistence_%.0fs", h.HorizonS)] = h.MAEPersistence
		}
	}
	return m
}

// EvaluateIdle scores art's model on the series it was not trained on
// (and, for those it was trained on until TrainedUntil, on their later
// part), at origins from from on, every forecast step.
func EvaluateIdle(ctx context.Context, cfg IdleConfig, art *idle.Artifact, series []datasets.Series, from time.Time) (IdleReport, error) {
	m := art.Model
	mc := m.Config
	if cfg.Horizon < mc.ForecastStep || cfg.Horizon > mc.Horizon {
		return IdleReport{}, fmt.Errorf("idle: horizon %s: want between the model's step %s and its horizon %s", cfg.Horizon, mc.ForecastStep, mc.Horizon)
	}
	if cfg.MinWindow < mc.ForecastStep || cfg.MinWindow > mc.Horizon {
		return IdleReport{}, fmt.Errorf("idle: window length %s: want between %s and %s", cfg.MinWindow, mc.ForecastStep, mc.Horizon)
	}
	// 1. The series to score: unseen ones, and seen ones after training.
	seen := map[string]bool{}
	for _, id := range art.Series {
		seen[id] = true
	}
	var scored []datasets.Series
	for _, s := range series {
		if !seen[s.ID] || !art.TrainedUntil.IsZero() {
			scored = append(scored, s)
		}
	}
	if len(scored) == 0 {
		return IdleReport{}, fmt.Errorf("idle: %w: every series was used in training (score series it did not see, or train with --holdout)", ErrNoSeriesData)
	}
	if !art.TrainedUntil.IsZero() && from.Before(art.TrainedUntil) {
		for _, s := range scored {
			if seen[s.ID] {
				from = art.TrainedUntil
				break
			}
		}
	}
	d, err := idlePools(mc, scored, 1)
	if err != nil {
		return IdleReport{}, err
	}
	rep := IdleReport{Target: string(idle.Target), ModelVersion: art.Version, Series: len(series), Pools: len(d.pools)}
	for _, s := range scored {
		rep.ScoredSeries = append(rep.ScoredSeries, s.ID)
	}
	// 2. Origins and leads.
	every := int(mc.ForecastStep / mc.Step)
	nLeads := int(cfg.Horizon / mc.ForecastStep)
	winLeads := int(cfg.MinWindow / mc.ForecastStep)
	leads := make([]int, max(nLeads, winLeads))
	for l := range leads {
		leads[l] = (l + 1) * every
	}
	day := int(24 * time.Hour / mc.Step)
	hour := int(time.Hour / mc.Step)
	seasonal := true
	for _, p := range d.pools {
		if time.Duration(p.Len())*mc.Step < 48*time.Hour {
			seasonal = false
		}
	}
	earliest := hour * 4 // the features' look back
	if seasonal {
		earliest = day
	}
	type errs struct{ model, pers, base float64 }
	sums := make([]errs, nLeads)
	counts := make([]int, nLeads)
	win := idleClaims{}
	for _, p := range d.pools {
		if err := ctx.Err(); err != nil {
			return IdleReport{}, err
		}
		first, _ := p.Index(from)
		if p.Start.After(from) {
			first = 0
		}
		first = max(first, earliest)
		var queries []idle.Query
		for i := first; i < p.Len(); i += every {
			queries = append(queries, idle.Query{Pool: p, I: i, Leads: leads})
		}
		pred, err := m.Predict(queries, []float64{0.5, cfg.ClaimLevel})
		if err != nil {
			return IdleReport{}, err
		}
		for qi, q := range queries {
			if pred[qi] == nil {
				continue
			}
			i, cap0 := q.I, p.Capacity[q.I]
			now := p.Idle[i]
			ma := windowMean(p, i, hour)
			usable := true
			for l := range nLeads {
				j := i + leads[l]
				if j >= p.Len() || math.IsNaN(p.Idle[j]) || (seasonal && math.IsNaN(share(p, j-day))) {
					usable = false
				}
			}
			if !usable {
				continue
			}
			rep.Origins++
			if t := p.Time(i); rep.EvaluatedFrom.IsZero() || t.Before(rep.EvaluatedFrom) {
				rep.EvaluatedFrom = t
			}
			if t := p.Time(i + leads[nLeads-1]); t.After(rep.EvaluatedUntil) {
				rep.EvaluatedUntil = t
			}
			for l := range nLeads {
				truth := p.Idle[i+leads[l]]
				base := ma * cap0
				if seasonal {
					base = share(p, i+leads[l]-day) * cap0
				}
				sums[l].model += math.Abs(pred[qi][l][0] - truth)
				sums[l].pers += math.Abs(now - truth)
				sums[l].base += math.Abs(base - truth)
				counts[l]++
			}
			// Windows: at least N idle through (now, now + MinWindow].
			claim := math.Inf(1)
			for l := range winLeads {
				claim = math.Min(claim, math.Floor(pred[qi][l][1]+1e-9))
			}
			through := math.Inf(1)
			for j := i + 1; j <= i+winLeads*every && j < p.Len(); j++ {
				through = math.Min(through, p.Idle[j])
			}
			if !math.IsInf(through, 0) && !math.IsNaN(through) {
				win.add(claim, now, through)
			}
		}
	}
	if rep.Origins == 0 {
		return IdleReport{}, fmt.Errorf("idle: %w: no origin from %s on with %s of future and the history the baselines need",
			ErrNoSeriesData, from.Format(time.RFC3339), cfg.Horizon)
	}
	for l := range nLeads {
		n := float64(counts[l])
		h := IdleHorizon{HorizonS: (time.Duration(leads[l]) * mc.Step).Seconds(), MAE: sums[l].model / n, MAEPersistence: sums[l].pers / n, N: counts[l]}
		b := sums[l].base / n
		if seasonal {
			h.MAESeasonal = &b
		} else {
			h.MAEMovingAverage = &b
		}
		rep.Horizons = append(rep.Horizons, h)
	}
	rep.Windows = win.result(cfg.MinWindow)
	if len(d.devices) > 0 && m.Survival != nil {
		unitWindows(&rep.Windows, cfg, m, d.devices, from)
	}
	return rep, nil
}

func share(p *idle.Pool, i int) float64 {
	if i < 0 || i >= p.Len() || !(p.Capacity[i] > 0) {
		return math.NaN()
	}
	return p.Idle[i] / p.Capacity[i]
}

// windowMean is the mean idle share over the n grid points up to i.
func windowMean(p *idle.Pool, i, n int) float64 {
	s, k := 0.0, 0
	for j := max(i-n+1, 0); j <= i; j++ {
		if v := share(p, j); !math.IsNaN(v) {
			s += v
			k++
		}
	}
	if k == 0 {
		return share(p, i)
	}
	return s / float64(k)
}

// idleClaims sums the count claims of the model and of persistence.
type idleClaims struct {
	hit, claimed, actual, hitP, claimedP float64
}

func (w *idleClaims) add(claim, now, through float64) {
	w.hit += math.Min(claim, through)
	w.claimed += claim
	w.actual += through
	w.hitP += math.Min(now, through)
	w.claimedP += now
}

func (w *idleClaims) result(minWindow time.Duration) IdleWindows {
	return IdleWindows{MinLengthS: minWindow.Seconds(), Precision: ratio(w.hit, w.claimed), Recall: ratio(w.hit, w.actual),
		PrecisionPersistence: ratio(w.hitP, w.claimedP), RecallPersistence: ratio(w.hitP, w.actual)}
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// unitWindows scores the per-device claims: a device idle for a run r is
// claimed idle through the next MinWindow when the survival table gives it
// at least ClaimProbability.
func unitWindows(w *IdleWindows, cfg IdleConfig, m *idle.Model, grids []idle.Grid, from time.Time) {
	every := int(m.Config.ForecastStep / m.Config.Step)
	L := int(cfg.MinWindow / m.Config.Step)
	var hit, claimed, actual, hitP, claimedP float64
	for _, g := range grids {
		run := 0
		for i, v := range g.Idle {
			switch {
			case math.IsNaN(v):
				run = 0
			case v > 0:
				run++
			default:
				run = 0
			}
			t := g.Start.Add(time.Duration(i) * g.Step)
			if t.Before(from) || i%every != 0 || i+L >= len(g.Idle) || math.IsNaN(v) {
				continue
			}
			idleThrough, known := true, true
			for j := i + 1; j <= i+L; j++ {
				if math.IsNaN(g.Idle[j]) {
					known = false
				} else if g.Idle[j] == 0 {
					idleThrough = false
				}
			}
			if !known {
				continue
			}
			c := m.Survival.IdleThrough(time.Duration(run)*g.Step, cfg.MinWindow) >= cfg.ClaimProbability
			cp := run > 0
			actual += b2f(idleThrough)
			claimed += b2f(c)
			hit += b2f(c && idleThrough)
			claimedP += b2f(cp)
			hitP += b2f(cp && idleThrough)
		}
	}
	p, r, pp, rp := ratio(hit, claimed), ratio(hit, actual), ratio(hitP, claimedP), ratio(hitP, actual)
	w.UnitPrecision, w.UnitRecall, w.UnitPrecisionPersisted, w.UnitRecallPersisted = &p, &r, &pp, &rp
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// PublishIdle stores an idle artifact as the next version of the idle
// target, makes it current and prunes old versions, like Publish.
func (r Registry) PublishIdle(a *idle.Artifact) (int, error) {
	vs, err := r.Versions(idle.Target)
	if err != nil {
		return 0, err
	}
	if err := os.MkdirAll(r.dir(idle.Target), 0o755); err != nil {
		return 0, fmt.Errorf("registry: %w", err)
	}
	a.Version = 1
	if len(vs) > 0 {
		a.Version = vs[len(vs)-1] + 1
	}
	var buf bytes.Buffer
	if err := idle.Encode(&buf, a); err != nil {
		return 0, err
	}
	if err := writeFileAtomic(r.ArtifactPath(idle.Target, a.Version), buf.Bytes()); err != nil {
		return 0, err
	}
	man := Manifest{Target: idle.Target, Version: a.Version, Format: a.Format, CreatedAt: a.CreatedAt, DataFrom: a.DataFrom,
		DataUntil: a.DataUntil, HoldoutFrom: a.TrainedUntil, Rows: a.Model.Rows, Selected: "gorgonia_mlp", Features: a.Features,
		Metrics: map[string]map[string]float64{"gorgonia_mlp": a.Metrics}}
	js, err := json.MarshalIndent(man, "", "  ")
	if err != nil {
		return 0, fmt.Errorf("registry: manifest: %w", err)
	}
	if err := writeFileAtomic(r.manifestPath(idle.Target, a.Version), append(js, '\n')); err != nil {
		return 0, err
	}
	if err := r.setCurrent(idle.Target, a.Version); err != nil {
		return 0, err
	}
	return a.Version, r.prune(idle.Target, a.Version)
}

// LoadIdle decodes version v of the idle target.
func (r Registry) LoadIdle(v int) (*idle.Artifact, error) {
	path := r.ArtifactPath(idle.Target, v)
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	defer f.Close()
	a, err := idle.Decode(f, path)
	if err != nil {
		return nil, err
	}
	if a.Version != v {
		return nil, fmt.Errorf("%s: holds version %d: %w", path, a.Version, models.ErrCorruptArtifact)
	}
	return a, nil
}

// LoadCurrentIdle decodes the serving version of the idle target.
func (r Registry) LoadCurrentIdle() (*idle.Artifact, error) {
	v, err := r.Current(idle.Target)
	if err != nil {
		return nil, err
	}
	return r.LoadIdle(v)
}
