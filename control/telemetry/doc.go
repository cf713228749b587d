// Package telemetry is what the live plane learns from GPU telemetry:
// each GPU's recent utilization, read once for every reader (Utilization:
// the idle jobs, the idle forecast, lending); the running jobs that hold
// their GPUs idle, and the GPUs of jobs whose backend does not name them
// found by their processes (IdleJobs); and running jobs' peak GPU memory
// re-forecast from their series (Refiner). Each keeps its state under a
// lock of its own and reads beside the plan loop, so a slow telemetry
// store never delays a plan.
package telemetry
