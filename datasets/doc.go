// Package datasets reads the job traces Prescient learns from and replays:
// public GPU-cluster traces (Microsoft Philly, Alibaba openb), HPC logs in
// the Standard Workload Format (swf: each job with the user's time limit),
// a Slurm site's own accounting (sacct's text and JSON) and Prescient's own
// JSONL job history, and the fleets they ran on (the
// Philly and openb machine lists, an SWF header's machine, the YAML fleet
// file, uniform fleets), and telemetry series
// (ReadSeries: the Alibaba GenAI per-container GPU memory and duty cycle,
// the Helios virtual clusters' idle GPUs, Philly's idle nodes; a file or a
// folder of files). It also generates seeded synthetic workloads
// calibrated to the Philly trace, splits job lists
// by time for training and evaluation, and summarizes a trace for
// `prescient datasets inspect`.
//
// Each format lives in its own file and registers itself; ReadTrace,
// ReadFleet and ReadSeries take "FORMAT:PATH" specs and list the formats when one is unknown.
// The package trains no models.
package datasets
