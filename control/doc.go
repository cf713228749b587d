// Package control is the control plane: it keeps the queue and the job
// history in the store, asks the predictor for forecasts, runs the planner
// on events and on a tick, and either records the plan as recommendations
// (advisor) or carries it out through a backend (autopilot). It
// implements service.Service, what the HTTP API serves.
//
// The store is the source of truth: a job is stored before Submit returns,
// and every step of autopilot is recorded before the backend is asked
// (plane.go: Run's steps and recovery; events.go: the backend's events
// applied to the store; cycle.go: one plan cycle, the concerns' hooks in
// a numbered order; usage.go: the tenants' fair-share accounting;
// stats.go, fleet.go, jobs.go, idle.go: what the API reads).
//
// Each concern of the live plane is a package of its own with its state,
// its lock and its hooks: control/parking (powers down nodes that run
// nothing and wakes them, as executor/park decides), control/lending
// (lends idle inference nodes to training, as executor/lend decides),
// control/telemetry (every GPU's utilization, the jobs that hold theirs
// idle, running jobs' memory refined), control/tenants (the tenants file
// in force, read again when it changes; tenants.go reports their quotas'
// use by executor.Quotas, the planner's own ledger) and control/whatif (what-if and the
// queue forecast, simulating forward with executor/sim). control/advice is
// the book of recommendations they all record through, control/live the
// state a cycle hands them.
package control
