package training

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/models"
)

// LimitReport scores time-limit recommendations over a window (evaluate
// --target limit): for each model of a duration artifact and for the
// users' own limits, how many completed jobs would have run past their
// limit and how far the limits sit above the run times.
type LimitReport struct {
	ModelVersion int    `json:"model_version"`
	Selected     string `json:"selected"`
	// Models are the learned models, Baselines the baselines among the
	// artifact's models and "user", the users' own limits.
	Models    map[string]LimitMetrics `json:"models"`
	Baselines map[string]LimitMetrics `json:"baselines"`
	// RunPast is the share the policy's calibration aims at.
	RunPast        float64   `json:"run_past_target"`
	EvaluatedFrom  time.Time `json:"evaluated_from"`
	EvaluatedUntil time.Time `json:"evaluated_until"`
	// Completed counts the scored jobs: those that completed (succeeded)
	// in the window, with a run time. Jobs without a user's limit are
	// scored for the models, not for "user".
	Completed int `json:"completed_jobs"`
}

// LimitMetrics are one recommender's figures over the completed jobs.
type LimitMetrics struct {
	// RanPastLimitPct is the share of completed jobs whose run time
	// exceeded the limit: jobs the limit would have killed.
	RanPastLimitPct float64 `json:"ran_past_limit_pct"`
	// LimitOverRunMedian and P90 are of limit ÷ max(run time, 60 s).
	LimitOverRunMedian float64 `json:"limit_over_run_median"`
	LimitOverRunP90    float64 `json:"limit_over_run_p90"`
	// LoweredPct is the share of jobs given a limit below the user's.
	LoweredPct float64 `json:"lowered_pct"`
	// ReservedHours is the sum of the limits times the processors (GPUs):
	// what a backfilling scheduler plans with.
	ReservedHours float64 `json:"reserved_hours"`
	Jobs          int     `json:"jobs"`
}

// limitWarmup is how many labelled jobs before the window a limit
// evaluation replays, unscored, so that the calibration (and the blend)
// start the window as a live service would, warm.
const limitWarmup = 3000

// EvaluateLimits scores p's recommendations from each model of a duration
// artifact, and the users' own limits, on the jobs that completed among
// those submitted at or after from and before until (zero: no end). Each
// job's forecast is served as in Evaluate; the policy's calibration hears
// each completed job when it ends, and starts warm on the labelled jobs
// before the window.
// dump, when not nil, is given every completed job the calibration hears
// or scores, per model (LimitRow).
func EvaluateLimits(ctx context.Context, art *models.Artifact, jobs []cluster.Job, from, until time.Time, p models.LimitPolicy, dump func(LimitRow) error) (LimitReport, error) {
	if art.Target != models.TargetDuration {
		return LimitReport{}, fmt.Errorf("evaluate limits: the %s model forecasts no run times; train --target duration", art.Target)
	}
	if err := p.Validate(); err != nil {
		return LimitReport{}, err
	}
	sorted := sortedBySubmit(jobs)
	k, u := windowOf(sorted, from, until)
	w, _ := warmupStart(art.Target, sorted, k)
	d := scoredRows(art.Features, sorted, sorted[w:u])
	scored, user := 0, newLimitScore()
	for i := range d.queries {
		if j := &d.queries[i]; !j.SubmitTime.Before(from) && models.CompletedRun(j) {
			scored++
			if j.Spec.TimeLimit > 0 {
				user.add(j, j.Spec.TimeLimit)
			}
		}
	}
	if scored < 1 {
		return LimitReport{}, fmt.Errorf("evaluate limits: %w: no job that completed with a run time was submitted from %s", ErrNoData, from.Format(time.RFC3339))
	}
	rep := LimitReport{ModelVersion: art.Version, Selected: art.Selected, RunPast: p.RunPast,
		Models: map[string]LimitMetrics{}, Baselines: map[string]LimitMetrics{"user": user.metrics()},
		EvaluatedFrom: from, EvaluatedUntil: d.queries[len(d.queries)-1].SubmitTime, Completed: scored}

	for _, name := range slices.Sorted(maps.Keys(art.Models)) {
		if err := ctx.Err(); err != nil {
			return LimitReport{}, err
		}
		m, err := art.Model(name)
		if err != nil {
			return LimitReport{}, fmt.Errorf("evaluate limits: %w", err)
		}
		q, err := d.stream.Serve(m, []float64{0.5})
		if err != nil {
			return LimitReport{}, fmt.Errorf("evaluate limits: %s: %w", name, err)
		}
		met, err := replayLimits(d.queries, q, from, p, name, dump)
		if err != nil {
			return LimitReport{}, fmt.Errorf("evaluate limits: %s: %w", name, err)
		}
		l, err := models.LookupLearner(name)
		if err != nil {
			return LimitReport{}, fmt.Errorf("evaluate limits: %w", err)
		}
		if l.Baseline {
			rep.Baselines[name] = met
		} else {
			rep.Models[name] = met
		}
	}
	return rep, nil
}

// warmupStart is where a limit calibration's warm-up begins among jobs
// in submit order, for a window that begins at k: at the first of the
// last limitWarmup jobs before it with a label of t. labelled is how many
// there are.
func warmupStart(t models.Target, sorted []cluster.Job, k int) (w, labelled int) {
	w = k
	for w > 0 && labelled < limitWarmup {
		w--
		if _, ok := t.Label(&sorted[w]); ok {
			labelled++
		}
	}
	return w, labelled
}

