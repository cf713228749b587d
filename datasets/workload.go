package datasets

import "github.com/prescient-sched/prescient/cluster"

// Assumptions of the generator that no dataset here measures. They exist so
// that synthetic jobs carry the labels and outcomes later parts train on,
// with a dependence a model can learn; they are rough figures for the
// Philly era (P100 and P40 GPUs of 12-24 GB, 250 W), not measurements.

// workload is a model family a synthetic job trains.
type workload struct {
	model, framework string
	share            float64 // of jobs
	batchSizes       []int   // drawn uniformly; the middle one is the reference
	memGiB           float64 // peak GPU memory per GPU at the reference batch size
	powerW           float64 // mean board power while it runs
}

// workloads are the model families of synthetic jobs, after the job types
// Gavel measured (shared/datasets/gavel) plus an LSTM language model and
// BERT. Peak memory scales with (batch / reference batch)^0.6, times
// lognormal noise (sigma 0.15), within [minJobMemGiB, maxJobMemGiB]; power
// is powerW times lognormal noise (sigma 0.1), within [minJobPowerW,
// maxJobPowerW]; energy is power × run time × GPUs.
var workloads = []workload{
	{"resnet50", "pytorch", 0.22, []int{32, 64, 128}, 7.5, 210},
	{"resnet18", "pytorch", 0.10, []int{64, 128, 256}, 3.5, 170},
	{"transformer", "pytorch", 0.15, []int{32, 64, 128}, 10, 220},
	{"lstm-lm", "cntk", 0.20, []int{20, 40, 80}, 5, 150},
	{"recommendation", "tensorflow", 0.10, []int{512, 1024, 2048}, 4, 120},
	{"a3c", "tensorflow", 0.05, []int{4, 8, 16}, 2, 90},
	{"cyclegan", "pytorch", 0.06, []int{1, 2, 4}, 8, 200},
	{"bert", "tensorflow", 0.12, []int{16, 32, 64}, 14, 230},
}

const (
	memBatchExponent = 0.6
	memNoiseSigma    = 0.15
	minJobMemGiB     = 0.25
	maxJobMemGiB     = 24 // the larger Philly GPU (P40)
	powerNoiseSigma  = 0.1
	minJobPowerW     = 50  // about idle
	maxJobPowerW     = 250 // P100/P40 board limit
)

// defaultTierMix is the tier mix of GenerateConfig.TierMix when nil.
var defaultTierMix = map[cluster.Tier]float64{
	cluster.TierProduction:    0.10,
	cluster.TierStandard:      0.50,
	cluster.TierBatch:         0.25,
	cluster.TierOpportunistic: 0.15,
}

// Further assumptions.
const (
	checkpointableShare  = 0.5      // of jobs
	checkpointInterval   = 30 * 60  // seconds between a job's checkpoints
	checkpointSteps      = 1000     // training steps per checkpoint interval
	usersPerTenant       = 8        // users of a tenant, drawn with Zipf exponent 1
	gangGPUsPerTask      = 8        // a job of more GPUs runs as ceil(GPUs/8) tasks
	deadlineSlackMin     = 1.5      // deadline = submit + run × U(min, max) + grace
	deadlineSlackMax     = 4.0      //
	deadlineGraceS       = 30 * 60  //
	exitFailed           = 1        // exit code of a failed job
	exitCancelled        = 128 + 15 // killed by SIGTERM
	checkpointBaseCostS  = 5        // cost = base + GiB × per-GiB × U(0.5, 1.5)
	checkpointCostPerGiB = 2        //
)
