// Package cluster is the domain model every other Prescient package speaks:
// jobs and their specs, priority tiers and the job state machine, nodes, GPUs
// and their topology, tenants, and a Snapshot of the fleet with what is
// allocated. It also reads the fleet file, Prescient's own YAML
// description of a fleet (see examples/fleet.yaml).
//
// The package imports no other Prescient package; everything else imports it.
package cluster