// ServedBefore is what a limit calibration warms up on before a window
// from from, as EvaluateLimits warms up: the last limitWarmup labelled
// jobs submitted before from, in submit order, with the medians (log
// seconds) the artifact's selected model serves them, each from the jobs
// that ended before its submit. simulate --estimates learned starts its
// calibration so (predictor.LimitEstimates.WarmUp).
func ServedBefore(art *models.Artifact, jobs []cluster.Job, from time.Time) ([]cluster.Job, []float64, error) {
	if art.Target != models.TargetDuration {
		return nil, nil, fmt.Errorf("served medians: the %s model forecasts no run times", art.Target)
	}
	sorted := sortedBySubmit(jobs)
	k, _ := windowOf(sorted, from, time.Time{})
	w, labelled := warmupStart(art.Target, sorted, k)
	if labelled == 0 {
		return nil, nil, nil
	}
	m, err := art.Model(art.Selected)
	if err != nil {
		return nil, nil, fmt.Errorf("served medians: %w", err)
	}
	d := scoredRows(art.Features, sorted, sorted[w:k])
	q, err := d.stream.Serve(m, []float64{0.5})
	if err != nil {
		return nil, nil, fmt.Errorf("served medians: %s: %w", art.Selected, err)
	}
	med := make([]float64, len(q))
	for i := range q {
		med[i] = q[i][0]
	}
	return d.queries, med, nil
}

// replayLimits recommends a limit for each query in submit order from its
// served forecast q, the calibration hearing each completed query when it
// ends (before the submit of any query after), and scores the completed
// ones submitted from from on.
func replayLimits(queries []cluster.Job, q [][]float64, from time.Time, p models.LimitPolicy, model string, dump func(LimitRow) error) (LimitMetrics, error) {
	type ended struct {
		at int64
		i  int
	}
	var ends []ended
	for i := range queries {
		if models.CompletedRun(&queries[i]) {
			ends = append(ends, ended{models.EndTime(&queries[i]).UnixNano(), i})
		}
	}
	slices.SortFunc(ends, func(a, b ended) int { return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.i, b.i)) })
	cal := models.NewLimitCalibration(p)
	s := newLimitScore()
	next := 0
	for i := range queries {
		j := &queries[i]
		for ; next < len(ends) && ends[next].at < j.SubmitTime.UnixNano(); next++ {
			o := &queries[ends[next].i]
			cal.Observe(models.LimitUser(o), o.Spec.TimeLimit, q[ends[next].i][0], o.Outcome.RunTime)
		}
		if !models.CompletedRun(j) {
			continue
		}
		row := LimitRow{Model: model, Job: j.ID, User: models.LimitUser(j), Submit: j.SubmitTime, End: models.EndTime(j),
			Request: j.Spec.TimeLimit, Run: j.Outcome.RunTime, Median: q[i][0], Margin: math.NaN()}
		if row.Scored = !j.SubmitTime.Before(from); row.Scored {
			row.Limit = cal.Recommend(row.User, row.Median, row.Request)
			s.add(j, row.Limit)
			if m, ok := cal.Margin(row.User, row.Request); ok {
				row.Margin = m
			}
		}
		if dump != nil {
			if err := dump(row); err != nil {
				return LimitMetrics{}, err
			}
		}
	}
	return s.metrics(), nil
}

// LimitRow is one completed job as a limit evaluation's replay saw it,
// for trying other rules without the models (evaluate --target limit
// --dump): whose limits calibrate it (models.LimitUser) and its request
// (0: none), when it was submitted and ended, its run time, and the
// forecast median the model served it (log seconds, models.Log). A job
// submitted before the window only warms the calibration up; a scored
// one also has the calibration's margin at its submission (log seconds;
// NaN: none yet, the request stands) and the limit recommended (0: none).
type LimitRow struct {
	Model        string
	Job          cluster.JobID
	User         string
	Submit, End  time.Time
	Request, Run time.Duration
	Median       float64
	Scored       bool
	Margin       float64
	Limit        time.Duration
}

// limitScore accumulates LimitMetrics.
type limitScore struct {
	n, past, lowered int
	ratios           []float64
	reservedS        float64
}

func newLimitScore() *limitScore { return &limitScore{} }

// add scores limit on a completed job; zero (no limit at all) counts as
// never running past it, at no ratio.
func (s *limitScore) add(j *cluster.Job, limit time.Duration) {
	s.n++
	if limit <= 0 {
		return
	}
	if j.Outcome.RunTime > limit {
		s.past++
	}
	if j.Spec.TimeLimit > 0 && limit < j.Spec.TimeLimit {
		s.lowered++
	}
	s.ratios = append(s.ratios, limit.Seconds()/math.Max(j.Outcome.RunTime.Seconds(), 60))
	s.reservedS += limit.Seconds() * float64(max(j.Spec.GPUs, 1))
}

func (s *limitScore) metrics() LimitMetrics {
	if s.n == 0 {
		return LimitMetrics{}
	}
	slices.Sort(s.ratios)
	pct := func(k int) float64 { return round3(100 * float64(k) / float64(s.n)) }
	return LimitMetrics{
		RanPastLimitPct: pct(s.past), LoweredPct: pct(s.lowered),
		LimitOverRunMedian: round3(models.QuantileSorted(s.ratios, 0.5)),
		LimitOverRunP90:    round3(models.QuantileSorted(s.ratios, 0.9)),
		ReservedHours:      math.Round(s.reservedS / 3600), Jobs: s.n,
	}
}
