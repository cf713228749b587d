package service

import (
	"context"
	"errors"
	"time"

	"github.com/prescient-sched/prescient/cluster"
)

// Service is what the HTTP API asks of the control plane. Authorization is
// the API's: Service trusts the tenant it is given. Errors that are the
// caller's fault wrap ErrInvalid, ErrNotFound or ErrConflict so that the API
// can answer 400, 404 or 409.
type Service interface {
	// Submit accepts a job: once it returns, the job is durable and will be
	// planned. The job's tenant is the caller's.
	Submit(ctx context.Context, req SubmitRequest) (JobStatus, error)
	Jobs(ctx context.Context, q JobQuery) ([]JobStatus, error)
	Job(ctx context.Context, id cluster.JobID) (JobStatus, error)
	// JobTenant is the tenant of a job (ErrNotFound for none): what a
	// check of who may see it needs, without the status's forecast,
	// history and energy, which Job reads.
	JobTenant(ctx context.Context, id cluster.JobID) (string, error)
	// JobEvents is a job's history, oldest first: every state change with
	// its reason (submit, start, checkpoint, preemption, requeue, failed
	// start, exit).
	JobEvents(ctx context.Context, id cluster.JobID) ([]JobEvent, error)
	// JobLog is the end of an attempt's log (0: the newest attempt), up to
	// maxBytes, on each node it ran on, or why a node's is unavailable.
	// A job that never started has none (ErrNotFound).
	JobLog(ctx context.Context, id cluster.JobID, attempt, maxBytes int) (JobLog, error)
	// Cancel cancels a queued job or stops a running one.
	Cancel(ctx context.Context, id cluster.JobID) (JobStatus, error)

	Fleet(ctx context.Context) (FleetState, error)
	Predict(ctx context.Context, specs []cluster.JobSpec) ([]Forecast, error)
	Recommendations(ctx context.Context, since time.Time, limit int) ([]Recommendation, error)
	WhatIf(ctx context.Context, req WhatIfRequest) (WhatIfResult, error)
	// IdleForecast forecasts which GPUs will be idle, when and for how
	// long.
	IdleForecast(ctx context.Context, q IdleQuery) (IdleForecast, error)
	Stats(ctx context.Context, q StatsQuery) (Stats, error)
	// Tenants are the tenants in force, where they come from and their
	// use of their quotas (admin).
	Tenants(ctx context.Context) (TenantsInfo, error)

	Models(ctx context.Context) ([]ModelVersion, error)
	// Retrain starts a retraining run now; it returns once the run is
	// started (the models list shows its result).
	Retrain(ctx context.Context) error
	// Rollback makes version `to` of target current; to 0 means the one
	// before the current.
	Rollback(ctx context.Context, target string, to int) (ModelVersion, error)

	Mode() Mode
	SetMode(ctx context.Context, m Mode) error
}

// Errors a Service wraps so that the API can pick the status.
var (
	ErrInvalid  = errors.New("invalid request")
	ErrNotFound = errors.New("not found")
	ErrConflict = errors.New("conflict")
)

// Mode is what the control plane does with a plan.
type Mode string

// The modes.
const (
	ModeAdvisor   Mode = "advisor"   // record recommendations, change nothing
	ModeAutopilot Mode = "autopilot" // act through the backend
)

// SubmitRequest is a job as a client submits it.
type SubmitRequest struct {
	// ID is optional; a given ID makes the submission idempotent (the same
	// ID again answers the stored job with ErrConflict when its spec
	// differs).
	ID   cluster.JobID
	Spec cluster.JobSpec
	// Command is what the agent runs (argv); empty for the simulated
	// backend and for Kubernetes, whose pods say it.
	Command []string
	// Env is added to the process's environment.
	Env map[string]string
}

// JobQuery filters a job listing.
type JobQuery struct {
	Tenant string             // "" for all
	States []cluster.JobState // empty for all
	Limit  int                // 0 for DefaultJobsLimit
	// Labels keeps jobs whose labels include all of these.
	Labels map[string]string
	// After continues a listing after this job, the last of the previous
	// page; a job not among those the query selects is ErrInvalid.
	After cluster.JobID
}

