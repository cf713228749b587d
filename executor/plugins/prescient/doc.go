// Package prescient holds the plugins of the prescient policy: the queue
// order (tiers; urgent deadline jobs by latest start; jobs starving for a
// day in queue order; then predicted shortest remaining time first, scaled
// by fair share and aged by wait) and the reserver (reservations for urgent
// deadline jobs and for starving jobs). Its preemptor is leastlostwork
// with ShorterBy set, which makes the order preemptive: shortest predicted
// remaining time first, the victim checkpointing before it stops.
package prescient
