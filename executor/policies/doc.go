// Package policies names the executor's policies: each is a set of plugins
// (queue order, blocking mode, preemption, placement, checkpoint timing)
// assembled by one constructor in a registry, so a policy is added by adding
// a registry entry, not by growing a switch in the planner.
package policies
