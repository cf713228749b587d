package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/service"
)

// Limits on what one request may hold.
const (
	maxGPUsPerJob    = 4096
	maxLabels        = 64
	maxLabelValue    = 256
	maxModels        = 64
	maxNameBytes     = 253
	maxIDBytes       = 256 // a job ID as other sources (traces, Kubernetes) name it
	maxArgs          = 4096
	maxArgBytes      = 128 << 10
	maxEnv           = 256
	maxEnvValue      = 32 << 10
	maxSpecsPerCall  = 1000 // jobs in one predict, jobs or nodes added in one what-if
	maxGPUsPerNode   = 1024
	maxHorizon       = 30 * 24 * time.Hour
	maxCheckpointS   = 7 * 24 * 3600
	maxTimeLimitS    = 365 * 24 * 3600
	maxListLimit     = 1000
	maxStatsWindow   = 90 * 24 * time.Hour
	maxStatsPoints   = 10_000
	maxTenantBytes   = 128
	maxPolicyBytes   = 64
	maxRemovedPerReq = 10_000
)

var (
	// A job ID goes into URL paths and logs: letters, digits, '.', '_',
	// '-', starting with a letter or digit.
	jobIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
	// A label key: letters, digits, '.', '_', '-', '/'.
	labelKeyPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/-]{0,62}$`)
	envNamePattern  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,255}$`)
)

// reservedEnv are variables the agent sets for a job; a job may not set
// them itself (CUDA_VISIBLE_DEVICES would escape its GPUs).
var reservedEnv = []string{"CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES"}

// JobSpecRequest is a job's spec as a client sends it. Durations are
// seconds, times RFC 3339, bytes bytes.
type JobSpecRequest struct {
	Name string `json:"name,omitempty"`
	// Tenant defaults to the token's; only an admin may name another.
	Tenant string `json:"tenant,omitempty"`
	User   string `json:"user,omitempty"`
	// Tier is production, standard (the default), batch or opportunistic.
	Tier string `json:"tier,omitempty"`
	GPUs int    `json:"gpus"`
	// GPUMilli is each GPU's share in thousandths; 0 means whole GPUs.
	GPUMilli        int      `json:"gpu_milli,omitempty"`
	GPUModels       []string `json:"gpu_models,omitempty"`
	CPUMilli        int64    `json:"cpu_milli,omitempty"`
	MemoryBytes     int64    `json:"memory_bytes,omitempty"`
	Deadline        string   `json:"deadline,omitempty"`
	GangSize        int      `json:"gang_size,omitempty"`
	Checkpointable  bool     `json:"checkpointable,omitempty"`
	CheckpointCostS float64  `json:"checkpoint_cost_s,omitempty"`
	// TimeLimitS is the run time the user asks for (a Slurm time limit),
	// kept with the job and read by the forecasts; Prescient's own
	// backends do not stop a job at it. 0 means none.
	TimeLimitS float64           `json:"time_limit_s,omitempty"`
	Labels     map[string]string `json:"labels,omitempty"`
	Data       *DataRequest      `json:"data,omitempty"`
}

// DataRequest is the dataset a job reads and where warm copies sit.
type DataRequest struct {
	Name  string   `json:"name"`
	Bytes int64    `json:"bytes,omitempty"`
	Nodes []string `json:"nodes,omitempty"`
	Racks []string `json:"racks,omitempty"`
}

// maxDataPlaces bounds a dataset's listed nodes and racks.
const maxDataPlaces = 1024

