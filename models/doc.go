// Package models holds the learners that forecast job duration, GPU-memory
// footprint and GPU idleness: quantile regressors on golearn and gorgonia,
// history baselines that need no learning, the feature pipeline shared by
// training and the live predictor, and the encoding of fitted artifacts.
// It reads no files and touches no network: callers hand it data.
//
// The learners arrive with the forecasting issues; this file marks the place.
package models
