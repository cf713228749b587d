package predictor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/models"
	"github.com/prescient-sched/prescient/training"
)

// Forecast is what the predictor says about one job. A target without a
// published model leaves its fields nil.
type Forecast struct {
	JobID          cluster.JobID `json:"job_id"`
	DurationP50S   *float64      `json:"duration_p50_s"`
	DurationP90S   *float64      `json:"duration_p90_s"`
	MemoryP50Bytes *float64      `json:"memory_p50_bytes"`
	MemoryP90Bytes *float64      `json:"memory_p90_bytes"`
	// ModelVersion names the versions that answered, e.g. "duration:3,memory:1".
	ModelVersion string `json:"model_version"`
	// TopFeatures are the features that drove the answer most.
	TopFeatures []Driver `json:"top_features"`
}

// Driver is one feature behind a forecast: its value for the job and its
// weight, the model's importance of the feature times how far the job's
// value lies from the typical one (in interquartile ranges, at least 1).
type Driver struct {
	Target  models.Target `json:"target"`
	Feature string        `json:"feature"`
	Value   float64       `json:"value"`
	Weight  float64       `json:"weight"`
}

// TopDrivers is how many drivers each target contributes to a forecast.
const TopDrivers = 3

// served is one loaded artifact with its decoded model, and the Blend
// that serves a learned model's forecasts (nil for a baseline).
type served struct {
	art   *models.Artifact
	model models.Model
	mu    sync.Mutex // guards art.History and blend against Observe during Forecast
	blend *models.Blend
}

// Predictor serves the registry's current models and reloads them when a
// new version is published. It never writes models.
type Predictor struct {
	reg     training.Registry
	targets []models.Target
	log     *slog.Logger
	current map[models.Target]*atomic.Pointer[served]
	peak    atomic.Pointer[servedPeak] // the online refinement (RefinePeak)

	// rmu serializes Reload; refused holds, by target, the current version
	// last refused, which is not tried again while CURRENT names it.
	rmu     sync.Mutex
	refused map[models.Target]int
}

// New loads the current version of each target (duration, memory and the
// peak refinement) from the registry. A target with no published model is
// served without forecasts; a current version that fails to load is
// logged and the target served by another version that loads (see
// Reload). A registry with nothing to serve is an error.
func New(reg training.Registry, log *slog.Logger) (*Predictor, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Predictor{reg: reg, targets: []models.Target{models.TargetDuration, models.TargetMemory},
		log: log.With("component", "predictor"), current: map[models.Target]*atomic.Pointer[served]{},
		refused: map[models.Target]int{}}
	for _, t := range p.targets {
		p.current[t] = &atomic.Pointer[served]{}
	}
	_, err := p.Reload()
	if p.Versions() == "" && p.PeakVersion() == 0 {
		if err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("predictor: registry %s: %w", reg.Dir, training.ErrNoModel)
	}
	return p, nil
}

// Reload loads any target whose current version changed. A version that
// fails to load (corrupt, incompatible) is refused with an error naming
// its file, and the target is served by its newest older version that
// loads (a newer one only when nothing serves yet; Fallback says which),
// or by the one serving when none does; a refused
// version is not tried again while CURRENT names it. Reload reports
// whether anything changed; it is cheap when nothing did (a read of each
// CURRENT).
func (p *Predictor) Reload() (bool, error) {
	p.rmu.Lock()
	defer p.rmu.Unlock()
	changed := false
	var errs []error
	for _, t := range p.targets {
		v, err := p.reg.Current(t)
		if errors.Is(err, training.ErrNoModel) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if s := p.current[t].Load(); s != nil && s.art.Version == v {
			delete(p.refused, t)
			continue
		}
		if p.refused[t] == v {
			continue
		}
		s, err := p.load(t, v)
		if err == nil {
			delete(p.refused, t)
			p.current[t].Store(s)
			p.log.Info("model loaded", "target", t, "version", v, "model", s.art.Selected)
			changed = true
			continue
		}
		p.refused[t] = v
		err = fmt.Errorf("predictor: %s version %d (%s) refused: %w", t, v, p.reg.ArtifactPath(t, v), err)
		errs = append(errs, err)
		if s, ok := p.fallback(t, v); ok {
			p.current[t].Store(s)
			changed = true
			p.log.Error("refused the current model version; serving the newest version that loads", "target", t,
				"version", v, "file", p.reg.ArtifactPath(t, v), "serving", s.art.Version, "err", err)
			continue
		}
		p.log.Error("refused the current model version; no newer valid version, the one serving stays", "target", t,
			"version", v, "file", p.reg.ArtifactPath(t, v), "serving", p.servingVersion(t), "err", err)
	}
	peakChanged, err := p.reloadPeak()
	if err != nil {
		errs = append(errs, err)
	}
	return changed || peakChanged, errors.Join(errs...)
}

