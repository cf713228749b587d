package store

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/prescient-sched/prescient/cluster"
)

// Times are stored as nanoseconds since the Unix epoch, UTC, and come back
// with time.Time's UTC location; the zero time is stored as NULL (or left
// out of JSON). Durations are stored as nanoseconds. Both round-trip
// exactly. The range this covers is the years 1678 to 2262.

// unixNanos converts a non-zero time, failing outside the storable range.
func unixNanos(t time.Time) (int64, error) {
	if t.Before(time.Unix(0, math.MinInt64)) || t.After(time.Unix(0, math.MaxInt64)) {
		return 0, fmt.Errorf("time %s is outside the years 1678 to 2262 that the store holds", t.Format(time.RFC3339))
	}
	return t.UnixNano(), nil
}

// nullNanos converts a time, the zero time to NULL.
func nullNanos(t time.Time) (sql.NullInt64, error) {
	if t.IsZero() {
		return sql.NullInt64{}, nil
	}
	n, err := unixNanos(t)
	return sql.NullInt64{Int64: n, Valid: err == nil}, err
}

// fromNanos is the inverse of unixNanos.
func fromNanos(n int64) time.Time { return time.Unix(0, n).UTC() }

// fromNullNanos is the inverse of nullNanos.
func fromNullNanos(n sql.NullInt64) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return fromNanos(n.Int64)
}

// ptrNanos converts a time for JSON, the zero time to nil.
func ptrNanos(t time.Time) (*int64, error) {
	n, err := nullNanos(t)
	if err != nil || !n.Valid {
		return nil, err
	}
	return &n.Int64, nil
}

// fromPtrNanos is the inverse of ptrNanos.
func fromPtrNanos(n *int64) time.Time {
	if n == nil {
		return time.Time{}
	}
	return fromNanos(*n)
}

// specRecord is the JSON of the JobSpec fields that have no column. Its
// keys are the storage format: rename a Go field freely, never a key.
type specRecord struct {
	GPUs             int               `json:"gpus"`
	GPUMilli         int               `json:"gpu_milli"`
	GPUModels        []string          `json:"gpu_models,omitempty"`
	CPUMilli         int64             `json:"cpu_milli"`
	MemoryBytes      int64             `json:"memory_bytes"`
	DeadlineUnixNs   *int64            `json:"deadline_unix_ns,omitempty"`
	GangSize         int               `json:"gang_size"`
	Checkpointable   bool              `json:"checkpointable"`
	CheckpointCostNs int64             `json:"checkpoint_cost_ns"`
	TimeLimitNs      int64             `json:"time_limit_ns,omitempty"`
	Labels           map[string]string `json:"labels,omitempty"`
	Data             *dataRecord       `json:"data,omitempty"`
}

// dataRecord is the JSON of a cluster.DataSource.
type dataRecord struct {
	Name  string   `json:"name"`
	Bytes int64    `json:"bytes,omitempty"`
	Nodes []string `json:"nodes,omitempty"`
	Racks []string `json:"racks,omitempty"`
}

// checkpointRecord is the JSON of a cluster.Checkpoint.
type checkpointRecord struct {
	TimeUnixNs int64  `json:"time_unix_ns"`
	Step       int64  `json:"step"`
	Path       string `json:"path"`
}

// outcomeRecord is the JSON of a cluster.Outcome.
type outcomeRecord struct {
	RunTimeNs          int64   `json:"run_time_ns"`
	PeakGPUMemoryBytes int64   `json:"peak_gpu_memory_bytes"`
	EnergyJ            float64 `json:"energy_j"`
	ExitCode           int     `json:"exit_code"`
}

// jobRow is a job as the columns of the jobs table hold it.
type jobRow struct {
	id, tenant, user, name, tier, state string
	submitTime                          int64
	attempts                            int64
	startTime, endTime                  sql.NullInt64
	lastCheckpoint                      sql.NullString
	outcome, spec                       string
}

// jobColumns lists the columns in the order of jobRow's args and scan.
const jobColumns = "id, tenant, user, name, tier, state, submit_time, attempts, start_time, end_time, last_checkpoint, outcome, spec"

