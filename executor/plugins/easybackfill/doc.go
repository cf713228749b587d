// Package easybackfill is Slurm-style EASY backfilling's reservation rule:
// the first job in FIFO order that does not fit gets a reservation. The
// planner sets it at the job's shadow time (the first expected P90 end of a
// running job after which the job can be placed) on the GPUs it would get
// then; a later job may start only if its runtime estimate (the forecast
// P90) ends before the shadow time or it fits outside the reserved GPUs.
package easybackfill