// load decodes version v of t.
func (p *Predictor) load(t models.Target, v int) (*served, error) {
	art, err := p.reg.Load(t, v)
	if err != nil {
		return nil, err
	}
	m, err := art.Model(art.Selected)
	if err != nil {
		return nil, err
	}
	s := &served{art: art, model: m}
	if models.Blended(m) {
		if s.blend, err = models.NewBlend(art.FeatureNames); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// fallback loads the newest version of t below refused that loads: a
// rollback to a corrupt version must not bring back the newer one it left.
// Only when nothing serves (at start) may a newer version serve. ok is
// false when the version found is the one serving, or there is none.
func (p *Predictor) fallback(t models.Target, refused int) (*served, bool) {
	vs, err := p.reg.Versions(t)
	if err != nil {
		p.log.Warn("registry unreadable", "target", t, "err", err)
		return nil, false
	}
	serving := p.servingVersion(t)
	older := func(v int) bool { return v < refused }
	newer := func(v int) bool { return v > refused && serving == 0 }
	for _, may := range []func(int) bool{older, newer} {
		for i := len(vs) - 1; i >= 0; i-- {
			switch v := vs[i]; {
			case !may(v):
			case v == serving:
				return nil, false
			default:
				s, err := p.load(t, v)
				if err == nil {
					return s, true
				}
				p.log.Warn("model version does not load either", "target", t, "version", v, "file", p.reg.ArtifactPath(t, v), "err", err)
			}
		}
	}
	return nil, false
}

func (p *Predictor) servingVersion(t models.Target) int {
	if s := p.current[t].Load(); s != nil {
		return s.art.Version
	}
	return 0
}

// Serving is the version of t that serves forecasts (0: none), which is
// not CURRENT's when that one did not load (Fallback).
func (p *Predictor) Serving(t models.Target) int {
	if t == models.TargetPeak {
		return p.PeakVersion()
	}
	if _, ok := p.current[t]; !ok {
		return 0
	}
	return p.servingVersion(t)
}

// Fallback reports, for a target whose current version was refused, that
// version and the one serving instead (0 when none); ok is false when the
// target serves its current version or has none.
func (p *Predictor) Fallback(t models.Target) (refused, serving int, ok bool) {
	p.rmu.Lock()
	defer p.rmu.Unlock()
	v, ok := p.refused[t]
	if !ok {
		return 0, 0, false
	}
	return v, p.servingVersion(t), true
}

// Watch reloads every interval until ctx ends. It does nothing when the
// interval is not positive.
func (p *Predictor) Watch(ctx context.Context, every time.Duration) {
	if every <= 0 {
		return
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			_, _ = p.Reload() // Reload logs refusals
		}
	}
}

// Versions names the versions serving, e.g. "duration:3,memory:1".
func (p *Predictor) Versions() string {
	var parts []string
	for _, t := range p.targets {
		if s := p.current[t].Load(); s != nil {
			parts = append(parts, string(t)+":"+strconv.Itoa(s.art.Version))
		}
	}
	return strings.Join(parts, ",")
}

// Observe tells the serving models about a finished job, so that
// forecasts use the newest outcomes before the next retraining: its
// outcome joins the history, and the Blend of a learned model hears how
// the model and the rolling median would have done on it.
func (p *Predictor) Observe(j cluster.Job) {
	for _, t := range p.targets {
		if s := p.current[t].Load(); s != nil {
			s.observe(&j)
		}
	}
}

func (s *served) observe(j *cluster.Job) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.art.Target.Label(j); ok && s.blend != nil {
		x := s.art.History.Features(nil, j)
		if q, err := s.model.PredictQuantiles([][]float64{x}, []float64{0.5}); err == nil {
			s.blend.Learn(j.Spec.Tenant, x, q[0][0], models.Log(v))
		}
	}
	s.art.History.Observe(j)
}

