// Package training fits models, evaluates them on a later, unseen time
// window, gates them against the serving version and publishes the winners
// to the model registry (Registry): a directory of versioned artifacts with
// their manifests, the one source of truth for models. Every runs a
// retraining schedule; Retrain reads finished jobs from the job store and
// fills their peak GPU memory from telemetry (FillPeakMemory).
// EvaluatePeak scores the online refinement of the memory footprint on
// GPU-memory series, TrainPeak publishes it (the peak target). TrainIdle and EvaluateIdle fit and
// score the idle-window forecaster (models/idle) on telemetry series held
// out from training, against persistence and a seasonal or moving-average
// baseline, and PublishIdle keeps it in the same registry. It serves no
// requests.
package training
