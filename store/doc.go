// Package store is the control plane's durable state: jobs, the events of
// their lives, and the advisor's recommendations, kept in one embedded SQLite
// file (pure-Go driver, WAL mode, synchronous=FULL) so that nothing the
// control plane has acknowledged is lost when the process or the machine dies.
//
// Open applies the schema migrations the file lacks. Every write is one
// transaction: a job and its submitted event land together or not at all, and
// UpdateJob is a read-modify-write that goes through cluster.Job's state
// machine and records the change as an Event. StartJob records a start and
// the job's Placement (attempt and GPU shares) together, so a restarted
// control plane knows what runs where. A Store is safe for concurrent
// use; writes are serialised on one connection, reads run in parallel.
package store
