// Package leastlostwork chooses preemption victims that lose the least: a
// job may displace running jobs of a lower tier; an urgent deadline job
// also running jobs of its own tier that have no deadline; and, with
// ShorterBy set, any job also running jobs of its own tier whose order key
// says they have far longer left (shortest remaining time first on
// forecasts). Jobs that started less than MinRun ago are spared. Victims go
// lowest tier first, then least GPU-work since their last checkpoint.
package leastlostwork
