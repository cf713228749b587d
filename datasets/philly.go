package datasets

import (
	"io"
	"strconv"

	"github.com/prescient-sched/prescient/cluster"
)

// The Philly job table (philly_jobs.csv, as processed for the Pollux
// artifact): one row per job, not sorted by time.
//
//	timestamp,duration,num_gpus,gpu_time,cluster
//	2017-10-09 07:01:55,66.0,1,66.0,11cb48
//
// timestamp is the submit time (UTC), duration the run time in seconds,
// cluster the virtual cluster, which becomes the job's tenant. gpu_time
// (duration × num_gpus) is required in the header but not read.
const phillyDoc = "Microsoft Philly job table (philly_jobs.csv: timestamp,duration,num_gpus,gpu_time,cluster); " +
	"virtual cluster = tenant, every job succeeded, run time known but not start/end"

var phillyColumns = []string{"timestamp", "duration", "num_gpus", "gpu_time", "cluster"}

func init() {
	registerTrace(TraceFormat{Name: "philly", Doc: phillyDoc, Read: readPhilly})
}

// readPhilly reads the Philly job table. The table has no status, so every
// job is succeeded with one attempt; StartTime and EndTime stay zero (only
// the run time is known). IDs are "philly-<line>".
func readPhilly(r io.Reader, file string, opt ReadOptions) (Result, error) {
	p := phillyParser{tenants: make(map[string]string)}
	return readCSVJobs(r, file, opt, phillyColumns, false, p.job)
}

// phillyParser holds one read's state: the tenant names seen so far, so
// that 74,000 jobs share 15 strings.
type phillyParser struct {
	tenants map[string]string
}

func (p phillyParser) job(t *csvTable) (cluster.Job, error) {
	colTime, colDur, colGPUs, colVC := t.col("timestamp"), t.col("duration"), t.col("num_gpus"), t.col("cluster")
	submit, err := ParseTime(t.rec[colTime])
	if err != nil {
		return cluster.Job{}, t.fieldError(colTime, err)
	}
	run, err := parseSeconds(t.rec[colDur])
	if err != nil {
		return cluster.Job{}, t.fieldError(colDur, err)
	}
	gpus, err := parseCount(t.rec[colGPUs], MaxJobGPUs)
	if err != nil {
		return cluster.Job{}, t.fieldError(colGPUs, err)
	}
	if t.rec[colVC] == "" {
		return cluster.Job{}, t.fieldError(colVC, errEmpty)
	}
	spec := cluster.JobSpec{Tenant: p.intern(t.rec[colVC]), Tier: cluster.DefaultTier, GPUs: int(gpus)}
	if gpus > 0 {
		spec.GPUMilli = cluster.MilliGPU
	}
	job := cluster.NewJob(cluster.JobID("philly-"+strconv.Itoa(t.line)), spec, submit)
	job.State, job.Attempts, job.Outcome.RunTime = cluster.StateSucceeded, 1, run
	return job, nil
}

func (p phillyParser) intern(s string) string {
	if v, ok := p.tenants[s]; ok {
		return v
	}
	p.tenants[s] = s
	return s
}
