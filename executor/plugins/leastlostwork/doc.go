// Package leastlostwork chooses preemption victims that lose the least: a
// job may displace running jobs of a lower tier, and an urgent deadline job
// also running jobs of its own tier that have no deadline. Victims go lowest
// tier first, then least GPU-work since their last checkpoint.
package leastlostwork
