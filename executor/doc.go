// Package executor decides where and when jobs run. Its Planner is a pure
// function from a fleet snapshot, the queue, running jobs, forecasts and a
// clock to a Plan, built from small plugins (queue order, filters, scores,
// preemption, checkpoint timing). Actuators consume plans: the advisor
// records them, autopilot applies them through a backend (node agents or
// Kubernetes). The planner calls neither NVML nor HTTP.
//
// The planner arrives with the executor issue; this file marks the place.
package executor
