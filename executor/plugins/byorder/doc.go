// Package byorder preempts by the queue order itself: a job may displace
// running jobs whose first key element is worse than its own by more than
// a margin, worst first. With srtf it is SRTF's preemption (the margin, in
// seconds of remaining time, keeps near-ties from trading places); with
// tiresias a margin below one means "a strictly lower queue".
package byorder