// SubmitRequest is the body of POST /v1/jobs: a spec, an optional ID that
// makes the submission idempotent, and what the agent runs.
type SubmitRequest struct {
	ID string `json:"id,omitempty"`
	JobSpecRequest
	Command []string          `json:"command,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
}

// PredictRequest is the body of POST /v1/predict.
type PredictRequest struct {
	Jobs []JobSpecRequest `json:"jobs"`
}

// PredictResponse answers POST /v1/predict: one forecast per job, in order.
type PredictResponse struct {
	Forecasts []service.Forecast `json:"forecasts"`
}

// NodeRequest is a hypothetical node of a what-if question.
type NodeRequest struct {
	Name     string `json:"name"`
	GPUs     int    `json:"gpus"`
	GPUModel string `json:"gpu_model,omitempty"`
	// GPUMemoryBytes defaults to the catalog's figure for the model.
	GPUMemoryBytes int64  `json:"gpu_memory_bytes,omitempty"`
	Rack           string `json:"rack,omitempty"`
	Leaf           string `json:"leaf,omitempty"`
}

// WhatIfRequest is the body of POST /v1/whatif.
type WhatIfRequest struct {
	AddJobs     []SubmitRequest `json:"add_jobs,omitempty"`
	RemoveJobs  []string        `json:"remove_jobs,omitempty"`
	AddNodes    []NodeRequest   `json:"add_nodes,omitempty"`
	RemoveNodes []string        `json:"remove_nodes,omitempty"`
	Policy      string          `json:"policy,omitempty"`
	// Tenants, a tenants file's tenants: list in JSON, replace the tenants
	// in force for the scenario (a changed copy tried before it is
	// applied).
	Tenants json.RawMessage `json:"tenants,omitempty"`
	// HorizonS bounds the simulation in seconds (0: the control plane's
	// default).
	HorizonS float64 `json:"horizon_s,omitempty"`
}

// ModeBody is the body of PUT /v1/mode and the answer of both mode routes.
type ModeBody struct {
	Mode service.Mode `json:"mode"`
}

// RollbackRequest is the optional body of POST /v1/models/{target}/rollback.
type RollbackRequest struct {
	// To is the version to make current; 0 (or no body) means the one
	// before the current.
	To int `json:"to,omitempty"`
}

// fieldErrs collects validation errors, each naming its field.
type fieldErrs struct {
	prefix string
	errs   []error
}

func (f *fieldErrs) add(field, format string, args ...any) {
	f.errs = append(f.errs, fmt.Errorf("%s%s: %s", f.prefix, field, fmt.Sprintf(format, args...)))
}

func (f *fieldErrs) err() error { return errors.Join(f.errs...) }

// toSpec checks the request and turns it into a cluster.JobSpec. tenant is
// the tenant the job belongs to (resolved by the caller from the token).
// The errors name each field under prefix ("" or "jobs[2].").
func (r JobSpecRequest) toSpec(prefix, tenant string) (cluster.JobSpec, error) {
	fe := &fieldErrs{prefix: prefix}
	spec := cluster.JobSpec{
		Name: r.Name, Tenant: tenant, User: r.User, GPUs: r.GPUs, GPUMilli: r.GPUMilli,
		GPUModels: r.GPUModels, CPUMilli: r.CPUMilli, MemoryBytes: r.MemoryBytes,
		GangSize: r.GangSize, Checkpointable: r.Checkpointable, Labels: r.Labels,
	}
	checkText(fe, "name", r.Name, maxNameBytes)
	checkText(fe, "user", r.User, maxNameBytes)
	spec.Tier = cluster.DefaultTier
	if r.Tier != "" {
		t, err := cluster.ParseTier(r.Tier)
		if err != nil {
			fe.add("tier", "%q is not one of production, standard, batch, opportunistic", r.Tier)
		}
		spec.Tier = t
	}
	switch {
	case r.GPUs < 0:
		fe.add("gpus", "%d is negative", r.GPUs)
	case r.GPUs > maxGPUsPerJob:
		fe.add("gpus", "%d is more than %d", r.GPUs, maxGPUsPerJob)
	case r.GPUs > 0 && r.GPUMilli == 0:
		spec.GPUMilli = cluster.MilliGPU
	}
	if len(r.GPUModels) > maxModels {
		fe.add("gpu_models", "%d models; at most %d", len(r.GPUModels), maxModels)
	}
	for i, m := range r.GPUModels {
		if m == "" || len(m) > maxNameBytes || !utf8.ValidString(m) {
			fe.add(fmt.Sprintf("gpu_models[%d]", i), "want a model name of 1 to %d bytes", maxNameBytes)
		}
	}
	if r.Deadline != "" {
		t, err := time.Parse(time.RFC3339, r.Deadline)
		if err != nil {
			fe.add("deadline", "%q is not an RFC 3339 time (e.g. 2026-01-05T09:00:00Z)", r.Deadline)
		}
		spec.Deadline = t.UTC()
	}
	if r.GangSize > maxGPUsPerJob {
		fe.add("gang_size", "%d is more than %d", r.GangSize, maxGPUsPerJob)
	}
	switch c := r.CheckpointCostS; {
	case c < 0:
		fe.add("checkpoint_cost_s", "%g is negative", c)
	case c > maxCheckpointS:
		fe.add("checkpoint_cost_s", "%g s is more than a week", c)
	default:
		spec.CheckpointCost = time.Duration(c * float64(time.Second))
	}
	switch l := r.TimeLimitS; {
	case l < 0 || math.IsNaN(l):
		fe.add("time_limit_s", "%g is negative", l)
	case l > maxTimeLimitS:
		fe.add("time_limit_s", "%g s is more than a year", l)
	default:
		spec.TimeLimit = time.Duration(l * float64(time.Second))
	}
	checkLabels(fe, r.Labels)
	if d := r.Data; d != nil {
		checkText(fe, "data.name", d.Name, maxNameBytes) // empty names and negative bytes: JobSpec.Validate
		for _, f := range []struct {
			field string
			names []string
		}{{"data.nodes", d.Nodes}, {"data.racks", d.Racks}} {
			field, names := f.field, f.names
			if len(names) > maxDataPlaces {
				fe.add(field, "%d names; at most %d", len(names), maxDataPlaces)
			}
			for i, n := range names {
				if len(n) > maxNameBytes || !utf8.ValidString(n) {
					fe.add(fmt.Sprintf("%s[%d]", field, i), "want a name of 1 to %d bytes", maxNameBytes)
				}
			}
		}
		spec.Data = &cluster.DataSource{Name: d.Name, Bytes: d.Bytes, Nodes: d.Nodes, Racks: d.Racks}
	}
	// The domain's own rules (shares, negative amounts) name their fields
	// in the same words.
	if len(fe.errs) == 0 {
		if err := spec.Validate(); err != nil {
			for _, e := range unjoin(err) {
				fe.errs = append(fe.errs, fmt.Errorf("%s%w", prefix, e))
			}
		}
	}
	return spec, fe.err()
}

func checkText(fe *fieldErrs, field, s string, maxBytes int) {
	if len(s) > maxBytes {
		fe.add(field, "%d bytes; at most %d", len(s), maxBytes)
	} else if !utf8.ValidString(s) {
		fe.add(field, "not valid UTF-8")
	}
}

func checkLabels(fe *fieldErrs, labels map[string]string) {
	if len(labels) > maxLabels {
		fe.add("labels", "%d labels; at most %d", len(labels), maxLabels)
		return
	}
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		v := labels[k]
		if !labelKeyPattern.MatchString(k) {
			fe.add("labels", "key %q: want 1 to 63 letters, digits, '.', '_', '-' or '/', starting with a letter or digit", k)
		}
		if len(v) > maxLabelValue || !utf8.ValidString(v) {
			fe.add("labels."+k, "want valid UTF-8 of at most %d bytes", maxLabelValue)
		}
	}
}

// unjoin splits an errors.Join into its errors.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// toSubmit checks a submission and turns it into a service.SubmitRequest.
func (r SubmitRequest) toSubmit(prefix, tenant string) (service.SubmitRequest, error) {
	fe := &fieldErrs{prefix: prefix}
	if r.ID != "" && !jobIDPattern.MatchString(r.ID) {
		fe.add("id", "%q: want 1 to 128 letters, digits, '.', '_' or '-', starting with a letter or digit", r.ID)
	}
	if len(r.Command) > maxArgs {
		fe.add("command", "%d arguments; at most %d", len(r.Command), maxArgs)
	}
	for i, a := range r.Command {
		if len(a) > maxArgBytes || strings.IndexByte(a, 0) >= 0 {
			fe.add(fmt.Sprintf("command[%d]", i), "want at most %d bytes and no NUL", maxArgBytes)
		}
	}
	if len(r.Env) > maxEnv {
		fe.add("env", "%d variables; at most %d", len(r.Env), maxEnv)
	}
	for _, k := range slices.Sorted(maps.Keys(r.Env)) {
		v := r.Env[k]
		switch {
		case !envNamePattern.MatchString(k):
			fe.add("env", "%q is not a variable name (letters, digits, '_', not starting with a digit)", k)
		case strings.HasPrefix(k, "PRESCIENT_") || containsFold(reservedEnv, k):
			fe.add("env."+k, "is set by the agent; a job may not set it")
		case len(v) > maxEnvValue || strings.IndexByte(v, 0) >= 0:
			fe.add("env."+k, "want at most %d bytes and no NUL", maxEnvValue)
		}
	}
	spec, err := r.JobSpecRequest.toSpec(prefix, tenant)
	if err != nil {
		fe.errs = append(fe.errs, unjoin(err)...)
	}
	if err := fe.err(); err != nil {
		return service.SubmitRequest{}, err
	}
	return service.SubmitRequest{ID: cluster.JobID(r.ID), Spec: spec, Command: r.Command, Env: r.Env}, nil
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

// toNode checks a hypothetical node and builds it from the GPU catalog.
func (r NodeRequest) toNode(prefix string) (cluster.Node, error) {
	fe := &fieldErrs{prefix: prefix}
	if r.Name == "" || len(r.Name) > maxNameBytes || !utf8.ValidString(r.Name) {
		fe.add("name", "want a node name of 1 to %d bytes", maxNameBytes)
	}
	switch {
	case r.GPUs < 0 || r.GPUs > maxGPUsPerNode:
		fe.add("gpus", "%d is outside 0..%d", r.GPUs, maxGPUsPerNode)
	case r.GPUs > 0 && r.GPUModel == "":
		fe.add("gpu_model", "empty; a node with GPUs needs their model")
	}
	checkText(fe, "gpu_model", r.GPUModel, maxNameBytes)
	checkText(fe, "rack", r.Rack, maxNameBytes)
	checkText(fe, "leaf", r.Leaf, maxNameBytes)
	_, known := cluster.LookupGPUModel(r.GPUModel)
	switch {
	case r.GPUMemoryBytes < 0:
		fe.add("gpu_memory_bytes", "%d is negative", r.GPUMemoryBytes)
	case r.GPUs > 0 && r.GPUModel != "" && !known && r.GPUMemoryBytes == 0:
		fe.add("gpu_model", "%q is not in the GPU catalog; give gpu_memory_bytes", r.GPUModel)
	}
	if err := fe.err(); err != nil {
		return cluster.Node{}, err
	}
	n := cluster.Node{Name: r.Name, State: cluster.NodeReady, Topology: cluster.Topology{Rack: r.Rack, Leaf: r.Leaf}}
	for i := range r.GPUs {
		g := cluster.NewGPU(i, r.GPUModel)
		if r.GPUMemoryBytes > 0 {
			g.MemoryBytes = r.GPUMemoryBytes
		}
		n.GPUs = append(n.GPUs, g)
	}
	return n, nil
}

// seconds turns a count of seconds from JSON into a duration, refusing
// what is negative or above max.
func seconds(fe *fieldErrs, field string, s float64, max time.Duration) time.Duration {
	if s < 0 || math.IsNaN(s) {
		fe.add(field, "%g: want seconds, not negative", s)
		return 0
	}
	if s > max.Seconds() {
		fe.add(field, "%g s is more than %g s", s, max.Seconds())
		return 0
	}
	return time.Duration(s * float64(time.Second))
}