// DefaultJobsLimit is how many jobs Jobs lists when the query says 0.
const DefaultJobsLimit = 100

// JobStatus is a job as the API shows it.
type JobStatus struct {
	ID         cluster.JobID     `json:"id"`
	Name       string            `json:"name,omitempty"`
	Tenant     string            `json:"tenant"`
	User       string            `json:"user,omitempty"`
	Tier       string            `json:"tier"`
	GPUs       int               `json:"gpus"`
	GPUMilli   int               `json:"gpu_milli"`
	Labels     map[string]string `json:"labels,omitempty"`
	State      cluster.JobState  `json:"state"`
	Attempts   int               `json:"attempts"`
	SubmitTime time.Time         `json:"submit_time"`
	StartTime  *time.Time        `json:"start_time,omitempty"`
	EndTime    *time.Time        `json:"end_time,omitempty"`
	Deadline   *time.Time        `json:"deadline,omitempty"`
	// GPUs the current attempt holds, as "node/gpuN".
	Placement []string `json:"placement,omitempty"`
	// Reason is why it waits, or why it runs where it runs.
	Reason   string    `json:"reason,omitempty"`
	Forecast *Forecast `json:"forecast,omitempty"`
	// DeadlineFeasible is whether the deadline can still be met (nil when
	// the job has none).
	DeadlineFeasible *bool      `json:"deadline_feasible,omitempty"`
	LatestStart      *time.Time `json:"latest_start,omitempty"`
	// Predicted start and end from the current plan, when known. A
	// queued job the queue forecast did not see start within its horizon
	// has PredictedStartAfter, the horizon, instead: it starts later.
	PredictedStart      *time.Time `json:"predicted_start,omitempty"`
	PredictedEnd        *time.Time `json:"predicted_end,omitempty"`
	PredictedStartAfter *time.Time `json:"predicted_start_after,omitempty"`
	ExitCode            *int       `json:"exit_code,omitempty"`
	LastCheckpoint      *time.Time `json:"last_checkpoint,omitempty"`
	// LastError is the reason of the job's newest failure, failed start or
	// requeue (a lost node, say); Job fills it, the listing leaves it out.
	LastError string `json:"last_error,omitempty"`
	// History is the job's attempts, oldest first, and RunS, GPUHours and
	// EnergyKWh their sums (a running attempt counted to now); Job fills
	// them, the listing leaves them out. EnergyKWh is nil when an
	// attempt's energy is unavailable.
	History   []JobAttempt `json:"history,omitempty"`
	RunS      float64      `json:"run_s,omitempty"`
	GPUHours  float64      `json:"gpu_hours,omitempty"`
	EnergyKWh *float64     `json:"energy_kwh,omitempty"`
}

// JobLog is the end of one attempt's log on each node it ran on.
type JobLog struct {
	Job     cluster.JobID `json:"job"`
	Attempt int           `json:"attempt"`
	Nodes   []NodeLog     `json:"nodes"`
}

// NodeLog is the end of an attempt's log on one node.
type NodeLog struct {
	Node string `json:"node"`
	Text string `json:"text"`
	// Truncated is set when the log is longer than Text, which then
	// starts at a line.
	Truncated bool `json:"truncated,omitempty"`
	// Unavailable says why there is no text (the node is gone, its agent
	// silent, the backend keeps no logs).
	Unavailable string `json:"unavailable,omitempty"`
}

// DefaultLogBytes and MaxLogBytes bound the log tail JobLog returns.
const (
	DefaultLogBytes = 64 << 10
	MaxLogBytes     = 1 << 20
)

