// Package control is the control plane: it keeps the queue and the job
// history in the store, asks the predictor for forecasts, runs the planner
// on events and on a tick, and either records the plan as recommendations
// (advisor) or carries it out through a backend (autopilot). Service is
// what the HTTP API serves; Plane implements it.
//
// The store is the source of truth: a job is stored before Submit returns,
// and every step of autopilot is recorded before the backend is asked
// (plane.go: Run's steps; events.go: the backend's events applied to the
// store; cycle.go: planning, advisor and autopilot). WhatIf (whatif.go)
// simulates forward from the live state with executor/sim; Stats
// (stats.go) reads the job history and telemetry for the dashboard;
// refine.go re-forecasts running jobs' peak GPU memory from their telemetry
// (Config.PeakRefiner) for placement; idle.go forecasts idle GPUs and
// recommends about jobs that hold theirs idle; lending.go lends idle
// inference nodes to training (Config.Lending) and parking.go powers down
// nodes that run nothing and wakes them for work (Config.Parking), both
// deciding as the replay does (executor/lend, executor/park).
// backend/simbackend is a Backend without processes for tests and
// `serve --backend sim`.
package control
