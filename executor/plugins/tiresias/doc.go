// Package tiresias is the two-dimensional least-attained-service order of
// Tiresias (Gu et al., NSDI'19): a job's attained service is its GPU count
// times the time it has run, over all attempts; jobs fall into discretized
// queues by attained service (queue i holds jobs below Thresholds[i]); a
// lower queue runs first, and within a queue jobs run in submit order. It
// uses no forecasts. With a byorder preemptor, a job in a lower queue
// preempts one in a higher queue; the planner is woken when a running job
// crosses a threshold.
//
// Starvation is avoided as in the paper: a waiting job that has run before
// is promoted to the highest-priority queue once its wait since it was last
// stopped reaches PromoteKnob times the length of its last run
// (STARVELIMIT); once it runs again it falls back to the queue its attained
// service puts it in. Promotion makes queued keys change with time, so the
// order is static only with PromoteKnob 0 (no promotion).
package tiresias