// JobAttempt is one run of a job: where, from when to when, what ended it
// and what it used.
type JobAttempt struct {
	Attempt int `json:"attempt"`
	// Allocations are the GPU shares it held; none for an attempt
	// recorded before their recording began.
	Allocations []GPUShare `json:"allocations,omitempty"`
	StartTime   time.Time  `json:"start_time"`
	EndTime     *time.Time `json:"end_time,omitempty"`
	// EndedBy is the event that ended it (finished, failed, cancelled,
	// preempted, requeued, start_failed); empty while it runs.
	EndedBy  string  `json:"ended_by,omitempty"`
	Message  string  `json:"message,omitempty"`
	RunS     float64 `json:"run_s"`
	GPUHours float64 `json:"gpu_hours"`
	// EnergyKWh is its GPU shares' energy from power telemetry; nil when
	// unavailable, and EnergyUnavailable says why.
	EnergyKWh         *float64 `json:"energy_kwh,omitempty"`
	EnergyUnavailable string   `json:"energy_unavailable,omitempty"`
}

// GPUShare is a share of one GPU, in thousandths.
type GPUShare struct {
	Node  string `json:"node"`
	GPU   int    `json:"gpu"`
	Milli int    `json:"milli"`
}

// JobEvent is one step of a job's history: the store's event types
// (submitted, started, checkpoint_requested, checkpointed,
// checkpoint_abandoned, preempted, requeued, start_failed, finished,
// failed, cancelled), the states it moved between, and why.
type JobEvent struct {
	Time    time.Time        `json:"time"`
	Type    string           `json:"type"`
	From    cluster.JobState `json:"from,omitempty"`
	To      cluster.JobState `json:"to"`
	Message string           `json:"message,omitempty"`
}

// Forecast is a job's forecast as the API shows it.
type Forecast struct {
	Job            cluster.JobID `json:"job,omitempty"`
	DurationP50S   float64       `json:"duration_p50_s"`
	DurationP90S   float64       `json:"duration_p90_s"`
	MemoryP90Bytes int64         `json:"memory_p90_bytes,omitempty"`
	// MemoryP90RefinedBytes is a running job's P90 peak GPU memory over the
	// next 2 h, re-forecast from its own memory series once it has run 10
	// minutes; the plans use it instead of MemoryP90Bytes.
	MemoryP90RefinedBytes int64  `json:"memory_p90_refined_bytes,omitempty"`
	Source                string `json:"source"`
}

// FleetState is the fleet now.
type FleetState struct {
	Time     time.Time   `json:"time"`
	Nodes    []NodeState `json:"nodes"`
	GPUs     int         `json:"gpus"`
	GPUsBusy float64     `json:"gpus_busy"` // allocated, in whole GPUs
	Queued   int         `json:"queued"`
	Running  int         `json:"running"`
	Mode     Mode        `json:"mode"`
}

// NodeState is one node now.
type NodeState struct {
	Name  string     `json:"name"`
	State string     `json:"state"` // ready, draining, down; parked, waking (Config.Parking)
	Agent bool       `json:"agent"` // an agent is connected (agent backend)
	GPUs  []GPUState `json:"gpus"`
	// Loan is an inference node's loan to training (Config.Lending); nil
	// for the other nodes.
	Loan *NodeLoan `json:"loan,omitempty"`
}

// GPUState is one GPU now: what holds it and what telemetry last said.
type GPUState struct {
	Index          int             `json:"index"`
	Model          string          `json:"model"`
	MemoryBytes    int64           `json:"memory_bytes"`
	AllocatedMilli int             `json:"allocated_milli"`
	Jobs           []cluster.JobID `json:"jobs,omitempty"`
	// From the latest telemetry sample; nil when none is recent.
	UtilizationPct  *float64 `json:"utilization_pct,omitempty"`
	MemoryUsedBytes *int64   `json:"memory_used_bytes,omitempty"`
	PowerW          *float64 `json:"power_w,omitempty"`
}

// Recommendation is something the advisor recommends.
type Recommendation struct {
	ID      int64          `json:"id"`
	Time    time.Time      `json:"time"`
	Job     cluster.JobID  `json:"job,omitempty"`
	Kind    string         `json:"kind"`
	Reason  string         `json:"reason"`
	Status  string         `json:"status"`
	Details map[string]any `json:"details,omitempty"`
}

