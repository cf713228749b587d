package training

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/models"
)

// Evaluate scores every model of the artifact on the labelled jobs
// submitted at or after from and before until (zero: no end). Other jobs
// serve only as history; a scored job's features see only jobs that ended
// before its submit time, those of the window included, as in serving.
func Evaluate(ctx context.Context, art *models.Artifact, jobs []cluster.Job, from, until time.Time) (Report, error) {
	sorted := sortedBySubmit(jobs)
	k, u := windowOf(sorted, from, until)
	d := scoredRows(art.Features, sorted, sorted[k:u])
	if len(d.y) < 1 {
		window := "from " + from.Format(time.RFC3339) + " on"
		if !until.IsZero() {
			window = "from " + from.Format(time.RFC3339) + " until " + until.Format(time.RFC3339)
		}
		return Report{}, fmt.Errorf("evaluate: %w: no job with a known %s submitted %s", ErrNoData, art.Target, window)
	}
	rep := newReport(art.Target, d)
	rep.ModelVersion, rep.Rows, rep.Selected = art.Version, art.Rows, art.Selected
	for _, name := range slices.Sorted(maps.Keys(art.Models)) {
		if err := ctx.Err(); err != nil {
			return Report{}, err
		}
		m, err := art.Model(name)
		if err != nil {
			return Report{}, fmt.Errorf("evaluate: %w", err)
		}
		met, err := scoreModel(m, d)
		if err != nil {
			return Report{}, fmt.Errorf("evaluate: %s: %w", name, err)
		}
		l, err := models.LookupLearner(name)
		if err != nil {
			return Report{}, fmt.Errorf("evaluate: %w", err)
		}
		rep.add(l, met.Map(art.Target))
	}
	return rep, nil
}

// windowOf is the index range of jobs (sorted by submit time) submitted
// at or after from and before until (zero: no end).
func windowOf(sorted []cluster.Job, from, until time.Time) (k, u int) {
	bySubmit := func(j cluster.Job, t time.Time) int { return j.SubmitTime.Compare(t) }
	k, _ = slices.BinarySearchFunc(sorted, from, bySubmit)
	u = len(sorted)
	if !until.IsZero() {
		u, _ = slices.BinarySearchFunc(sorted, until, bySubmit)
	}
	return k, max(k, u)
}

// gateScore is the gate metric of the artifact's selected model on the
// labelled jobs submitted from from on (jobs sorted by submit time).
func gateScore(art *models.Artifact, jobs []cluster.Job, from time.Time) (float64, error) {
	m, err := art.Model(art.Selected)
	if err != nil {
		return 0, err
	}
	return windowScore(art.Features, m, jobs, from, GateMetric(art.Target))
}

// windowScore is metric key of model m, with features fc, on the labelled
// jobs submitted from from on; ErrNoData when fewer than minRows.
func windowScore(fc models.FeatureConfig, m models.Model, jobs []cluster.Job, from time.Time, key string) (float64, error) {
	k, _ := slices.BinarySearchFunc(jobs, from, func(j cluster.Job, t time.Time) int { return j.SubmitTime.Compare(t) })
	d := scoredRows(fc, jobs, jobs[k:])
	if len(d.y) < minRows {
		return 0, fmt.Errorf("%w: %d jobs from %s on", ErrNoData, len(d.y), from.Format(time.RFC3339))
	}
	met, err := scoreModel(m, d)
	if err != nil {
		return 0, err
	}
	return met.Map(fc.Target)[key], nil
}
