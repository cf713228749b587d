package datasets

// Calibration of the synthetic generator. Unless a comment says otherwise,
// every figure here was measured once from the Philly job table,
// shared/datasets/philly/philly_jobs.csv (74,167 jobs submitted
// 2017-09-04 10:30:41 .. 2017-11-30 23:52:11, times read as UTC), by a
// throwaway program outside the repository. TestGenerateMatchesPhilly
// re-measures the file and fails when the generator drifts from it.

// phillyWindow describes the span the arrival figures come from: the first
// day with at least 100 submissions (2017-09-24; the three weeks before hold
// 70 jobs, the trace warming up) to the end of the file, 2017-12-01 00:00,
// 68 days: 74,098 jobs.
const (
	phillyWindowJobs  = 74098
	phillyWindowHours = 68 * 24
	// phillyJobsPerHour is the mean arrival rate over the window.
	phillyJobsPerHour = float64(phillyWindowJobs) / phillyWindowHours // 45.40
)

// phillyHourFactor is the arrival rate by hour of day (0..23) relative to
// the mean (the factors average 1): jobs submitted in that hour over the
// window divided by 74,098/24.
var phillyHourFactor = [24]float64{
	1.302, 1.018, 1.138, 1.068, 0.542, 1.120, 1.733, 2.087, 1.075, 0.960, 1.009, 0.853,
	0.769, 0.686, 0.637, 0.675, 0.909, 0.678, 0.821, 0.703, 1.066, 0.919, 1.185, 1.048,
}

// phillyWeekdayFactor is the arrival rate by day of week, Sunday first,
// relative to the mean (the factors average 1): jobs per occurrence of the
// weekday in the window (10 of Sunday..Thursday, 9 of Friday and Saturday).
var phillyWeekdayFactor = [7]float64{0.605, 0.856, 1.024, 1.153, 1.267, 1.429, 0.666}

// phillyGPUCounts is the number of jobs by GPU count, whole file.
var phillyGPUCounts = []struct{ gpus, jobs int }{
	{1, 69294}, {2, 1530}, {4, 1687}, {8, 1444}, {12, 7}, {16, 162}, {24, 6}, {32, 37},
}

// phillyQuantileLevels are the levels of phillyRunTimeQuantiles.
var phillyQuantileLevels = []float64{0, 0.01, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 0.999, 1}

// phillyRunTimeQuantiles are run-time quantiles in seconds (interpolated
// between the nearest ranks) by GPU count, whole file. The generator draws
// between them log-linearly, which keeps the heavy tail (P99 is 100-1000×
// the median). 2-GPU jobs really are that odd: most ran 5-30 s, a tenth ran
// for a day or more.
var phillyRunTimeQuantiles = []runTimeRow{
	{1, []float64{1, 31, 52, 62, 78, 266, 668, 1192, 1793, 2461, 3761, 8347, 16697, 123195, 929633, 3256045}},                          // 69,294 jobs
	{2, []float64{2, 5, 9, 11, 14, 16, 18, 20, 22, 29, 239, 91448, 217129, 555008, 1490760, 2582803}},                                  // 1,530 jobs
	{4, []float64{9, 37, 80, 136, 342, 1236, 7803, 17388, 36098, 74945, 102691, 184899, 289038, 1006334, 2487421, 2750674}},            // 1,687 jobs
	{8, []float64{9, 37, 95, 199, 623, 3937, 12568, 25536, 73568, 150799, 206309, 367120, 561767, 1094318, 2657194, 4628226}},          // 1,444 jobs
	{MaxJobGPUs, []float64{20, 30, 46, 118, 345, 711, 24245, 51859, 62694, 101459, 167683, 325015, 505050, 1123667, 1638741, 1710643}}, // 212 jobs (12-32 GPUs)
}

// runTimeRow holds the run-time quantiles of jobs with up to maxGPUs GPUs
// (and more than the row before).
type runTimeRow struct {
	maxGPUs int
	runS    []float64
}

// runTimeRowFor returns the index of the row that covers jobs of gpus GPUs.
func runTimeRowFor(gpus int) int {
	for i, row := range phillyRunTimeQuantiles {
		if gpus <= row.maxGPUs {
			return i
		}
	}
	return len(phillyRunTimeQuantiles) - 1
}

// phillyTenantZipf is the exponent s of the tenant skew: the job count of
// the virtual cluster of rank r falls as 1/r^s. A least-squares fit of
// log(jobs) on log(rank) over the 11 virtual clusters with more than 300
// jobs (37,755 .. 320; the other 4 have 2-8 jobs) gives 2.05.
const phillyTenantZipf = 2.05

// phillyTenants is the number of virtual clusters with more than a handful
// of jobs (the same 11 that philly_vc.csv lists): the default tenant count.
const phillyTenants = 11

// Job outcomes. The Philly job table has no status; these shares come from
// shared/datasets/acme-summary/cluster_summary.csv, row Philly (AcmeTrace's
// summary of the full Philly trace, GPU jobs): complete_rate_gpu 0.604,
// cancel_rate_gpu 0.09, fail_rate_gpu 0.305 (they sum to 0.999 and are used
// as weights). The generator draws the outcome independently of the run
// time: the table has nothing to tie them.
const (
	phillySucceededShare = 0.604
	phillyCancelledShare = 0.09
	phillyFailedShare    = 0.305
)

// Queueing delay (submit to start) is lognormal with the median and mean of
// the same AcmeTrace row: med_que_time_gpu 189 s, avg_que_time_gpu
// 3,760.604 s, so sigma = sqrt(2 ln(mean/median)) = 2.45. Draws are capped at
// maxQueueDelayS.
const (
	phillyQueueMedianS = 189
	phillyQueueMeanS   = 3760.604
	maxQueueDelayS     = 14 * 24 * 3600
)