// WhatIfRequest changes the live state hypothetically.
type WhatIfRequest struct {
	AddJobs     []SubmitRequest
	RemoveJobs  []cluster.JobID
	AddNodes    []cluster.Node
	RemoveNodes []string
	// Policy replaces the queue policy ("" keeps the current one).
	Policy string
	// Tenants replace the tenants in force (nil keeps them): a changed
	// copy of the tenants file, tried before it is applied.
	Tenants []cluster.Tenant
	// Horizon bounds how far forward it simulates (0: until the queue
	// empties or 7 days).
	Horizon time.Duration
}

// WhatIfResult is the hypothetical plan against the current one.
type WhatIfResult struct {
	Policy string      `json:"policy"`
	Jobs   []WhatIfJob `json:"jobs"`
	// Summary figures of both plans.
	Baseline WhatIfSummary `json:"baseline"`
	Scenario WhatIfSummary `json:"scenario"`
	// Horizon, when set, is how far ahead both plans were followed:
	// starts and ends after it are not known, and the jobs that start
	// later say so (BeyondHorizon). HorizonReason says what set it: the
	// request's horizon ("horizon"), the compute budget of an answer
	// ("budget") or jobs that nothing would start ("stalled"). Without a
	// horizon every job started and ended in both plans.
	Horizon       *time.Time `json:"horizon,omitempty"`
	HorizonReason string     `json:"horizon_reason,omitempty"`
	WallS         float64    `json:"wall_s"`
}

// WhatIfJob is one job's predicted start and finish in both plans.
type WhatIfJob struct {
	Job              cluster.JobID `json:"job"`
	Hypothetical     bool          `json:"hypothetical,omitempty"`
	Start            *time.Time    `json:"start,omitempty"`
	End              *time.Time    `json:"end,omitempty"`
	BaselineStart    *time.Time    `json:"baseline_start,omitempty"`
	BaselineEnd      *time.Time    `json:"baseline_end,omitempty"`
	DeltaEndS        *float64      `json:"delta_end_s,omitempty"`
	DeadlineFeasible *bool         `json:"deadline_feasible,omitempty"`
	// BeyondHorizon and BaselineBeyondHorizon: the job starts after the
	// result's horizon in the scenario and in the baseline, where Start
	// and BaselineStart are left out. A start with no end ends after it.
	BeyondHorizon         bool `json:"beyond_horizon,omitempty"`
	BaselineBeyondHorizon bool `json:"baseline_beyond_horizon,omitempty"`
}

// WhatIfSummary sums up one plan: the mean wait of the jobs that start
// in it (within the horizon), the time until the last of them ends (the
// horizon, when jobs are left after it), the deadlines met of those
// known by then, and how many jobs start after the horizon.
type WhatIfSummary struct {
	MeanWaitS      float64 `json:"mean_wait_s"`
	MakespanS      float64 `json:"makespan_s"`
	DeadlinesMet   int     `json:"deadlines_met"`
	DeadlinesTotal int     `json:"deadlines_total"`
	BeyondHorizon  int     `json:"beyond_horizon"`
}

// StatsQuery asks for the dashboard's figures over a window ending now.
type StatsQuery struct {
	Window time.Duration // 0 for 24h
	Step   time.Duration // 0 for Window/96
}

// Stats are the dashboard's figures.
type Stats struct {
	From  time.Time `json:"from"`
	Until time.Time `json:"until"`
	// Utilization and power over time, fleet-wide.
	Series []StatsPoint `json:"series"`
	// Queue wait by tier and by tenant, of jobs that started in the window.
	WaitByTier   []WaitStat `json:"wait_by_tier"`
	WaitByTenant []WaitStat `json:"wait_by_tenant"`
	// Completions and failures in the window, with the reasons of failures.
	Completed int             `json:"completed"`
	Failed    int             `json:"failed"`
	Failures  []FailureReason `json:"failures"`
	// Cost per workload (tenant, and label "workload" when set).
	Cost []CostStat `json:"cost"`
	// Forecasts against actuals of jobs that finished in the window.
	Forecasts []ForecastCheck `json:"forecasts"`
	// Quotas are the tenants' GPUs held against their quotas, as of the
	// last plan cycle.
	Quotas []QuotaUsage `json:"quotas"`
}

