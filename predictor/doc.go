// Package predictor loads the published models from the registry
// (training.Registry) and answers forecasts for batches of jobs: P50 and
// P90 duration and peak GPU memory, the model versions and the features
// that drove each answer most. Reload (or Watch) picks up a newly published
// version without a restart; a version that is corrupt or of an
// incompatible format is refused with an error naming its file, and the
// target's newest older version that loads serves instead (Fallback). It
// never writes models. RefinePeak forecasts a running job's peak GPU
// memory over the next hours from its memory series so far, with the published
// peak-refinement model. Idle serves idle-window forecasts (IdleWindows) from
// the registry's idle model, combined with the executor's running jobs and
// queue (models/idle.Forecaster), and reloads it the same way.
package predictor
