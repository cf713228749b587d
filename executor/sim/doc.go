// Package sim is the discrete-event simulator: it replays a job trace on a
// fleet through an executor.Planner on a virtual clock, so every policy is
// judged by the same code that plans on the live fleet.
//
// Each step moves the clock to the next submission or event (a job's work
// done, a preempted job's checkpoint landing or its grace running out, a
// node failing at the configured MTBF or coming back), and plans only when
// something changed that could start or displace a job; the planner can
// also ask to be woken (a Tiresias demotion, a deadline turning urgent).
// It plans with executor.PlanInput.Unexplained: a replay reads the
// decisions, not their reasons, which the planner then does not format.
// A job's progress is computed, not stepped: with a checkpoint interval τ
// and cost C it pauses C after every τ of work, so a failure loses only the
// work since its last checkpoint. Allocations go through cluster.Snapshot,
// which refuses to exceed a GPU or give it twice, and an executor.Capacity
// index kept in step; Config.Check verifies both and every job's state
// after each step.
//
// A replay can also start from a live state (live.go): Config.Start sets
// the clock (jobs submitted earlier enter the queue then), Config.Running
// places jobs that already hold GPUs with the work they have done,
// Config.Until stops the clock, and Config.Outcomes lists each job's start
// and end; the control plane's what-if is built on these.
//
// Result holds the metrics (JSON with SI units in the names) and the series
// for plots. Energy follows DefaultPower and DefaultNodePower (power.go): a
// busy GPU draws the Zeus-measured fraction of its board power limit, an
// idle one IdleFraction of it, each up node its base power, a failed node
// nothing; with Config.ParkIdleAfter a node that ran nothing that long is
// parked (ParkedW) until a job wakes it (a boot's energy and delay), or
// earlier with Config.ParkForecast, at the first look (each step, at least
// every ParkReview) after which the forecasts say it will not be needed
// soon. With Config.Carbon every watt is weighed by the grid's carbon intensity
// (carbon.go).
//
// With Config.Lending (lending.go) some nodes are an inference pool whose
// demand follows replicas' idleness series: a lend.Lender's forecast lends its
// idle nodes to training and takes them back, the jobs on them told to
// checkpoint and stop, before the demand returns; demand beyond what the
// service holds takes nodes back at once and counts as short.
//
// Fill (fill.go) is the FGD paper's fill experiment: pods arrive and never
// leave until a multiple of the fleet's GPU capacity has arrived, placed by
// one of the placement package's scorers.
package sim
