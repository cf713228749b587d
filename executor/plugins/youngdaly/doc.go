// Package youngdaly sets a running job's checkpoint interval by Young and
// Daly's first-order optimum, sqrt(2·C·M), where C is the job's checkpoint
// cost and M the mean time to its next interruption that loses work: 1 /
// (nodes it spans / node MTBF + rate of preemptions whose checkpoint did not
// land). With neither expected, or a job that cannot checkpoint, it asks
// for none. The interval is kept within [Min, Max]; Max bounds the progress
// one interruption can cost (the prescient policy uses 20 minutes), which
// the optimum itself does not: it minimises the expected sum of checkpoint
// and lost time, and at the failure rates of real fleets lets a job lose
// hours.
package youngdaly
