// Package idle forecasts idle GPUs: how many GPUs of a pool (a virtual
// cluster, a node, a group of containers) will be idle over the next hours,
// and, per GPU, the windows in which it will be idle with their
// probability. Idle means unallocated, or allocated but below a
// utilization threshold (5% by default) for at least a window's length.
//
// It has three parts, none of which reads files or the network:
//
//   - Pool, a count series on a regular grid (idle units, the pool's size,
//     its queued demand), built from count series (Helios, Philly nodes) or
//     from per-device utilization series (GenAI containers, NVML telemetry)
//     with NewPool and PoolsFromUtilization.
//   - Model, a gorgonia perceptron (models.MLP) trained with the pinball loss
//     on the change of the pool's idle share from the last value, over
//     lagged values, recent deltas, the same time a day and a week before,
//     calendar features and the queued demand; pooled over many series and
//     normalised by the pool's size, so that it transfers to pools it has
//     not seen. A survival table of idle runs, fitted on per-device series,
//     says how long a device that has been idle for a while stays idle.
//   - Forecaster, which combines what the executor knows (running jobs and
//     their remaining P50/P90, queued demand) with the Model's forecast of
//     each pool's telemetry into per-GPU probabilities, idle windows, pool
//     and node counts, and the jobs that hold GPUs idle.
package idle
