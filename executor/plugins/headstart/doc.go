// Package headstart orders the queue by submit time plus the job's
// estimate (its P90 run time still needed): a short job is queued as if
// it had come earlier by the difference. Jobs of one length stay first
// come, first served, and a long job is passed only by jobs that would
// also end sooner had each started when it came, so nothing starves.
//
// It is, nearly, the order a Slurm site gets when Prescient sets each
// pending job's Nice to its estimate in age-factor points
// (slurm.HeadStartNice): Slurm's multifactor age factor then counts the
// job's wait less its estimate. Slurm differs in that it counts age from
// when a job became eligible (not from submission), stops counting at
// PriorityMaxAge, gets estimates rounded to Nice points, and puts jobs of
// a week or longer in submit order.
package headstart
