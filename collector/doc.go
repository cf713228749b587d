// Package collector samples GPU telemetry and streams it to a sink: InfluxDB
// in production, the embedded store on a laptop. It makes no decisions.
//
// A Collector reads every device of its hosts (collector/nvml) each
// interval into Samples, naming the job of each GPU process through a
// JobRegistry. A Writer, the one place where batching, retries and the
// spool live, writes them to a Sink (InfluxSink, EmbeddedSink); what the
// sink cannot take for a while goes to the on-disk Spool and is written
// back in order. TelemetryStore (InfluxQuery with Flux, EmbeddedSink with
// SQL) reads series back for training and the predictor; ReadSeries and
// ParseSeriesSelector give them to training as datasets.Series (--series
// influx:SELECTOR). JobMemoryStore (the same two) reads the GPU memory of
// jobs' processes: finished jobs' peaks for retraining, running jobs'
// series for the control plane's memory refinement. EnsureBucket is
// the bucket check every InfluxDB writer runs first.
package collector