func (r *jobRow) args() []any {
	return []any{r.id, r.tenant, r.user, r.name, r.tier, r.state, r.submitTime, r.attempts,
		r.startTime, r.endTime, r.lastCheckpoint, r.outcome, r.spec}
}

// scanner is what *sql.Row and *sql.Rows share.
type scanner interface{ Scan(dest ...any) error }

func (r *jobRow) scan(sc scanner) error {
	return sc.Scan(&r.id, &r.tenant, &r.user, &r.name, &r.tier, &r.state, &r.submitTime, &r.attempts,
		&r.startTime, &r.endTime, &r.lastCheckpoint, &r.outcome, &r.spec)
}

// encodeJob converts a job to its row.
func encodeJob(j cluster.Job) (jobRow, error) {
	r := jobRow{id: string(j.ID), tenant: j.Spec.Tenant, user: j.Spec.User, name: j.Spec.Name,
		tier: j.Spec.Tier.String(), state: string(j.State), attempts: int64(j.Attempts)}
	var err error
	if r.submitTime, err = unixNanos(j.SubmitTime); err != nil {
		return jobRow{}, fmt.Errorf("submit_time: %w", err)
	}
	if r.startTime, err = nullNanos(j.StartTime); err != nil {
		return jobRow{}, fmt.Errorf("start_time: %w", err)
	}
	if r.endTime, err = nullNanos(j.EndTime); err != nil {
		return jobRow{}, fmt.Errorf("end_time: %w", err)
	}
	if r.lastCheckpoint, err = encodeCheckpoint(j.LastCheckpoint); err != nil {
		return jobRow{}, fmt.Errorf("last_checkpoint: %w", err)
	}
	if r.outcome, err = encodeOutcome(j.Outcome); err != nil {
		return jobRow{}, fmt.Errorf("outcome: %w", err)
	}
	if r.spec, err = encodeSpec(j.Spec); err != nil {
		return jobRow{}, fmt.Errorf("spec: %w", err)
	}
	return r, nil
}

// decode converts a row back to the job it was encoded from.
func (r *jobRow) decode() (cluster.Job, error) { return r.decodeWith(nil) }

// decodeWith is decode with the spec from specs (nil: decoded here).
func (r *jobRow) decodeWith(specs *specCache) (cluster.Job, error) {
	j, err := r.decodeFields(specs)
	if err != nil {
		return cluster.Job{}, fmt.Errorf("decode job %s: %w", r.id, err)
	}
	return j, nil
}

// specCache keeps decoded specs by their stored text. The plan loop lists
// every queued job each cycle, and decoding a spec's JSON is most of
// reading a job; a spec's text decodes the same every time. Each caller
// gets a copy of its own.
type specCache struct {
	mu sync.Mutex
	m  map[string]cluster.JobSpec
}

// maxCachedSpecs bounds the cache; when full it starts over.
const maxCachedSpecs = 1 << 16

func (c *specCache) decode(text string) (cluster.JobSpec, error) {
	c.mu.Lock()
	spec, ok := c.m[text]
	c.mu.Unlock()
	if !ok {
		var err error
		if spec, err = decodeSpec(text); err != nil {
			return cluster.JobSpec{}, err
		}
		c.mu.Lock()
		if c.m == nil || len(c.m) >= maxCachedSpecs {
			c.m = make(map[string]cluster.JobSpec)
		}
		c.m[text] = spec
		c.mu.Unlock()
	}
	return cluster.Job{Spec: spec}.Clone().Spec, nil
}

func (r *jobRow) decodeFields(specs *specCache) (cluster.Job, error) {
	j := cluster.Job{ID: cluster.JobID(r.id), SubmitTime: fromNanos(r.submitTime), Attempts: int(r.attempts),
		StartTime: fromNullNanos(r.startTime), EndTime: fromNullNanos(r.endTime)}
	var err error
	if j.State, err = cluster.ParseJobState(r.state); err != nil {
		return j, err
	}
	decode := decodeSpec
	if specs != nil {
		decode = specs.decode
	}
	if j.Spec, err = decode(r.spec); err != nil {
		return j, fmt.Errorf("spec: %w", err)
	}
	if j.Spec.Tier, err = cluster.ParseTier(r.tier); err != nil {
		return j, err
	}
	j.Spec.Name, j.Spec.Tenant, j.Spec.User = r.name, r.tenant, r.user
	if j.LastCheckpoint, err = decodeCheckpoint(r.lastCheckpoint); err != nil {
		return j, fmt.Errorf("last_checkpoint: %w", err)
	}
	if j.Outcome, err = decodeOutcome(r.outcome); err != nil {
		return j, fmt.Errorf("outcome: %w", err)
	}
	return j, nil
}