// QuotaUsage is a tenant's GPUs of one flavour (a GPU model, "" for any
// model its other quotas do not name) held against its nominal quota;
// borrowed is what it holds beyond it, lent by its cohort.
type QuotaUsage struct {
	Tenant             string `json:"tenant"`
	Cohort             string `json:"cohort,omitempty"`
	Model              string `json:"model"`
	NominalGPUs        int    `json:"nominal_gpus"`
	BorrowingLimitGPUs *int   `json:"borrowing_limit_gpus,omitempty"`
	LendingLimitGPUs   *int   `json:"lending_limit_gpus,omitempty"`
	HeldGPUs           int    `json:"held_gpus"`
	BorrowedGPUs       int    `json:"borrowed_gpus"`
}

// TenantsInfo is what GET /v1/tenants shows. Source says where the
// tenants come from: "file" (serve --tenants; File says its state),
// "fleet" (a fleet file's or the demo's) or "none".
type TenantsInfo struct {
	Source  string             `json:"source"`
	File    *TenantsFileStatus `json:"file,omitempty"`
	Tenants []TenantInfo       `json:"tenants"`
	// At is the plan cycle the usage is of (zero before the first).
	At time.Time `json:"at"`
}

// TenantsFileStatus is the state of a tenants file: when the tenants in
// force were read and their hash, and the error of the last read if it
// failed (the tenants in force are then the last good ones).
type TenantsFileStatus struct {
	Path      string    `json:"path"`
	LoadedAt  time.Time `json:"loaded_at"`
	SHA256    string    `json:"sha256"`
	LastError string    `json:"last_error,omitempty"`
}

// TenantInfo is one tenant in force and its use of its quotas.
type TenantInfo struct {
	Name           string       `json:"name"`
	Weight         float64      `json:"weight"`
	Cohort         string       `json:"cohort,omitempty"`
	Tiers          []string     `json:"tiers"`
	MaxRunningJobs int          `json:"max_running_jobs"`
	Reclaim        string       `json:"reclaim"`
	RunningJobs    int          `json:"running_jobs"`
	Quotas         []QuotaUsage `json:"quotas"`
}

// StatsPoint is one step of the fleet's series.
type StatsPoint struct {
	Time           time.Time `json:"time"`
	GPUsBusy       float64   `json:"gpus_busy"`
	UtilizationPct float64   `json:"utilization_pct"` // mean over GPUs, from telemetry
	PowerW         float64   `json:"power_w"`
	Queued         int       `json:"queued"`
}

// WaitStat is the queue wait of one group.
type WaitStat struct {
	Key   string  `json:"key"`
	Jobs  int     `json:"jobs"`
	MeanS float64 `json:"mean_s"`
	P90S  float64 `json:"p90_s"`
}

// FailureReason counts failures with one reason.
type FailureReason struct {
	Reason string `json:"reason"`
	Count  int    `json:"count"`
}

// CostStat is what one workload used, at the configured prices.
type CostStat struct {
	Workload  string  `json:"workload"`
	GPUHours  float64 `json:"gpu_hours"`
	EnergyKWh float64 `json:"energy_kwh"`
	Cost      float64 `json:"cost"`
	Currency  string  `json:"currency"`
}

// ForecastCheck compares a finished job's forecast with what it took.
type ForecastCheck struct {
	Job          cluster.JobID `json:"job"`
	DurationP50S float64       `json:"duration_p50_s"`
	DurationP90S float64       `json:"duration_p90_s"`
	ActualS      float64       `json:"actual_s"`
}

// ModelVersion is one published model.
type ModelVersion struct {
	Target  string `json:"target"`
	Version int    `json:"version"`
	Current bool   `json:"current"`
	// Serving: forecasts come from this version now (where CURRENT's did
	// not load, another version serves).
	Serving   bool                          `json:"serving"`
	CreatedAt time.Time                     `json:"created_at"`
	Selected  string                        `json:"selected"`
	Metrics   map[string]map[string]float64 `json:"metrics"`
	DataFrom  time.Time                     `json:"data_from"`
	DataUntil time.Time                     `json:"data_until"`
}
