// Package sjf orders the queue shortest job first by the forecast P50 run
// time of the whole job. Fed an exact oracle and run without preemption, it
// is sjf-oracle.
package sjf
