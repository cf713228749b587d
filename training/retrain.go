package training

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/collector"
	"github.com/prescient-sched/prescient/models"
	"github.com/prescient-sched/prescient/models/idle"
	"github.com/prescient-sched/prescient/store"
)

// JobLister is the part of the job store retraining reads.
type JobLister interface {
	ListJobs(ctx context.Context, f store.JobFilter) ([]cluster.Job, error)
}

// finishedPage is how many jobs one page of FinishedJobs asks for.
const finishedPage = 5000

// FinishedJobs reads every finished job (succeeded, failed, cancelled)
// from the job store, page by page, in submit order.
func FinishedJobs(ctx context.Context, l JobLister) ([]cluster.Job, error) {
	f := store.JobFilter{States: []cluster.JobState{cluster.StateSucceeded, cluster.StateFailed, cluster.StateCancelled}, Limit: finishedPage}
	var all []cluster.Job
	for {
		page, err := l.ListJobs(ctx, f)
		if err != nil {
			return nil, fmt.Errorf("retrain: %w", err)
		}
		all = append(all, page...)
		if len(page) < finishedPage {
			return all, nil
		}
		f.After = page[len(page)-1].ID
	}
}

// Retrain is one run of the retraining schedule: it reads the finished
// jobs from the job store, fills in the peak GPU memory of those without
// one from telemetry (FillPeakMemory; mem may be nil for none) and, for
// each target, trains, gates and publishes; with telemetry, the online
// peak refinement too, from the finished jobs' memory series
// (FleetPeakSeries, RetrainPeak), and, when mem answers series queries
// too (both stores do), the idle model from the fleet's utilization
// (RetrainIdle). A target without enough
// labelled jobs (memory before the collector has recorded peaks) is
// skipped with a log line. cfg gives the learners, seed and logger; its
// Target is set for each target in turn.
func Retrain(ctx context.Context, l JobLister, mem JobMemoryReader, reg Registry, cfg Config) error {
	log := logger(cfg.Logger)
	jobs, err := FinishedJobs(ctx, l)
	if err != nil {
		return err
	}
	if mem != nil {
		start := time.Now()
		fill, err := FillPeakMemory(ctx, mem, jobs)
		if err != nil {
			return fmt.Errorf("retrain: %w", err)
		}
		log.Info("peak GPU memory from telemetry", "finished_jobs", len(jobs), "without_peak", fill.Candidates,
			"filled", fill.Filled, "queries", fill.Queries, "took", time.Since(start).Round(time.Millisecond))
	}
	var errs []error
	for _, t := range []models.Target{models.TargetDuration, models.TargetMemory} {
		cfg.Target = t
		rep, err := TrainAndPublish(ctx, cfg, jobs, reg)
		switch {
		case errors.Is(err, ErrNoData):
			log.Info("retraining skipped", "target", t, "reason", err.Error())
		case err != nil:
			errs = append(errs, fmt.Errorf("retrain %s: %w", t, err))
		default:
			log.Info("retrained", "target", t, "jobs", len(jobs), "published", rep.Published, "version", rep.ModelVersion, "selected", rep.Selected, "gate", rep.Gate)
		}
	}
	if mem != nil {
		if err := retrainPeak(ctx, mem, jobs, reg, cfg); err != nil {
			errs = append(errs, err)
		}
	}
	if ts, ok := mem.(collector.TelemetryStore); ok {
		if err := retrainIdle(ctx, ts, reg, cfg); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// retrainIdle fits the idle model on the fleet's utilization (RetrainIdle)
// and publishes it through its gate; too few GPUs reporting skip it with a
// log line.
func retrainIdle(ctx context.Context, ts collector.TelemetryStore, reg Registry, cfg Config) error {
	log := logger(cfg.Logger)
	ic := DefaultIdleConfig()
	if cfg.Seed != 0 {
		ic.Model.Seed = cfg.Seed
	}
	ic.Logger = cfg.Logger
	start := time.Now()
	rep, err := RetrainIdle(ctx, ts, reg, ic, time.Now())
	switch {
	case errors.Is(err, ErrNoSeriesData):
		log.Info("retraining skipped", "target", idle.Target, "reason", err.Error())
		return nil
	case err != nil:
		return fmt.Errorf("retrain %s: %w", idle.Target, err)
	}
	log.Info("retrained", "target", idle.Target, "series", rep.Series, "published", *rep.Published, "version", rep.ModelVersion,
		"gate", rep.Gate, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// PeakSeriesStep is the spacing of the memory series the peak refinement
// learns from the fleet: the control plane refines running jobs from
// series of the same step.
const PeakSeriesStep = time.Minute

// retrainPeak fits the online peak refinement on the finished jobs' own
// memory series and publishes it through RetrainPeak's gate; too few
// long jobs with telemetry skip it with a log line.
func retrainPeak(ctx context.Context, mem JobMemoryReader, jobs []cluster.Job, reg Registry, cfg Config) error {
	log := logger(cfg.Logger)
	pc := DefaultPeakConfig()
	pc.Seed = cfg.Seed
	start := time.Now()
	series, err := FleetPeakSeries(ctx, mem, jobs, pc.Window, PeakSeriesStep)
	if err != nil {
		return fmt.Errorf("retrain %s: %w", models.TargetPeak, err)
	}
	rep, err := RetrainPeak(ctx, pc, series, reg)
	switch {
	case errors.Is(err, ErrNoData):
		log.Info("retraining skipped", "target", models.TargetPeak, "series", len(series), "reason", err.Error())
		return nil
	case err != nil:
		return fmt.Errorf("retrain %s: %w", models.TargetPeak, err)
	}
	log.Info("retrained", "target", models.TargetPeak, "series", len(series), "published", *rep.Published,
		"version", rep.ModelVersion, "selected", rep.Selected, "gate", rep.Gate, "took", time.Since(start).Round(time.Millisecond))
	return nil
}
