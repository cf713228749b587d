package service

import (
	"fmt"
	"time"

	"github.com/prescient-sched/prescient/models/idle"
)

const (
	// MaxIdleHorizon bounds an idle forecast's horizon; the idle model
	// answers up to its own (2 h by default), later steps come from the
	// running jobs' forecasts alone.
	MaxIdleHorizon = 24 * time.Hour
	// MaxIdleSteps bounds the steps of one forecast.
	MaxIdleSteps = 288
)

// IdleQuery asks for an idle forecast of the fleet, or of one pool or node
// of it. Zero values take the defaults of idle.DefaultInput.
type IdleQuery struct {
	Horizon, Step, MinWindow time.Duration
	MinProbability           float64
	Pool, Node               string
}

// The parts of an idle forecast, as the API names them.
type (
	IdleJob    = idle.IdleJob
	IdleGPU    = idle.GPUForecast
	IdleWindow = idle.Window
	IdleCount  = idle.CountForecast
)

// Input is the forecaster's input for the query at now: the defaults of
// idle.DefaultInput where the query leaves a value zero, within the
// bounds the API serves (errors wrap ErrInvalid).
func (q IdleQuery) Input(now time.Time) (idle.Input, error) {
	in := idle.DefaultInput(now)
	if q.Horizon > 0 {
		in.Horizon = q.Horizon
	}
	if q.Step > 0 {
		in.Step = q.Step
	}
	if q.MinWindow > 0 {
		in.MinWindow = q.MinWindow
	}
	if q.MinProbability > 0 {
		in.MinProbability = q.MinProbability
	}
	switch {
	case in.Horizon > MaxIdleHorizon:
		return in, fmt.Errorf("horizon %s: at most %s: %w", in.Horizon, MaxIdleHorizon, ErrInvalid)
	case in.Step < time.Minute || in.Horizon < in.Step:
		return in, fmt.Errorf("step %s, horizon %s: want 1m <= step <= horizon: %w", in.Step, in.Horizon, ErrInvalid)
	case in.Horizon/in.Step > MaxIdleSteps:
		return in, fmt.Errorf("horizon %s in steps of %s is %d steps, at most %d: %w", in.Horizon, in.Step, in.Horizon/in.Step, MaxIdleSteps, ErrInvalid)
	case in.MinProbability > 1:
		return in, fmt.Errorf("min probability %g: want (0, 1]: %w", in.MinProbability, ErrInvalid)
	}
	return in, nil
}

// IdleForecast is the fleet's idle forecast (idle.Forecast) with what it
// was made from.
type IdleForecast struct {
	idle.Forecast
	// ModelVersion is the idle model's version, 0 when the forecast comes
	// from the running jobs and the queue alone.
	ModelVersion int `json:"model_version"`
	// ThresholdPct is the utilization below which a GPU counts as idle.
	ThresholdPct float64 `json:"threshold_pct"`
	// TelemetryGPUs is how many of the GPUs have a recent utilization
	// series; the others are idle only when no job holds them.
	TelemetryGPUs int `json:"telemetry_gpus"`
	// QueuedGPUs is the queued demand the forecast expects to take idle
	// GPUs, shared among the pools by their size.
	QueuedGPUs float64 `json:"queued_gpus"`
}
