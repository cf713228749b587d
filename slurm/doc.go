// Package slurm reads a live Slurm cluster and acts on it through Slurm's
// own commands: squeue, sinfo (or scontrol show nodes) and sacct with
// --json to read (data parser v0.0.38 of Slurm 22.05, and the {set,
// infinite, number} shapes of v0.0.39 on), scontrol to change a job's
// time limit and AdminComment and to power a node down or up
// (POWER_DOWN_ASAP / POWER_UP, so that the site's own SuspendProgram and
// ResumeProgram do the power work). REST does the same through
// slurmrestd, with the commands for what its version cannot do.
//
// Slurm keeps starting the jobs: Prescient advises (Advise: predicted
// starts and ends, recommended limits) and, where a site opts in, pulls
// Slurm's levers (Decide: pending jobs' limits and Nice, holds, parking
// idle nodes), every change an event, every one undone when autopilot is
// turned off or Prescient stops. The decisions are pure functions of a
// Snapshot and State; Client does the I/O and Runner keeps the state.
// Marks in a job's AdminComment (its user's limit and Nice, a hold's end)
// let a Prescient that lost its state take its changes on; Guard, also
// pure, reads them to give lowered limits back near their end and release
// expired holds from Slurm alone, for when Prescient's host is lost with
// its state.
package slurm