var quantiles = []float64{0.5, 0.9}

// forecastChunk is how many jobs Forecast computes features for at once:
// one feature buffer serves every chunk.
const forecastChunk = 1024

// Forecast answers P50 and P90 duration and peak memory for each job, with
// the model versions and the features that drove each answer most.
func (p *Predictor) Forecast(ctx context.Context, jobs []cluster.Job) ([]Forecast, error) {
	out := make([]Forecast, len(jobs))
	version := p.Versions()
	for i := range jobs {
		out[i].JobID, out[i].ModelVersion = jobs[i].ID, version
	}
	vals := make([]float64, 4*len(jobs)) // P50, P90 of duration and memory
	// Each job's drivers go in its own slots of one array.
	const slots = 2 * TopDrivers
	drivers := make([]Driver, slots*len(jobs))
	nDrivers := make([]int, len(jobs))
	var X [][]float64
	var backing []float64
	for k, t := range p.targets {
		s := p.current[t].Load()
		if s == nil {
			continue
		}
		for lo := 0; lo < len(jobs); lo += forecastChunk {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			hi := min(lo+forecastChunk, len(jobs))
			X, backing = s.rows(jobs[lo:hi], X[:0], backing[:0])
			q, err := s.model.PredictQuantiles(X, quantiles)
			if err != nil {
				return nil, fmt.Errorf("predictor: %s: %w", t, err)
			}
			s.serve(jobs[lo:hi], X, q)
			for i := lo; i < hi; i++ {
				v := vals[4*i+2*k : 4*i+2*k+2 : 4*i+2*k+2]
				v[0], v[1] = models.Exp(q[i-lo][0]), models.Exp(q[i-lo][1])
				if t == models.TargetDuration {
					out[i].DurationP50S, out[i].DurationP90S = &v[0], &v[1]
				} else {
					out[i].MemoryP50Bytes, out[i].MemoryP90Bytes = &v[0], &v[1]
				}
				at := slots*i + nDrivers[i]
				nDrivers[i] += len(s.drivers(drivers[at:at:slots*(i+1)], X[i-lo]))
			}
		}
	}
	for i := range out {
		out[i].TopFeatures = drivers[slots*i : slots*i+nDrivers[i] : slots*i+nDrivers[i]]
	}
	return out, nil
}

// serve moves the model's quantiles q for jobs (rows X) as its Blend
// serves them.
func (s *served) serve(jobs []cluster.Job, X, q [][]float64) {
	if s.blend == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range jobs {
		s.blend.Serve(jobs[i].Spec.Tenant, X[i], quantiles, q[i])
	}
}

// rows computes the feature rows of jobs into X and backing, reusing them.
func (s *served) rows(jobs []cluster.Job, X [][]float64, backing []float64) ([][]float64, []float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range jobs {
		start := len(backing)
		backing = s.art.History.Features(backing, &jobs[i])
		X = append(X, backing[start:len(backing):len(backing)])
	}
	// Growing backing may have moved it: point the rows at the final array.
	p := len(s.art.FeatureNames)
	for i := range X {
		X[i] = backing[i*p : (i+1)*p : (i+1)*p]
	}
	return X, backing
}

// drivers appends the TopDrivers features of row x, ranked by importance
// × max(1, |x-center|/scale).
func (s *served) drivers(dst []Driver, x []float64) []Driver {
	a := s.art
	var top [TopDrivers]Driver
	n := 0
	for j, imp := range a.Importance {
		if imp <= 0 {
			continue
		}
		w := imp * math.Max(1, math.Abs(x[j]-a.Center[j])/a.Scale[j])
		if n < TopDrivers {
			n++
		} else if w <= top[TopDrivers-1].Weight {
			continue
		}
		top[n-1] = Driver{a.Target, a.FeatureNames[j], x[j], w}
		for k := n - 1; k > 0 && top[k].Weight > top[k-1].Weight; k-- {
			top[k], top[k-1] = top[k-1], top[k]
		}
	}
	return append(dst, top[:n]...)
}
