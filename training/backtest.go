package training

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/models"
)

// BacktestWindow is one window of a rolling-origin backtest: the models
// trained on what was submitted before Origin, scored on the jobs
// submitted from Origin until Until.
type BacktestWindow struct {
	Origin time.Time `json:"origin"`
	Until  time.Time `json:"until"`
	// Jobs is how many labelled jobs were scored; TrainRows how many the
	// selected model was fitted on.
	Jobs      int `json:"jobs"`
	TrainRows int `json:"train_rows"`
	// Selected is the learner the gate would have served.
	Selected  string                        `json:"selected"`
	Models    map[string]map[string]float64 `json:"models"`
	Baselines map[string]map[string]float64 `json:"baselines"`
}

// BacktestReport is a rolling-origin backtest.
type BacktestReport struct {
	Target  models.Target    `json:"target"`
	Windows []BacktestWindow `json:"windows"`
	// Worst holds, for each learner and baseline and for "served" (the
	// selected learner of each window), its worst figures over the
	// windows: the highest mae_log and pinball_p90_log, the lowest
	// spearman, and the p90_coverage farthest from 0.9.
	Worst map[string]map[string]float64 `json:"worst"`
}

// ServedName is the key of the served model's figures in
// BacktestReport.Worst.
const ServedName = "served"

// Backtest trains at each origin but the last on the jobs submitted before
// it (cfg.Until is set to the origin; nothing is published) and scores
// every model on the jobs submitted from that origin until the next, their
// features fed by the outcomes that arrive meanwhile, as in serving.
// origins must be increasing; at least two (one window).
func Backtest(ctx context.Context, cfg Config, jobs []cluster.Job, origins []time.Time, progress func(window, windows int)) (BacktestReport, error) {
	if len(origins) < 2 {
		return BacktestReport{}, fmt.Errorf("backtest: %d origins: want at least two (the last ends the last window)", len(origins))
	}
	for i := 1; i < len(origins); i++ {
		if !origins[i].After(origins[i-1]) {
			return BacktestReport{}, fmt.Errorf("backtest: origin %s is not after %s", origins[i].Format(time.RFC3339), origins[i-1].Format(time.RFC3339))
		}
	}
	rep := BacktestReport{Target: cfg.Target}
	for i := range len(origins) - 1 {
		if progress != nil {
			progress(i, len(origins)-1)
		}
		c := cfg
		c.Until = origins[i]
		art, _, err := Train(ctx, c, jobs)
		if err != nil {
			return BacktestReport{}, fmt.Errorf("backtest: window %d (%s): %w", i+1, origins[i].Format(time.DateOnly), err)
		}
		ev, err := Evaluate(ctx, art, jobs, origins[i], origins[i+1])
		if err != nil {
			return BacktestReport{}, fmt.Errorf("backtest: window %d (%s to %s): %w", i+1, origins[i].Format(time.DateOnly), origins[i+1].Format(time.DateOnly), err)
		}
		rep.Windows = append(rep.Windows, BacktestWindow{Origin: origins[i], Until: origins[i+1], Jobs: ev.EvaluatedRows,
			TrainRows: art.Rows, Selected: art.Selected, Models: ev.Models, Baselines: ev.Baselines})
	}
	if progress != nil {
		progress(len(origins)-1, len(origins)-1)
	}
	rep.Worst = worstOf(rep.Windows)
	return rep, nil
}

// worstOf is BacktestReport.Worst of windows.
func worstOf(windows []BacktestWindow) map[string]map[string]float64 {
	out := map[string]map[string]float64{}
	take := func(name string, row map[string]float64) {
		w := out[name]
		if w == nil {
			w = map[string]float64{}
			out[name] = w
		}
		for _, k := range slices.Sorted(maps.Keys(row)) {
			v, ok := row[k]
			if !ok || math.IsNaN(v) {
				continue
			}
			old, seen := w[k]
			switch {
			case !seen:
				w[k] = v
			case k == "spearman":
				w[k] = min(old, v)
			case k == "p90_coverage":
				if math.Abs(v-0.9) > math.Abs(old-0.9) {
					w[k] = v
				}
			default: // errors and losses, fit times
				w[k] = max(old, v)
			}
		}
	}
	for _, win := range windows {
		for name, row := range win.Models {
			take(name, row)
		}
		for name, row := range win.Baselines {
			take(name, row)
		}
		if row, ok := win.Models[win.Selected]; ok {
			take(ServedName, row)
		} else if row, ok := win.Baselines[win.Selected]; ok {
			take(ServedName, row)
		}
	}
	return out
}

// RollingOrigins are the origins from from every step until until (which
// ends the last window, shorter when step does not divide the span).
func RollingOrigins(from, until time.Time, step time.Duration) ([]time.Time, error) {
	if step <= 0 {
		return nil, fmt.Errorf("rolling step %s: want a positive duration", step)
	}
	if !until.After(from) {
		return nil, fmt.Errorf("rolling: %s is not after %s", until.Format(time.RFC3339), from.Format(time.RFC3339))
	}
	var out []time.Time
	for t := from; t.Before(until); t = t.Add(step) {
		out = append(out, t)
	}
	return append(out, until), nil
}
