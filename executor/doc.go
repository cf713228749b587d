// Package executor decides where and when jobs run. Its Planner (Framework)
// is a pure function from a PlanInput — fleet snapshot and free-capacity
// index, queued and running jobs with their duration forecasts, tenants'
// decayed usage, the clock — to a Plan: placements, preemptions (checkpoint
// first, stop by a deadline), the checkpoint interval of each job started,
// deadline feasibility of new jobs, reasons for every decision and when to
// plan again. A caller that reads no reasons (the simulator) sets
// PlanInput.Unexplained: the decisions are the same, without the cost of
// formatting a reason for each job considered.
//
// A Policy is a set of plugins, one per decision: QueueOrder (with Waker for
// keys that change while jobs run or wait, StaticOrder for keys that do not
// change while a job waits and SteppedOrder for keys that change only when
// Waker says, so a SortedQueue can keep the queue in order), Blocking
// mode (Skip, HeadOfLine, or Reserve with a Reserver: EASY-style
// reservations on the GPUs a blocked job gets at its shadow time, and
// backfill of jobs whose P90 ends before it or that fit outside them),
// Preemptor, Placer and CheckpointTimer. The plugins live in
// executor/plugins, one package each; executor/policies assembles the named
// policies; executor/sim replays traces through the same planner on a
// virtual clock; executor/executortest is the scenario harness for tests.
//
// Capacity is the incremental index of free GPUs by node that keeps a
// planning cycle near O(queue + nodes). A caller that plans again and again
// over one queue (the simulator) can keep what a cycle would otherwise read
// of every job, each checked by the simulator's invariants: the queue's
// facts (QueueFactsKeeper, PlanInput.Facts), the placer's (a KeepingPlacer's
// JobKeeper, PlanInput.Kept), the queue in order with its keys (SortedQueue,
// PlanInput.QueueSorted) or, for an order whose keys move with the clock,
// what each queued job's key reads of it (PartedOrder, PlanInput.QueueParts)
// and, for an IndexedOrder, an index from which a cycle takes the queue's
// head in order without keying every job (PlanInput.QueueIndex).
// Forecaster is what the simulator asks for forecasts (Observer, if it also
// learns from finished jobs); Oracle gives true durations, optionally
// noised; learned forecasts come from the predictor through
// predictor.Adapter.
//
// What is done with a Plan is the caller's: the control plane records it
// as recommendations (advisor) or carries it out through a Backend
// (autopilot; the backends live under backend/), the simulator applies it
// to its virtual fleet.
package executor
