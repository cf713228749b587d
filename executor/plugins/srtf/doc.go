// Package srtf orders jobs, queued and running, shortest remaining time
// first by the forecast P50 less the progress kept. With an exact oracle and
// a byorder preemptor it is srtf-oracle.
package srtf
