// Package prescient holds the plugins of the prescient policy: the queue
// order (tiers; urgent deadline jobs by latest start; jobs starving for a
// day in queue order; jobs of tenants that are behind, whose jobs wait
// 1.5 times the fleet's average; then the others; within the last two, by the
// Gittins index of the forecast's log-normal length, scaled by fair share
// of GPU-time and of waiting and aged by wait) and the reserver
// (reservations for urgent deadline jobs, starving jobs and jobs of tenants
// that are behind). Its preemptor is leastlostwork with ShorterBy, ByClass
// and BackOff set, which makes the order preemptive (a shorter job, or one of
// an earlier class, displaces a running one), the victim checkpointing
// before it stops and a job stopped before protected for longer.
//
// Wait fairness answers what fair share of GPU-time does not: on Philly a
// virtual cluster of long multi-GPU jobs waited 25 times the fleet's
// average under shortest-first with preemption, though its GPU-time share
// was in line. The order weighs each tenant by its decayed mean wait per
// job against the fleet's (executor.FairShare.WaitRatio).
package prescient
