package training

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prescient-sched/prescient/cluster"
)

// TrainAndPublish trains on jobs, then gates and publishes: the new
// artifact is published only when its selected model (as fitted before the
// holdout window) is not worse on the gate metric than the serving version,
// both scored on the holdout jobs submitted after the serving version's
// data, which neither has seen. Too few such jobs refuses publishing. A
// serving artifact that no longer loads does not block publishing. The
// report says what happened.
func TrainAndPublish(ctx context.Context, cfg Config, jobs []cluster.Job, reg Registry) (Report, error) {
	t, err := train(ctx, cfg, jobs)
	if err != nil {
		return Report{}, err
	}
	art, rep := t.art, t.rep
	log := logger(cfg.Logger)
	key := GateMetric(cfg.Target)

	cur, err := reg.LoadCurrent(cfg.Target)
	switch {
	case errors.Is(err, ErrNoModel):
		rep.Gate = "no serving model"
	case err != nil:
		log.Warn("serving model does not load; publishing without a gate", "err", err)
		rep.Gate = "serving model does not load: " + err.Error()
	default:
		// Both are scored on jobs neither has seen: the new run's holdout
		// window, less what the serving version was trained on.
		from := art.HoldoutFrom
		if !cur.DataUntil.Before(from) {
			from = cur.DataUntil.Add(time.Nanosecond)
		}
		newScore, err := windowScore(art.Features, t.selected, t.all, from, key)
		if errors.Is(err, ErrNoData) {
			rep.Gate = fmt.Sprintf("refused: too few jobs submitted after version %d's data (%s) to compare on", cur.Version, cur.DataUntil.Format(time.RFC3339))
			rep.ModelVersion = cur.Version
			log.Info("gate refused the new model: no newer jobs", "serving_version", cur.Version)
			return rep, nil
		}
		if err != nil {
			return Report{}, fmt.Errorf("gate: %w", err)
		}
		old, err := gateScore(cur, t.all, from)
		if err != nil {
			return Report{}, fmt.Errorf("gate: scoring version %d: %w", cur.Version, err)
		}
		window := fmt.Sprintf("jobs from %s on", from.Format(time.RFC3339))
		if newScore > old {
			rep.Gate = fmt.Sprintf("refused: %s %s %.4f is worse than version %d's %.4f on %s", art.Selected, key, newScore, cur.Version, old, window)
			rep.ModelVersion = cur.Version
			log.Info("gate refused the new model", "new", newScore, "serving", old, "serving_version", cur.Version, "metric", key)
			return rep, nil
		}
		rep.Gate = fmt.Sprintf("passed: %s %s %.4f ≤ version %d's %.4f on %s", art.Selected, key, newScore, cur.Version, old, window)
	}
	v, err := reg.Publish(art)
	if err != nil {
		return Report{}, fmt.Errorf("publish: %w", err)
	}
	rep.ModelVersion, rep.Published = v, true
	log.Info("published", "target", cfg.Target, "version", v, "selected", art.Selected, key, round3(art.Metrics[art.Selected][key]))
	return rep, nil
}
