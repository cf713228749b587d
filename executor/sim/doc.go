// Package sim is the discrete-event simulator: it replays a job trace on a
// fleet through an executor.Planner on a virtual clock, so every policy is
// judged by the same code that plans on the live fleet.
//
// Each step moves the clock to the next submission or event (a job's work
// done, a preempted job's checkpoint landing or its grace running out, a
// node failing at the configured MTBF or coming back), and plans only when
// something changed that could start or displace a job; the planner can
// also ask to be woken (a Tiresias demotion, a deadline turning urgent).
// A job's progress is computed, not stepped: with a checkpoint interval τ
// and cost C it pauses C after every τ of work, so a failure loses only the
// work since its last checkpoint. Allocations go through cluster.Snapshot,
// which refuses to exceed a GPU or give it twice, and an executor.Capacity
// index kept in step; Config.Check verifies both and every job's state
// after each step.
//
// Result holds the metrics (JSON with SI units in the names) and the series
// for plots. Energy follows DefaultPower: a busy GPU draws its board power
// limit, an idle one IdleFraction of it, a failed node nothing.
package sim
