// Package youngdaly sets a running job's checkpoint interval by Young and
// Daly's first-order optimum, sqrt(2·C·M), where C is the job's checkpoint
// cost and M the mean time to its next interruption: 1 / (nodes/node MTBF +
// preemption rate). With neither failures nor preemptions expected, or a job
// that cannot checkpoint, it asks for none.
package youngdaly
