// Package training fits models, evaluates them on a later, unseen time
// window, gates them against the serving version and publishes the winners
// to the model registry (Registry): a directory of versioned artifacts with
// their manifests, the one source of truth for models. Every runs a
// retraining schedule; EvaluatePeak scores the online refinement of the
// memory footprint on GPU-memory series. It serves no requests.
package training
