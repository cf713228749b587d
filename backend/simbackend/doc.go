// Package simbackend is an executor.Backend that runs jobs on the wall
// clock without processes: a started job "works" for the duration a
// function gives (its label, a forecast, a synthetic draw), writes a
// checkpoint when asked or at its periodic interval, stops when told, and
// reports all of it as executor.JobEvents. It backs `prescient serve
// --backend sim` and the control plane's tests.
//
// Progress is kept in a checkpoint's Step as milliseconds of work done, so
// an attempt that resumes from a checkpoint needs only the rest.
package simbackend