func encodeSpec(s cluster.JobSpec) (string, error) {
	deadline, err := ptrNanos(s.Deadline)
	if err != nil {
		return "", fmt.Errorf("deadline: %w", err)
	}
	r := specRecord{GPUs: s.GPUs, GPUMilli: s.GPUMilli, GPUModels: s.GPUModels,
		CPUMilli: s.CPUMilli, MemoryBytes: s.MemoryBytes, DeadlineUnixNs: deadline, GangSize: s.GangSize,
		Checkpointable: s.Checkpointable, CheckpointCostNs: int64(s.CheckpointCost), TimeLimitNs: int64(s.TimeLimit), Labels: s.Labels}
	if d := s.Data; d != nil {
		r.Data = &dataRecord{Name: d.Name, Bytes: d.Bytes, Nodes: d.Nodes, Racks: d.Racks}
	}
	return marshal(r)
}

// decodeSpec decodes what encodeSpec wrote; name, tenant, user and tier
// come from their columns.
func decodeSpec(text string) (cluster.JobSpec, error) {
	var r specRecord
	if err := json.Unmarshal([]byte(text), &r); err != nil {
		return cluster.JobSpec{}, err
	}
	s := cluster.JobSpec{GPUs: r.GPUs, GPUMilli: r.GPUMilli, GPUModels: r.GPUModels,
		CPUMilli: r.CPUMilli, MemoryBytes: r.MemoryBytes, Deadline: fromPtrNanos(r.DeadlineUnixNs),
		GangSize: r.GangSize, Checkpointable: r.Checkpointable,
		CheckpointCost: time.Duration(r.CheckpointCostNs), TimeLimit: time.Duration(r.TimeLimitNs), Labels: r.Labels}
	if d := r.Data; d != nil {
		s.Data = &cluster.DataSource{Name: d.Name, Bytes: d.Bytes, Nodes: d.Nodes, Racks: d.Racks}
	}
	return s, nil
}

func encodeCheckpoint(cp *cluster.Checkpoint) (sql.NullString, error) {
	if cp == nil {
		return sql.NullString{}, nil
	}
	rec, err := newCheckpointRecord(*cp)
	if err != nil {
		return sql.NullString{}, err
	}
	text, err := marshal(rec)
	return sql.NullString{String: text, Valid: err == nil}, err
}

func newCheckpointRecord(cp cluster.Checkpoint) (checkpointRecord, error) {
	t, err := unixNanos(cp.Time)
	return checkpointRecord{TimeUnixNs: t, Step: cp.Step, Path: cp.Path}, err
}

func decodeCheckpoint(text sql.NullString) (*cluster.Checkpoint, error) {
	if !text.Valid {
		return nil, nil
	}
	var r checkpointRecord
	if err := json.Unmarshal([]byte(text.String), &r); err != nil {
		return nil, err
	}
	return &cluster.Checkpoint{Time: fromNanos(r.TimeUnixNs), Step: r.Step, Path: r.Path}, nil
}

func encodeOutcome(o cluster.Outcome) (string, error) {
	return marshal(outcomeRecord{RunTimeNs: int64(o.RunTime), PeakGPUMemoryBytes: o.PeakGPUMemoryBytes,
		EnergyJ: o.EnergyJ, ExitCode: o.ExitCode})
}

func decodeOutcome(text string) (cluster.Outcome, error) {
	var r outcomeRecord
	if err := json.Unmarshal([]byte(text), &r); err != nil {
		return cluster.Outcome{}, err
	}
	return cluster.Outcome{RunTime: time.Duration(r.RunTimeNs), PeakGPUMemoryBytes: r.PeakGPUMemoryBytes,
		EnergyJ: r.EnergyJ, ExitCode: r.ExitCode}, nil
}

func marshal(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}
