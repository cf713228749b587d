// Package predictor loads the published models from the registry and answers
// forecasts: each job's duration and GPU-memory footprint with quantiles and
// the model version, and each GPU's idle windows. It reloads models when a
// new version is published. It never writes models.
//
// The predictor arrives with the forecasting issues; this file marks the place.
package predictor
