// Package collector samples GPU telemetry and streams it to a sink: InfluxDB
// in production, the embedded store on a laptop. It owns the sampling loop,
// the Sample type, the sinks and the on-disk spool that keeps samples while
// the database is away. It makes no decisions.
//
// For now it holds the InfluxDB bucket check that every writer runs first;
// the sampling loop and sinks arrive with the collector issue.
package collector
