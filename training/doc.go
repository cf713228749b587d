// Package training fits models, evaluates them on a later, unseen time
// window, gates them against the published ones and the history baselines,
// and publishes the winners to the model registry: a directory of versioned
// artifacts that is the one source of truth for models. It also runs the
// retraining schedule. It serves no requests.
//
// The training loop arrives with the forecasting issue; this file marks the place.
package training
